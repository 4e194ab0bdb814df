#!/usr/bin/env bash
# tests/kube/test-import.sh — `understory import` on what a real API server
# serves: the seed story's objects (examples/kubernetes/) with serve-1
# bound to n1 and a kube-system pod of the default scheduler bound to n2,
# captured with the kubectl get of docs/kubernetes-import.md and piped to
# `understory import -`.  The document names every node, queue and
# workload as the cluster has them, the kube-system pod is an external
# workload on n2, and `understory simulate` on it places what the seed
# story places: training on two whole nodes, serve-1 kept on n1, the
# burn-in on what is left, the external pod untouched.
set -euo pipefail
. "$(dirname "$0")/lib.bash"
understory=${UNDERSTORY:-$root/build/release/understory}

trap '"$cluster" down "$work/c" 2>/dev/null; rm -rf "$work"' EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

"$cluster" up "$work/c"
k() { "$kubectl" --kubeconfig "$work/c/kubeconfig" "$@"; }

k apply -f "$root/examples/kubernetes/crds.yaml" >/dev/null
k wait --for condition=established --timeout=60s \
	crd/queues.scheduling.run.ai crd/podgroups.scheduling.run.ai >/dev/null ||
	fail "the CRDs did not become established"
k apply -f "$root/examples/kubernetes/seed-story/" >/dev/null
count() { [[ $(k get pods -A --no-headers 2>/dev/null | wc -l) -ge $1 ]]; }
# 28 burn-in, 4 health checks (one per node), serve-1, 2 training pods
until_ok 120 "the controllers did not create the seed story's pods" count 35

printf '{"apiVersion":"v1","kind":"Binding","metadata":{"name":"serve-1","namespace":"team-a"},"target":{"apiVersion":"v1","kind":"Node","name":"n1"}}' >"$work/bind.json"
k create --raw /api/v1/namespaces/team-a/pods/serve-1/binding -f "$work/bind.json" >/dev/null
k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: gpu-driver-n2, namespace: kube-system}
spec:
  nodeName: n2
  containers:
  - name: driver
    image: registry.example/driver:1
    resources:
      requests: {cpu: 200m, memory: 128Mi, nvidia.com/gpu: "1"}
      limits: {nvidia.com/gpu: "1"}
YAML

k get nodes,pods,namespaces,queues.scheduling.run.ai,podgroups.scheduling.run.ai,priorityclasses -A -o json |
	"$understory" import - >"$work/cluster.json" 2>"$work/err" || fail "import: $(cat "$work/err")"
doc=$(tr -d ' \t\n' <"$work/cluster.json")
for want in '"name":"n1","pool":"default","cpu":"64000m","memory":"549755813888","gpu":8' \
	'"name":"team-a","parent":"research"' \
	'"name":"infra/gpu-burn","queue":"infra-bg"' '"controller":"deployment"' '"replicas":28' \
	'"name":"infra/node-check","queue":"infra-bg"' '"controller":"daemonset"' \
	'"name":"team-a/train-1","queue":"team-a","priority":50' '"min_member":2' \
	'"pods":[{"name":"team-a/serve-1","node":"n1","state":"running"}]' \
	'"name":"kube-system/gpu-driver-n2","external":true' \
	'"pods":[{"name":"kube-system/gpu-driver-n2","node":"n2","state":"running"}]'; do
	[[ $doc == *"$want"* ]] || fail "the imported document lacks $want"
done

"$understory" simulate "$work/cluster.json" --check-invariants >"$work/out" 2>"$work/err" ||
	fail "simulate: $(cat "$work/err")"
grep -q 'bound 2 pods of team-a/train-1 on n3, n4' "$work/out" ||
	fail "training is not on two whole nodes beside serve-1 and the driver: $(cat "$work/out")"
grep -qE '^ +team-a/serve-1 +1 pod +on n1$' "$work/out" || fail "serve-1 left n1: $(cat "$work/out")"
grep -qE '^ +kube-system/gpu-driver-n2 +1 pod +on n2$' "$work/out" || fail "the driver moved: $(cat "$work/out")"
# 32 GPUs: training 16, serve-1 1, the driver 1: 14 left for the burn-in
grep -qE '^ +infra/gpu-burn +14 pods +on n1, n2 +\(background\)$' "$work/out" ||
	fail "the burn-in does not fill what is left: $(cat "$work/out")"
"$understory" diff --from "$root/policies" --to "$root/examples/policies/spread" "$work/cluster.json" >"$work/diff" ||
	fail "diff: $(cat "$work/diff")"
echo "ok: the live capture imports and simulates like the seed story"
