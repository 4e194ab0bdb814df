#!/usr/bin/env bash
# tests/kube/test-serve-admin.sh — the admin endpoint of a running
# `understory serve` against a real control plane: /healthz answers while
# it runs; /readyz is 503 naming what is not synced while the API server
# refuses it (403, no RBAC yet) and 200 once the binding lets its list
# through; /metrics is read by a real Prometheus parser (Debian's
# python3-prometheus-client, tests/prom_check.py) and its values agree
# with the cluster: nodes held = nodes kubectl lists (after the list and
# through the watch), list requests counted by code (403 then 200), and a
# forced relist (API server restart + etcd compaction: 410 Gone) counted
# as a relist and a watch restart.  A bad or taken --admin-address is
# refused with exit 2.
set -euo pipefail
# A command that stops the test under `set -e` names itself and its line:
# a failure outside fail() would otherwise leave no message at all.
set -E
trap 'echo "FAIL: ${BASH_SOURCE[0]##*/}:$LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster=$here/cluster.sh
understory=${UNDERSTORY:-$root/build/release/understory}
"$here/build.sh"
kubectl=$root/build/kube/bin/kubectl
python=/usr/bin/python3 # Debian's, where python3-prometheus-client is

work=$(mktemp -d "${TMPDIR:-/tmp}/understory-kube.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	"$cluster" down "$work/c" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	for f in "$work"/*.out "$work"/*.err "$work"/*.prom; do
		[[ -f $f ]] && { echo "--- $f" >&2; tail -n 40 "$f" >&2; }
	done
	exit 1
}

"$cluster" up "$work/c"
k() { "$kubectl" --kubeconfig "$work/c/kubeconfig" "$@"; }
k apply -f "$root/examples/kubernetes/rbac.yaml" >/dev/null
# KAI's Queue resource: serve watches queues too, and is ready only when
# that list has synced as well.
k apply -f "$root/examples/kubernetes/crds.yaml" >/dev/null
k wait --for condition=established --timeout=60s crd/queues.scheduling.run.ai >/dev/null
k -n understory-system create serviceaccount operator >/dev/null
k apply -f "$root/examples/kubernetes/kwok/fake-gpu-node.yaml" >/dev/null
for q in research team-a; do
	k apply -f - >/dev/null <<-YAML
		apiVersion: scheduling.run.ai/v2
		kind: Queue
		metadata: {name: $q}
		spec:
		  resources:
		    gpu: {quota: 8, overQuotaWeight: 1, limit: -1}
	YAML
done
for i in 1 2; do
	k apply -f - >/dev/null <<-YAML
		apiVersion: v1
		kind: Node
		metadata:
		  name: cpu-$i
		  annotations: {kwok.x-k8s.io/node: fake}
		  labels: {type: kwok}
		status:
		  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
		  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
	YAML
done

# A kubeconfig for the ServiceAccount "operator", bound to nothing yet.
cat >"$work/operator.kubeconfig" <<-YAML
	apiVersion: v1
	kind: Config
	clusters:
	- name: test
	  cluster:
	    server: https://127.0.0.1:$(cat "$work/c/api-port")
	    certificate-authority: $work/c/certs/ca.crt
	users:
	- name: operator
	  user:
	    token: $(k -n understory-system create token operator)
	contexts:
	- name: operator
	  context: {cluster: test, user: operator}
	current-context: operator
YAML

# Bad and taken admin addresses: exit 2, naming the address, before any
# connection.
status=0
"$understory" serve --leader-elect=false --kubeconfig "$work/operator.kubeconfig" --admin-address nonsense \
	>"$work/bad.out" 2>"$work/bad.err" || status=$?
[[ $status -eq 2 ]] || fail "a bad --admin-address exited $status, not 2"
grep -q "admin address 'nonsense': expected HOST:PORT" "$work/bad.err" || fail "a bad --admin-address was not named"

