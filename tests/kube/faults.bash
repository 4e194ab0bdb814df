# tests/kube/faults.bash — what the fault tests (test-faults-*.sh) share,
# sourced after lib.bash: a control plane with four KWOK nodes, one KAI
# Queue without limits and the namespace `work` that names it; the daemon
# under the ServiceAccount and RBAC of examples/kubernetes/; pods to
# schedule; and the API server's audit log (DIR/audit.log) read as the
# daemon's writes, which is how these tests prove from the server's side
# what was written, how often and when.
understory=${UNDERSTORY:-$root/build/release/understory}
python=/usr/bin/python3
sa_user=system:serviceaccount:understory-system:understory

pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill -CONT "$p" 2>/dev/null || true
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	"$cluster" down "$work/c" 2>/dev/null
	[[ -n ${KEEP_WORK:-} ]] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	for f in "$work"/*.out "$work"/*.err; do
		[[ -f $f ]] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }
	done
	exit 1
}

k() { "$kubectl" --kubeconfig "$work/c/kubeconfig" "$@"; }

# faults_cluster: the control plane, the RBAC and CRDs, 4 nodes, the queue
# and namespace, and $work/understory.kubeconfig (the daemon's token).
faults_cluster() {
	"$cluster" up "$work/c"
	k apply -f "$root/examples/kubernetes/rbac.yaml" >/dev/null
	k apply -f "$root/examples/kubernetes/crds.yaml" >/dev/null
	k wait --for condition=established --timeout=60s crd/queues.scheduling.run.ai crd/podgroups.scheduling.run.ai >/dev/null
	{
		for n in 1 2 3 4; do
			cat <<-YAML
				apiVersion: v1
				kind: Node
				metadata:
				  name: n$n
				  annotations: {kwok.x-k8s.io/node: fake}
				  labels: {type: kwok, kubernetes.io/hostname: n$n}
				status:
				  allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}
				  capacity: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}
				---
			YAML
		done
		cat <<-YAML
			apiVersion: scheduling.run.ai/v2
			kind: Queue
			metadata: {name: work}
			spec:
			  resources:
			    gpu: {quota: -1, overQuotaWeight: 1, limit: -1}
			    cpu: {quota: -1, overQuotaWeight: 1, limit: -1}
			    memory: {quota: -1, overQuotaWeight: 1, limit: -1}
			---
			apiVersion: v1
			kind: Namespace
			metadata:
			  name: work
			  labels: {kai.scheduler/queue: work}
		YAML
	} | k apply -f - >/dev/null
	has_sa() { k -n work get serviceaccount default >/dev/null 2>&1; }
	until_ok 60 "the namespace work has its ServiceAccount" has_sa
	cat >"$work/understory.kubeconfig" <<-YAML
		apiVersion: v1
		kind: Config
		clusters:
		- name: test
		  cluster:
		    server: https://127.0.0.1:$(cat "$work/c/api-port")
		    certificate-authority: $work/c/certs/ca.crt
		users:
		- name: understory
		  user:
		    token: $(k -n understory-system create token understory --duration 1h)
		contexts:
		- name: understory
		  context: {cluster: test, user: understory}
		current-context: understory
	YAML
}

# start_serve NAME [ARGS...]: the daemon with ARGS, output in
# $work/NAME.out/.err, pid in $serve_pid, admin endpoint in $admin; returns
# once every informer has listed (/readyz).
start_serve() {
	local name=$1
	shift
	"$understory" serve --kubeconfig "$work/understory.kubeconfig" --admin-address 127.0.0.1:0 "$@" \
		>"$work/$name.out" 2>"$work/$name.err" &
	serve_pid=$!
	pids+=("$serve_pid")
	local port= end=$((SECONDS + 30))
	until port=$(sed -n 's|^understory serve: admin endpoint on http://127.0.0.1:\([0-9]*\)$|\1|p' "$work/$name.err" 2>/dev/null) &&
		[[ -n $port ]]; do
		((SECONDS < end)) || fail "serve ($name) did not say where its admin endpoint is"
		sleep 0.2
	done
	admin=http://127.0.0.1:$port
	until_ok 60 "serve ($name) is ready" curl -sf -o /dev/null --max-time 5 "$admin/readyz"
}

# stop_serve: SIGTERM, and it stops cleanly.
stop_serve() {
	kill -TERM "$serve_pid"
	wait "$serve_pid" || fail "serve did not stop cleanly on SIGTERM"
}

# pod_yaml NAME [SCHEDULER]: a small pod for understory (or SCHEDULER).
pod_yaml() {
	cat <<-YAML
		apiVersion: v1
		kind: Pod
		metadata: {name: $1, namespace: work}
		spec:
		  schedulerName: ${2:-understory}
		  terminationGracePeriodSeconds: 0
		  containers:
		  - name: c
		    image: registry.example/work:1
		    resources:
		      requests: {cpu: 100m, memory: 64Mi}
		---
	YAML
}
# make_pods PREFIX FROM TO: pods work/PREFIX-FROM..TO for understory, one
# apply.
make_pods() {
	for i in $(seq "$2" "$3"); do pod_yaml "$1-$i"; done | k apply -f - >/dev/null
}

# bound_count PREFIX: pods work/PREFIX-* with a node.
bound_count() {
	k -n work get pods -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}' |
		awk -v p="$1-" 'index($1, p) == 1 && $2 != "" {n++} END {print n + 0}'
}

# audit [USER]: the writes USER (default: the daemon) made, one a line,
# oldest first: requestReceivedTimestamp (seconds, as a number), verb,
# resource[/subresource], namespace/name, response code.
audit() {
	"$python" - "$work/c/audit.log" "${1:-$sa_user}" <<-'PY'
		import datetime, json, sys
		rows = []
		for line in open(sys.argv[1]):
		    e = json.loads(line)
		    if e.get("stage") != "ResponseComplete" or e.get("user", {}).get("username") != sys.argv[2]:
		        continue
		    o = e.get("objectRef", {})
		    res = o.get("resource", "") + ("/" + o["subresource"] if o.get("subresource") else "")
		    t = datetime.datetime.strptime(e["requestReceivedTimestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
		    t = t.replace(tzinfo=datetime.timezone.utc).timestamp()
		    rows.append((t, e["verb"], res, "%s/%s" % (o.get("namespace", ""), o.get("name", "")),
		                 e.get("responseStatus", {}).get("code", 0)))
		for r in sorted(rows):
		    print("%.6f %s %s %s %s" % r)
	PY
}

# binds_once PREFIX N: the audit log shows, for each of the N pods
# work/PREFIX-1..N, exactly one binding created (201) by the daemon, and
# no bind of them that succeeded twice; else fail naming the pods.
binds_once() {
	local bad
	bad=$(audit | awk -v p="work/$1-" -v n="$2" '
		$2 == "create" && $3 == "pods/binding" && index($4, p) == 1 && $5 == 201 {c[$4]++}
		END {
			for (i = 1; i <= n; i++) { k = p i; if (c[k] != 1) print k ": " c[k] + 0 " binds" }
		}')
	[[ -z $bad ]] || fail "not bound exactly once by the daemon (audit log): $bad"
}

# scrape NAME: /metrics into $work/NAME.prom, one sample a line (the real
# Prometheus parser, tests/prom_check.py).
scrape() {
	curl -sf --max-time 10 -o "$work/$1.txt" "$admin/metrics" || fail "/metrics did not answer"
	"$python" "$root/tests/prom_check.py" "$work/$1.txt" >"$work/$1.prom" ||
		fail "/metrics does not parse: $(cat "$work/$1.prom")"
}
# sample NAME LINE-PREFIX: the value of that sample (empty: none)
sample() { awk -v p="$2" 'index($0, p) == 1 { print $NF }' "$work/$1.prom"; }
