#!/usr/bin/env bash
# tests/kube/test-manifests.sh — the objects in examples/kubernetes/ are
# what a real API server takes and what understory reads: the Queue and
# PodGroup CRDs become established, and the seed story's objects (KWOK GPU
# nodes, priority classes, the queue tree, the team namespaces, the
# background DaemonSet and Deployment, the inference pod, the training
# PodGroup and Job) apply and read back with the fields understory maps:
# queue parents and KAI units, the background label on the pods the
# controllers make, the pod-group-name annotation, requests of
# nvidia.com/gpu, the scheduler name.  Nothing schedules them here: every
# pod stays pending and unbound.
set -euo pipefail
. "$(dirname "$0")/lib.bash"

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
k apply -f "$root/examples/kubernetes/seed-story/" >"$work/applied"

# The queue tree, in KAI's units, as examples/seed-story.json has it.
tree=$(k get queues -o 'jsonpath={range .items[*]}{.metadata.name}<{.spec.parentQueue}:{.spec.resources.gpu.quota}/{.spec.resources.gpu.overQuotaWeight}{"\n"}{end}' | sort | tr '\n' ' ')
[[ $tree == "infra-bg<:0/0 research<:24/1 team-a<research:16/2 team-b<research:8/1 " ]] ||
	fail "queue tree: $tree"
# A field of KAI's that our CRD does not name is kept, so KAI's own
# objects apply unchanged.
k patch queue team-b --type merge -p '{"spec":{"displayName":"Team B","kaiOnlyField":"kept"}}' >/dev/null
[[ $(k get queue team-b -o 'jsonpath={.spec.kaiOnlyField}') == kept ]] || fail "an unknown Queue field was dropped"
# A PodGroup's preemptibility is one of KAI's three values.
if k patch podgroup -n team-a train-1 --type merge -p '{"spec":{"preemptibility":"sometimes"}}' >"$work/bad" 2>&1; then
	fail "a PodGroup with preemptibility 'sometimes' was accepted"
fi
grep -q 'preemptibility' "$work/bad" || fail "the refusal does not name preemptibility: $(cat "$work/bad")"

# Nodes: KWOK makes them Ready with 8 GPUs and the zone label.
for n in n1 n2 n3 n4; do
	k wait --for=condition=Ready "node/$n" --timeout=60s >/dev/null || fail "KWOK did not make $n Ready"
	[[ $(k get node "$n" -o 'jsonpath={.status.allocatable.nvidia\.com/gpu}') == 8 ]] || fail "$n has not 8 GPUs"
done
[[ $(k get nodes -l zone=b -o name | sort | tr '\n' ' ') == "node/n3 node/n4 " ]] || fail "zone labels"

# The controllers make the pods: 28 burn-in pods and one health check per
# node, labelled background; two training pods naming their PodGroup.
count() { [[ $(k get pods -n "$1" -l "$2" --no-headers 2>/dev/null | wc -l) -eq $3 ]]; }
until_ok 90 "the gpu-burn Deployment did not get 28 pods" count infra app=gpu-burn 28
until_ok 90 "the node-check DaemonSet did not get a pod per node" count infra app=node-check 4
until_ok 90 "the train-1 Job did not get 2 pods" count team-a batch.kubernetes.io/job-name=train-1 2
bg=$(k get pods -n infra -o 'jsonpath={range .items[*]}{.metadata.labels.kai\.scheduler/background}{"\n"}{end}' | sort | uniq -c | tr -s ' ')
[[ $bg == " 32 true" ]] || fail "background labels on the infra pods: $bg"
pinned=$(k get pods -n infra -l app=node-check -o 'jsonpath={range .items[*]}{.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].values[0]}{"\n"}{end}' | sort | tr '\n' ' ')
[[ $pinned == "n1 n2 n3 n4 " ]] || fail "the DaemonSet's pods are not pinned one per node: $pinned"
groups=$(k get pods -n team-a -l batch.kubernetes.io/job-name=train-1 -o 'jsonpath={range .items[*]}{.metadata.annotations.pod-group-name}/{.spec.priority}/{.spec.containers[0].resources.requests.nvidia\.com/gpu}{"\n"}{end}' | sort | uniq -c | tr -s ' ')
[[ $groups == " 2 train-1/50/8" ]] || fail "training pods (group/priority/gpu): $groups"
[[ $(k get pod -n team-a serve-1 -o 'jsonpath={.spec.priority}') == 125 ]] || fail "serve-1's priority is not inference's 125"
[[ $(k get namespace team-a -o 'jsonpath={.metadata.labels.kai\.scheduler/queue}') == team-a ]] ||
	fail "namespace team-a does not name its queue"

# Every pod waits for understory: the scheduler name is ours, none is bound.
sched=$(k get pods -A -o 'jsonpath={range .items[*]}{.spec.schedulerName}/{.spec.nodeName}{"\n"}{end}' | sort | uniq -c | tr -s ' ')
[[ $sched == " 35 understory/" ]] || fail "pods (scheduler/node): $sched"

"$cluster" down "$work/c"
echo "manifests: CRDs established, seed story applied and read back: ok"