"$understory" serve --leader-elect=false --kubeconfig "$work/operator.kubeconfig" --admin-address 127.0.0.1:0 \
	>"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
pids+=("$serve_pid")
end=$((SECONDS + 30))
until port=$(sed -n 's|^understory serve: admin endpoint on http://127.0.0.1:\([0-9]*\)$|\1|p' "$work/serve.err") &&
	[[ -n $port ]]; do
	((SECONDS < end)) || fail "serve did not say where its admin endpoint is"
	sleep 0.2
done
admin=http://127.0.0.1:$port

status=0
"$understory" serve --leader-elect=false --kubeconfig "$work/operator.kubeconfig" --admin-address "127.0.0.1:$port" \
	>"$work/taken.out" 2>"$work/taken.err" || status=$?
[[ $status -eq 2 ]] || fail "a taken --admin-address exited $status, not 2"
grep -q "admin address 127.0.0.1:$port: address already in use" "$work/taken.err" ||
	fail "a taken --admin-address was not named"

# get PATH: the status code, body in $work/body
get() { curl -s -o "$work/body" -w '%{http_code}' --max-time 10 "$admin$1"; }

# scrape NAME: /metrics parsed by the real parser into $work/NAME.prom
# (one sample a line), or fail
scrape() {
	[[ $(get /metrics) == 200 ]] || fail "/metrics did not answer 200"
	cp "$work/body" "$work/$1.txt"
	"$python" "$root/tests/prom_check.py" "$work/$1.txt" >"$work/$1.prom" ||
		fail "/metrics does not parse: $(cat "$work/$1.prom")"
}

# sample FILE LINE-PREFIX: the value of the sample whose line starts so
sample() { awk -v p="$2" 'index($0, p) == 1 { print $NF }' "$work/$1.prom"; }

# Refused (403): not ready, and why; healthy all the same.
end=$((SECONDS + 30))
until [[ $(grep -c "list /api/v1/nodes: HTTP 403" "$work/serve.err" 2>/dev/null || true) -ge 2 ]]; do
	((SECONDS < end)) || fail "serve was not refused twice with 403"
	sleep 0.5
done
[[ $(get /healthz) == 200 ]] || fail "/healthz is not 200 while serve runs"
[[ $(get /readyz) == 503 ]] || fail "/readyz is not 503 before the nodes synced"
grep -qx "not ready: nodes not synced yet" "$work/body" || fail "/readyz did not say why: $(cat "$work/body")"
grep -qx "not ready: queues not synced yet" "$work/body" || fail "/readyz did not name the queues: $(cat "$work/body")"
scrape refused
refused=$(sample refused 'understory_api_requests_total{code="403",verb="list"} ')
[[ -n $refused ]] && (($(printf '%.0f' "$refused") >= 2)) || fail "403 lists counted: '$refused', want >= 2"
[[ $(sample refused 'understory_informer_synced{resource="nodes"} ') == 0.0 ]] || fail "nodes counted as synced"
grep -q '^understory_api_requests_total{code="200"' "$work/refused.prom" && fail "a request counted as 200 before the binding"

# The binding lets it through: ready, and the metrics hold the cluster.
k create clusterrolebinding understory-operator --clusterrole=understory \
	--serviceaccount=understory-system:operator >/dev/null
end=$((SECONDS + 60))
until [[ $(get /readyz) == 200 ]]; do
	((SECONDS < end)) || fail "/readyz did not turn 200 after the binding: $(cat "$work/body")"
	sleep 0.5
done
nodes=$(k get nodes --no-headers | wc -l)
((nodes == 3)) || fail "the cluster has $nodes nodes, want 3"
scrape ready
[[ $(sample ready 'understory_informer_objects{resource="nodes"} ') == "$nodes.0" ]] ||
	fail "nodes held $(sample ready 'understory_informer_objects{resource="nodes"} '), kubectl lists $nodes"
