#!/usr/bin/env bash
# tests/kube/test-serve-capacity.sh — a node whose allocatable drops below
# what its pods hold (a GPU gone bad: the device plugin reports fewer),
# on a real control plane.  Kubernetes keeps the pods running; `understory
# serve` takes the node all the same, raised to what its pods hold:
#   - the drop is logged, and the node's other changes (a cordon, its
#     removal) reach the engine at once instead of being refused;
#   - no pod is bound into the room the node lost while its pods hold
#     more than it reports, nor once they hold exactly that;
#   - once its pods leave room, the node takes what it reports, and a
#     pending pod is bound there as soon as the reported room allows.
set -euo pipefail
. "$(dirname "$0")/lib.bash"
understory=${UNDERSTORY:-$root/build/release/understory}

kube_up
k apply -f "$root/examples/kubernetes/kwok/fake-gpu-node.yaml" >/dev/null
queue_namespace team-a 16 | k apply -f - >/dev/null
sa_kubeconfig
start_serve serve
fake=kwok.x-k8s.io/node=fake:NoSchedule
line() { echo "node gpu-0: pool default, gpu $1, cpu 32000m, memory 274877906944, taints $fake, $2"; }
has_line() { grep -qxF -- "$1" "$work/serve.out"; }
# The engine's view of gpu-0 is LINE now (its last line).  (A fake node's
# readiness may flap under load: the node lifecycle controller taints it
# unreachable and KWOK revives it, each a line; so a state is waited for.)
now_is() { [[ $(grep "^node gpu-0: pool " "$work/serve.out" | tail -n 1) == "$1" ]]; }
# report_gpus N LINE: gpu-0 reports N GPUs, until serve logs LINE (KWOK,
# reviving a flapped node, may write back the allocatable it had cached).
report_gpus() {
	k patch node gpu-0 --subresource=status --type=merge \
		-p "{\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"$1\"}}}" >/dev/null
	has_line "$2"
}
until_ok 60 "gpu-0 in the engine, Ready" has_line "$(line 8 schedulable)"

# pod NAME GPUS: a pod of ours in team-a
pod() { gpu_pod "$1" team-a cap "$2" | k apply -f - >/dev/null; }
node_of() { k -n team-a get pod "$1" -o jsonpath='{.spec.nodeName}'; }
running() { [[ $(k -n team-a get pods -l app=cap --field-selector status.phase=Running -o name | grep -c . || true) -eq $1 ]]; }
for i in 1 2 3 4; do pod "big-$i" 2; done
until_ok 60 "the four 2-GPU pods running on gpu-0" running 4

# Two GPUs go bad under the eight the pods hold.
until_ok 60 "the drop logged" report_gpus 6 \
	"node gpu-0: reports less than its pods hold; taken with gpu 8 (what its pods hold) until they leave room"
grep -q "node gpu-0 not taken" "$work/serve.err" && fail "serve refused the node: $(grep "not taken" "$work/serve.err")"
# short_nodes N: /metrics says N nodes report less than their pods hold
short_nodes() { [[ $(curl -s --max-time 10 "$admin/metrics" | sed -n 's/^understory_nodes_short{*}* //p') == "$1" ]]; }
until_ok 30 "understory_nodes_short 1 while gpu-0 is short" short_nodes 1
# its other changes are taken at once: the cordon (and the taint the
# node lifecycle controller adds for it), then the uncordon
k cordon gpu-0 >/dev/null
cordoned() { grep -qE "^node gpu-0: pool default, gpu 8, .*node.kubernetes.io/unschedulable:NoSchedule.*, unschedulable$" "$work/serve.out"; }
until_ok 60 "the cordon taken while the node is short" cordoned
k uncordon gpu-0 >/dev/null
until_ok 60 "the uncordon taken while the node is short" now_is "$(line 8 schedulable)"

# A 1-GPU pod finds no room: the engine has none the node reports.
pod small 1
sleep 5
[[ -z $(node_of small) ]] || fail "small was bound to $(node_of small) while gpu-0's pods hold 8 of its 6 GPUs"
# One 2-GPU pod leaves: its pods hold 6, what it reports; still no room.
k -n team-a delete pod big-4 --wait=true >/dev/null
until_ok 60 "gpu-0 taken with the 6 GPUs it reports" now_is "$(line 6 schedulable)"
grep -qxF "node gpu-0: its pods left room for the capacity it reports" "$work/serve.out" ||
	fail "the node's return to what it reports was not logged"
until_ok 30 "understory_nodes_short 0 once gpu-0 takes what it reports" short_nodes 0
sleep 5
[[ -z $(node_of small) ]] || fail "small was bound to $(node_of small) with gpu-0's 6 GPUs all held"
# Another leaves: room for small, at once.
k -n team-a delete pod big-3 --wait=true >/dev/null
small_on_gpu0() { [[ $(node_of small) == gpu-0 ]]; }
until_ok 60 "small bound to gpu-0 once two of its six GPUs are free" small_on_gpu0
until_ok 60 "small runs" running 3

# Short again, then deleted: the node leaves the engine.
until_ok 60 "the second drop logged" report_gpus 2 \
	"node gpu-0: reports less than its pods hold; taken with gpu 5 (what its pods hold) until they leave room"
k delete node gpu-0 >/dev/null
until_ok 60 "the short node removed" has_line "node gpu-0: removed"
stop_serve
echo "serve: a node below its pods taken raised, its cordon at once, its own capacity once they leave: ok"
