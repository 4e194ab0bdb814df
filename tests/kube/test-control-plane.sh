#!/usr/bin/env bash
# tests/kube/test-control-plane.sh — the test control plane works as the
# Kubernetes tests need it: it comes up with RBAC on, a fake GPU node
# applied with kubectl is managed by KWOK (Ready, 8 nvidia.com/gpu
# allocatable), a Deployment gets its pods from the controllers and they
# stay pending (nothing schedules them), a pod bound by hand runs and a
# deleted one is recreated; `down` leaves no process, and neither does a
# test that dies without calling it.
set -euo pipefail
. "$(dirname "$0")/lib.bash"

trap '"$cluster" down "$work/a" 2>/dev/null; "$cluster" down "$work/b" 2>/dev/null; rm -rf "$work"' EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# until SECONDS WHAT CMD...: CMD succeeds within SECONDS, else fail naming WHAT.
# Processes whose command line names DIR (every component and the watchdog
# get DIR paths).
procs_of() { pgrep -f -- "$1(/| |\$)" || true; }

"$cluster" up "$work/a"
k() { "$kubectl" --kubeconfig "$work/a/kubeconfig" "$@"; }

# RBAC is on: an identity without a binding is refused.
k auth can-i list pods --as=system:serviceaccount:default:nobody >"$work/can-i" 2>&1 || true
[[ $(cat "$work/can-i") == no ]] || fail "RBAC: a bare service account may list pods: $(cat "$work/can-i")"
[[ $(k auth can-i list pods) == yes ]] || fail "the admin kubeconfig may not list pods"

# A fake GPU node, KWOK's convention (the README's example).
k apply -f "$root/examples/kubernetes/kwok/fake-gpu-node.yaml" >/dev/null
k wait --for=condition=Ready node/gpu-0 --timeout=60s >/dev/null || fail "KWOK did not make gpu-0 Ready"
gpus=$(k get node gpu-0 -o 'jsonpath={.status.allocatable.nvidia\.com/gpu}')
[[ $gpus == 8 ]] || fail "gpu-0 allocatable nvidia.com/gpu is '$gpus', not 8"

# A Deployment for a scheduler that does not run: pods exist, pending.
k apply -f - <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: burn, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: burn}}
  template:
    metadata: {labels: {app: burn}}
    spec:
      schedulerName: understory
      terminationGracePeriodSeconds: 5
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists}]
      containers:
      - name: burn
        image: gpu-burn
        resources: {limits: {nvidia.com/gpu: "1"}}
EOF
count_pods() { [[ $(k get pods -l app=burn --no-headers 2>/dev/null | wc -l) -eq $1 ]]; }
until_ok 60 "the Deployment did not get 3 pods" count_pods 3
phases=$(k get pods -l app=burn -o 'jsonpath={range .items[*]}{.status.phase}/{.spec.nodeName}{"\n"}{end}' | sort | uniq -c)
[[ $(echo "$phases" | tr -s ' ') == " 3 Pending/" ]] || fail "pods are not all pending and unbound: $phases"

# Bound by hand (as understory will), a pod runs on the KWOK node ...
pod=$(k get pods -l app=burn -o 'jsonpath={.items[0].metadata.name}')
k create --raw "/api/v1/namespaces/default/pods/$pod/binding" -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "$pod"}, "target": {"kind": "Node", "name": "gpu-0"}}
EOF
running() { [[ $(k get pod "$pod" -o 'jsonpath={.status.phase}') == Running ]]; }
until_ok 60 "KWOK did not run $pod bound to gpu-0" running
# ... and deleted, it terminates for its grace period (5 s), then goes,
# and the ReplicaSet makes another, pending.
uid=$(k get pod "$pod" -o 'jsonpath={.metadata.uid}')
k delete pod "$pod" --wait=false >/dev/null
deleted_at=$SECONDS
[[ -n $(k get pod "$pod" -o 'jsonpath={.metadata.deletionTimestamp}') ]] ||
	fail "$pod went at once, not after its grace period"
gone() { ! k get pod "$pod" >/dev/null 2>&1; }
until_ok 60 "$pod was not deleted after its grace period" gone
((SECONDS - deleted_at >= 3)) || fail "$pod went $((SECONDS - deleted_at)) s after its delete, before its 5 s grace"
until_ok 60 "the ReplicaSet did not recreate the deleted pod" count_pods 3
pending=$(k get pods -l app=burn -o 'jsonpath={range .items[*]}{.status.phase}{"\n"}{end}' | grep -c Pending || true)
[[ $pending -eq 3 ]] || fail "after the delete, $pending of 3 pods are pending"
k get pods -l app=burn -o 'jsonpath={range .items[*]}{.metadata.uid}{"\n"}{end}' | grep -qx "$uid" &&
	fail "the deleted pod's uid $uid is still there"

# down stops everything it started.
[[ -n $(procs_of "$work/a") ]] || fail "no process names $work/a while the cluster is up"
"$cluster" down "$work/a"
sleep 1
left=$(procs_of "$work/a")
[[ -z $left ]] || fail "processes left after down: $(ps -o pid=,args= -p "${left//$'\n'/,}")"

# A test that dies without calling down leaves nothing either: the owner
# (here a sleep standing in for the test) is killed with SIGKILL.
sleep 1000 &
owner=$!
KUBE_CLUSTER_OWNER=$owner "$cluster" up "$work/b"
[[ -n $(procs_of "$work/b") ]] || fail "no process names $work/b while the cluster is up"
kill -KILL "$owner"
wait "$owner" 2>/dev/null || true
none_left() { [[ -z $(procs_of "$work/b") ]]; }
until_ok 30 "processes left after their owner died: $(procs_of "$work/b" | tr '\n' ' ')" none_left
[[ ! -e $work/b/pids ]] || fail "$work/b/pids is still there after the watchdog's down"
echo "control plane: up, KWOK node, Deployment pending, bind runs, recreate, down, owner death: ok"