[[ $(sample ready 'understory_informer_synced{resource="nodes"} ') == 1.0 ]] || fail "nodes not counted as synced"
[[ $(sample ready 'understory_informer_objects{resource="queues"} ') == 2.0 ]] ||
	fail "queues held $(sample ready 'understory_informer_objects{resource="queues"} '), want 2"
ok=$(sample ready 'understory_api_requests_total{code="200",verb="list"} ')
[[ -n $ok ]] && (($(printf '%.0f' "$ok") >= 1)) || fail "200 lists counted: '$ok', want >= 1"
# (every informer: nodes, queues, pods, namespaces, podgroups, priorityclasses)
lists=$(awk '/^understory_informer_lists_total\{/ {s += $2} END {printf "%.0f", s}' "$work/ready.prom")
refused_now=$(sample ready 'understory_api_requests_total{code="403",verb="list"} ')
# every list attempt of every informer is one list request, refused or not
[[ $lists -eq $(($(printf '%.0f' "$ok") + $(printf '%.0f' "$refused_now"))) ]] ||
	fail "lists_total $lists != list requests ($ok ok + $refused_now refused)"
for family in understory_cycle_duration_seconds understory_decisions_total understory_evictions_total \
	understory_pending_pods understory_policy_reloads_total understory_leader understory_background_gpus \
	understory_idle_gpus understory_background_gpu_seconds_total understory_policy_info \
	understory_policy_calls_total understory_node_classes_total understory_scores_kept_total \
	understory_nodes_short; do
	grep -q "^# TYPE $family " "$work/ready.txt" || fail "/metrics has no family $family"
done
[[ $(sample ready 'understory_leader{} ') == 1.0 ]] || fail "understory_leader is not 1 without an election"

# A node added after the list comes through the watch, and is counted.
k apply -f - >/dev/null <<-YAML
	apiVersion: v1
	kind: Node
	metadata:
	  name: cpu-3
	  annotations: {kwok.x-k8s.io/node: fake}
	  labels: {type: kwok}
	status:
	  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
	  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
YAML
end=$((SECONDS + 30))
until scrape added && [[ $(sample added 'understory_informer_objects{resource="nodes"} ') == 4.0 ]]; do
	((SECONDS < end)) || fail "the node added after the list is not counted"
	sleep 0.5
done

# A relist (API server restart while serve is frozen, a node deleted,
# etcd compacted, the API server restarted again: the watch cannot resume,
# 410 Gone) is counted.  (After one restart the watch cache may start at
# the revision serve holds from a bookmark and serve the delete itself:
# the second restart's cache starts after the delete.)
before_lists=$(printf '%.0f' "$(sample added 'understory_informer_lists_total{resource="nodes"} ')")
kill -STOP "$serve_pid"
"$cluster" restart "$work/c" kube-apiserver
k delete node cpu-3 >/dev/null
"$cluster" compact "$work/c"
"$cluster" restart "$work/c" kube-apiserver
kill -CONT "$serve_pid"
end=$((SECONDS + 60))
until scrape relisted &&
	[[ $(printf '%.0f' "$(sample relisted 'understory_informer_lists_total{resource="nodes"} ')") -gt $before_lists ]] &&
	[[ $(sample relisted 'understory_informer_objects{resource="nodes"} ') == 3.0 ]]; do
	((SECONDS < end)) || fail "the relist after 410 is not counted"
	sleep 0.5
done
restarts=$(sample relisted 'understory_informer_watch_restarts_total{resource="nodes"} ')
[[ -n $restarts ]] && (($(printf '%.0f' "$restarts") >= 1)) || fail "watch restarts counted: '$restarts', want >= 1"
[[ $(get /readyz) == 200 ]] || fail "/readyz is not 200 after the relist"

kill -TERM "$serve_pid"
status=0
wait "$serve_pid" || status=$?
[[ $status -eq 0 ]] || fail "serve exited $status on SIGTERM"
echo "serve admin: healthz, readyz 503 -> 200, metrics parsed and matching the cluster, relist counted: ok"
