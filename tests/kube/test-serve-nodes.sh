#!/usr/bin/env bash
# tests/kube/test-serve-nodes.sh — `understory serve` keeps a real
# cluster's nodes and KAI queues in its engine's view: it connects with a ServiceAccount
# token under the RBAC of examples/kubernetes/rbac.yaml, lists and then
# watches nodes, and the engine sees each as Kubernetes has it
# (allocatable, pool label, taints, cordon and readiness), including nodes
# added, changed and deleted after the list, and across an API server
# restart that forces a new list (410 Gone).  A token file is read again
# before each request (rotation).  Without the RBAC binding the
# API server refuses it (403) and it retries; SIGTERM stops it cleanly.
# Admin endpoints on port 0: two serves run at once here, and other test
# runs may share the machine.
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
	for f in "$work"/*.out "$work"/*.err; do
		[[ -f $f ]] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
	done
	exit 1
}

# until_line FILE LINE WHAT: FILE gets exactly LINE within 60 s.
until_line() {
	local end=$((SECONDS + 60))
	until grep -qxF -- "$2" "$1" 2>/dev/null; do
		((SECONDS < end)) || fail "$3: no line '$2' in $1"
		sleep 0.5
	done
}

"$cluster" up "$work/c"
k() { "$kubectl" --kubeconfig "$work/c/kubeconfig" "$@"; }
k apply -f "$root/examples/kubernetes/rbac.yaml" >/dev/null
k -n understory-system create serviceaccount nobody >/dev/null
k apply -f "$root/examples/kubernetes/kwok/fake-gpu-node.yaml" >/dev/null
k apply -f "$root/examples/kubernetes/crds.yaml" >/dev/null
k wait --for condition=established crd/queues.scheduling.run.ai --timeout=60s >/dev/null
# 510 more nodes (no kubelet: never Ready), so the list takes two pages
for i in $(seq -w 1 510); do
	printf -- '---\napiVersion: v1\nkind: Node\nmetadata: {name: cpu-%s}\n' "$i"
done >"$work/nodes.yaml"
k apply -f "$work/nodes.yaml" >/dev/null

# token-kubeconfig SA FILE: a kubeconfig for ServiceAccount SA's token.
token_kubeconfig() {
	cat >"$2" <<-YAML
		apiVersion: v1
		kind: Config
		clusters:
		- name: test
		  cluster:
		    server: https://127.0.0.1:$(cat "$work/c/api-port")
		    certificate-authority: $work/c/certs/ca.crt
		users:
		- name: $1
		  user:
		    token: $(k -n understory-system create token "$1")
		contexts:
		- name: $1
		  context: {cluster: test, user: $1}
		current-context: $1
	YAML
}
token_kubeconfig understory "$work/understory.kubeconfig"
token_kubeconfig nobody "$work/nobody.kubeconfig"

"$understory" serve --leader-elect=false --kubeconfig "$work/understory.kubeconfig" --admin-address 127.0.0.1:0 >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
pids+=("$serve_pid")
until_line "$work/serve.out" "nodes synced: 511 in the engine" "the first list, in pages of 500"
grep -qxE "node cpu-510: pool default, gpu 0, cpu 0m, memory 0, taints .*, unschedulable" "$work/serve.out" ||
	fail "the second page of the list did not reach the engine"
until_line "$work/serve.out" "queues synced: 0 in the engine, 0 waiting for a parent" "the first list of queues"
fake=kwok.x-k8s.io/node=fake:NoSchedule
until_line "$work/serve.out" \
	"node gpu-0: pool default, gpu 8, cpu 32000m, memory 274877906944, taints $fake, schedulable" \
	"gpu-0 once KWOK made it Ready"

# Changes after the list come through the watch.
k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Node
metadata:
  name: gpu-1
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, kai.scheduler/node-pool: pool-a}
spec:
  taints:
  - {key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}
  - {key: nvidia.com/gpu, effect: NoSchedule}
status:
  allocatable: {cpu: 7500m, memory: 64Gi, pods: "110", nvidia.com/gpu: "4"}
  capacity: {cpu: "8", memory: 64Gi, pods: "110", nvidia.com/gpu: "4"}
YAML
until_line "$work/serve.out" \
	"node gpu-1: pool pool-a, gpu 4, cpu 7500m, memory 68719476736, taints $fake,nvidia.com/gpu:NoSchedule, schedulable" \
	"gpu-1 added after the list"
k cordon gpu-0 >/dev/null
until_line "$work/serve.out" \
	"node gpu-0: pool default, gpu 8, cpu 32000m, memory 274877906944, taints $fake, unschedulable" \
	"gpu-0 cordoned"
# A change the engine does not see (annotations here; a status heartbeat
# is another) is not sent to it again, so it logs no line; one it sees (a
# label) is.  The count is read once the cordon's own changes (the
# controller manager taints the node too) have come through.
lines() { grep -c "^node gpu-0: " "$work/serve.out" || true; }
before=$(lines)
end=$((SECONDS + 30))
while sleep 2; do
	now=$(lines)
	((now == before)) && break
	before=$now
	((SECONDS < end)) || fail "gpu-0's lines never settled"
done
k annotate node gpu-0 understory.test/heartbeat=1 >/dev/null
k annotate node gpu-0 understory.test/heartbeat=2 --overwrite >/dev/null
k label node gpu-0 understory.test/role=trained >/dev/null
end=$((SECONDS + 60))
until (($(lines) > before)); do
	((SECONDS < end)) || fail "gpu-0 labelled: no new line for it"
	sleep 0.5
done
sleep 1
(($(lines) == before + 1)) || fail "gpu-0 was sent again for changes the engine does not see: $before lines, then $(lines)"
k delete node gpu-1 >/dev/null
until_line "$work/serve.out" "node gpu-1: removed" "gpu-1 deleted"

# KAI queues, a child before its parent: the child waits, then both go in
# with KAI's units converted (millicores, megabytes) and KAI's default
# priority (100).
k apply -f - >/dev/null <<'YAML'
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team-a}
spec:
  parentQueue: research
  priority: 0
  resources:
    gpu: {quota: 16, overQuotaWeight: 2, limit: -1}
    cpu: {quota: 1500, overQuotaWeight: 1, limit: -1}
    memory: {quota: 2048, overQuotaWeight: 1, limit: 4096}
YAML
until_line "$work/serve.err" "understory serve: queue team-a waits for its parent research" "team-a waiting"
grep -q "^queue team-a" "$work/serve.out" && fail "team-a went in before its parent"
k apply -f - >/dev/null <<'YAML'
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: research}
spec:
  resources:
    gpu: {quota: 24}
YAML
until_line "$work/serve.out" 'queue research: {"name":"research","priority":100,"resources":{"gpu":{"quota":24}}}' \
	"research taken"
until_line "$work/serve.out" 'queue team-a: {"name":"team-a","parent":"research","priority":0,"resources":{"gpu":{"quota":16,"limit":-1,"over_quota_weight":2},"cpu":{"quota":"1500m","limit":-1,"over_quota_weight":1},"memory":{"quota":"2048000000","limit":"4096000000","over_quota_weight":1}}}' \
	"team-a taken once its parent is there"
k delete queue.scheduling.run.ai team-a >/dev/null
until_line "$work/serve.out" "queue team-a: removed" "team-a deleted"

# Without the binding: refused, and retried.
"$understory" serve --leader-elect=false --kubeconfig "$work/nobody.kubeconfig" --admin-address 127.0.0.1:0 >"$work/nobody.out" 2>"$work/nobody.err" &
pids+=("$!")
end=$((SECONDS + 30))
until [[ $(grep -c "list /api/v1/nodes: HTTP 403" "$work/nobody.err" 2>/dev/null || true) -ge 2 ]]; do
	((SECONDS < end)) || fail "serve without RBAC was not refused twice (a retry) with 403"
	sleep 0.5
done
[[ ! -s $work/nobody.out ]] || fail "serve without RBAC saw nodes: $(cat "$work/nobody.out")"

# The API server restarts while serve is frozen (its watch connection
# dies), a node is deleted, etcd is compacted past what serve saw and the
# API server restarts again: its watch cannot resume (410 Gone), so it
# lists again, and the node deleted while it was away is reported removed.
# (One restart is not enough: a restarted API server's watch cache starts
# at etcd's revision then, which serve may already hold from a bookmark,
# and then serves the delete from its cache whatever etcd compacted; the
# second starts after the delete, past anything serve saw.)
kill -STOP "$serve_pid"
"$cluster" restart "$work/c" kube-apiserver
k delete node gpu-0 >/dev/null
"$cluster" compact "$work/c"
"$cluster" restart "$work/c" kube-apiserver
kill -CONT "$serve_pid"
until_line "$work/serve.out" "node gpu-0: removed" "gpu-0 deleted while serve was away"
grep -q "watch /api/v1/nodes: resource version .* is gone (410); listing again" "$work/serve.err" ||
	fail "serve saw the delete without listing again after 410"
# and it watches again from the new list
k apply -f "$root/examples/kubernetes/kwok/fake-gpu-node.yaml" >/dev/null
until_line "$work/serve.out" \
	"node gpu-0: pool default, gpu 8, cpu 32000m, memory 274877906944, taints $fake, schedulable" \
	"gpu-0 added again after the relist"

# A token file is read again before each request (service-account tokens
# rotate): with a bad token serve is refused (401); once the file holds a
# good one, its next retry gets through.
sed 's|^    token: .*|    tokenFile: '"$work"'/token|' "$work/understory.kubeconfig" >"$work/rotating.kubeconfig"
echo "not-a-token" >"$work/token"
"$understory" serve --leader-elect=false --kubeconfig "$work/rotating.kubeconfig" --admin-address 127.0.0.1:0 >"$work/rotating.out" 2>"$work/rotating.err" &
pids+=("$!")
# (the wait before the next try is jittered: serve/backoff.c)
end=$((SECONDS + 60))
until grep -qE '^understory serve: list /api/v1/nodes: HTTP 401; again in [0-9]+ ms$' "$work/rotating.err" 2>/dev/null; do
	((SECONDS < end)) || fail "a bad token refused: no 'list /api/v1/nodes: HTTP 401; again in N ms' in $work/rotating.err"
	sleep 0.5
done
[[ ! -s $work/rotating.out ]] || fail "serve with a bad token saw nodes"
k -n understory-system create token understory >"$work/token"
until_line "$work/rotating.out" "nodes synced: 511 in the engine" "the rotated token used"

# SIGTERM: a clean stop.
kill -TERM "$serve_pid"
status=0
wait "$serve_pid" || status=$?
[[ $status -eq 0 ]] || fail "serve exited $status on SIGTERM"
grep -qx "understory serve: stopped" "$work/serve.err" || fail "serve did not say it stopped"
echo "serve: list, watch (add, change, delete), RBAC refusal and retry, SIGTERM: ok"
