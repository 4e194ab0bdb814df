# tests/kube/faults.bash — what the fault tests (test-faults-*.sh) share,
# sourced after lib.bash: a control plane with four KWOK nodes, one KAI
# Queue without limits and the namespace `work` that names it; the daemon
# under the ServiceAccount and RBAC of examples/kubernetes/; pods to
# schedule; and the API server's audit log (DIR/audit.log) read as the
# daemon's writes, which is how these tests prove from the server's side
# what was written, how often and when.  The control plane, the daemon's
# credentials, start_serve and stop_serve are lib.bash's.
understory=${UNDERSTORY:-$root/build/release/understory}
python=/usr/bin/python3
sa_user=system:serviceaccount:understory-system:understory

# faults_cluster: the control plane, the RBAC and CRDs (kube_up), 4 nodes,
# the queue and namespace, and $work/understory.kubeconfig (the daemon's
# token).
faults_cluster() {
	kube_up
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
		queue_namespace work -1
	} | k apply -f - >/dev/null
	has_sa() { k -n work get serviceaccount default >/dev/null 2>&1; }
	until_ok 60 "the namespace work has its ServiceAccount" has_sa
	sa_kubeconfig
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
