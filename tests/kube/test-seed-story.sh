#!/usr/bin/env bash
# tests/kube/test-seed-story.sh — `understory serve` schedules the seed
# story (examples/kubernetes/seed-story/) on a real control plane, under
# the ServiceAccount and RBAC of examples/kubernetes/rbac.yaml, checked
# with kubectl only:
#   - a --dry-run daemon logs its binds and writes nothing (no pod's
#     resourceVersion moves, and the API server's audit log holds no write
#     by its ServiceAccount);
#   - the burn-in fills the idle GPUs (28 bound), the health checks bind,
#     the inference server waits with the engine's reason as its condition;
#   - training arrives: exactly the burn-in pods on the gang's nodes are
#     deleted, each evicted with the DisruptionTarget condition, and Evict
#     events (action backgroundpods) name the evictor; their replacements
#     are recreated; understory evicts no health check; training binds
#     after the grace period;
#   - one worker finishes (Succeeded): the engine counts it and the other
#     runs on, not stopped as a broken gang, and the Job does not fail;
#   - deleting training brings the burn-in back (28 bound); burn-in beyond
#     the idle GPUs waits with PodScheduled=False WaitingForIdleResources.
set -euo pipefail
. "$(dirname "$0")/lib.bash"
understory=${UNDERSTORY:-$root/build/release/understory}
story=$root/examples/kubernetes/seed-story

kube_up
k apply -f "$story/00-cluster.yaml" >/dev/null
k apply -f "$story/10-background.yaml" -f "$story/20-serve.yaml" >/dev/null
sa_kubeconfig

# bound_count NS SELECTOR: pods matching SELECTOR in NS with a node.
bound_count() {
	k -n "$1" get pods -l "$2" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true
}
# pods (name, uid, node, resourceVersion) of every namespace, sorted
pod_table() {
	k get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.uid} {.spec.nodeName} {.metadata.resourceVersion}{"\n"}{end}' | sort
}

# The controllers have created every pod: 28 burn-in, 4 checks, serve-1.
until_ok 60 "the controllers created the seed story's pods" \
	bash -c "[[ \$('$kubectl' --kubeconfig '$work/c/kubeconfig' get pods -A --no-headers | wc -l) -eq 33 ]]"

# --- dry run: decisions logged, nothing written -------------------------
pod_table >"$work/before-dry.txt"
start_serve dry --dry-run
dry_pid=$serve_pid
# 28 burn-in pods and 4 health checks bound, each once (a sync maps only
# what changed, so a logged bind is not logged again); serve-1 waits
has_dry_binds() {
	[[ $(grep -- ' -> n[1-4]: dry run, not written$' "$work/dry.out" | awk '{print $2}' | sort -u | wc -l) -eq 32 ]] &&
		grep -q '^pending team-a/serve-1: Unschedulable (.*quota.*): dry run, not written$' "$work/dry.out"
}
until_ok 60 "the dry-run daemon logged the binds of all 32 pods that fit and serve-1 pending" has_dry_binds
sleep 3 # three more cycles, each of which would write if it could
kill -TERM "$dry_pid"
wait "$dry_pid" || fail "the dry-run daemon did not stop cleanly on SIGTERM"
pod_table >"$work/after-dry.txt"
diff -u "$work/before-dry.txt" "$work/after-dry.txt" >&2 ||
	fail "a --dry-run daemon changed pods (resourceVersions above)"
[[ $(k get events.events.k8s.io -A -o jsonpath='{range .items[?(@.reportingController=="understory")]}x{"\n"}{end}' | grep -c x || true) -eq 0 ]] ||
	fail "a --dry-run daemon created events"
# and from the API server's side: its audit log (every write) holds none
# by the daemon's ServiceAccount, which nothing else has used yet
dry_writes=$(grep -c '"username":"system:serviceaccount:understory-system:understory"' "$work/c/audit.log" || true)
[[ $dry_writes -eq 0 ]] || fail "the API server's audit log holds $dry_writes writes by the --dry-run daemon"

# --- the daemon schedules ------------------------------------------------
start_serve serve
burn28() { [[ $(bound_count infra app=gpu-burn) -eq 28 ]]; }
until_ok 90 "the burn-in fills the idle GPUs (28 bound)" burn28
checks4() { [[ $(bound_count infra app=node-check) -eq 4 ]]; }
until_ok 30 "a health check on every node" checks4
# serve-1 is non-preemptible and its queue's cpu quota is 0 (00-cluster.yaml):
# KAI's rule keeps it pending, and the engine's reason is on the pod
serve1() {
	[[ $(k -n team-a get pod serve-1 -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].status} {.status.conditions[?(@.type=="PodScheduled")].reason}') == "False Unschedulable" ]] &&
		k -n team-a get pod serve-1 -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}' | grep -q 'quota'
}
until_ok 30 "serve-1 PodScheduled=False Unschedulable with the engine's reason" serve1
# never two binds of one pod: each bind is written once
dup=$(grep -E '^bind .* -> n[1-4]: done' "$work/serve.out" | awk '{print $2}' | sort | uniq -d)
[[ -z $dup ]] || fail "bound twice: $dup"
# bound pods' GPUs fit their nodes (the API server does not check)
k get pods -A -o jsonpath='{range .items[*]}{.spec.nodeName} {.spec.containers[0].resources.requests.nvidia\.com/gpu}{"\n"}{end}' |
	awk '$1 != "" && $2 != "" {g[$1] += $2} END {for (n in g) if (g[n] > 8) {print n, g[n]; bad = 1}; exit bad}' ||
	fail "a node holds more than 8 GPUs of bound pods"

k -n infra get pods -l app=gpu-burn -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} {.spec.nodeName}{"\n"}{end}' |
	sort >"$work/burn-before.txt"

# --- training arrives -----------------------------------------------------
k apply -f "$story/30-train.yaml" >/dev/null
until_ok 120 "training binds once its room is free" train_bound
until_ok 30 "training runs (both pods Running)" train_runs
train_nodes=$(k -n team-a get pods -l job-name=train-1 -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u)
[[ $(echo "$train_nodes" | wc -l) -eq 2 ]] || fail "the gang's two 8-GPU pods on one node: $train_nodes"
# the burn-in pods that were on the gang's nodes, and only those, are gone
expected=$(awk -v nodes="$(echo $train_nodes)" 'BEGIN {split(nodes, a, " "); for (i in a) on[a[i]] = 1} on[$3] {print $2}' \
	"$work/burn-before.txt" | sort)
k -n infra get pods -l app=gpu-burn -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' | sort >"$work/burn-uids-after.txt"
gone=$(awk '{print $2}' "$work/burn-before.txt" | sort | comm -23 - "$work/burn-uids-after.txt")
[[ -n $expected && $gone == "$expected" ]] ||
	fail "evicted burn-in pods: $(echo $gone | wc -w), expected exactly those on $train_nodes: $(echo $expected | wc -w)"
n_evicted=$(echo "$expected" | wc -l)
# each eviction logged, one Evict event per evicted workload naming the evictor
[[ $(grep -cE '^evict infra/gpu-burn-[^ ]+ from n[1-4] \(backgroundpods\): DisruptionTarget: done \(200\)$' "$work/serve.out") -eq $n_evicted ]] ||
	fail "expected $n_evicted DisruptionTarget conditions written in the log"
[[ $(grep -cE '^evict infra/gpu-burn-[^ ]+ from n[1-4] \(backgroundpods\): done \(200\)$' "$work/serve.out") -eq $n_evicted ]] ||
	fail "expected $n_evicted deletions in the log"
events=$(k -n infra get events.events.k8s.io -o jsonpath='{range .items[?(@.reason=="Evict")]}{.reportingController} {.action} {.regarding.kind}/{.regarding.name} {.metadata.annotations.evictor-action-type} {.metadata.annotations.num-evicted-pods} {.metadata.annotations.evictor-pod-group-name}{"\n"}{end}')
echo "$events" | grep -qxE "understory backgroundpods Deployment/gpu-burn backgroundpods [0-9]+ team-a/train-1" ||
	fail "no Evict event (action backgroundpods, regarding Deployment gpu-burn, evictor team-a/train-1): $events"
total=$(echo "$events" | awk '{s += $5} END {print s + 0}')
[[ $total -eq $n_evicted ]] || fail "events count $total evicted pods, $n_evicted were"
# the health checks are not evicted, and one still runs on every node
# (their pods may be replaced by the DaemonSet controller: a pending
# DaemonSet pod is not yet bound to the node its affinity names, see
# docs/kubernetes.md, so their uids are not compared)
! grep -qE '^evict infra/node-check' "$work/serve.out" || fail "understory evicted a health check"
until_ok 30 "a health check on every node while training runs" checks4
train_runs || fail "training stopped before its first worker finished: phases $(train_phases)"
# --- one worker finishes first: the other runs on ------------------------
# A distributed job's workers end seconds apart.  A gang with a Succeeded
# pod is not broken (KAI keeps such a PodGroup), so the worker still
# running is not stopped (stalegangeviction), and the Job (backoffLimit 0)
# does not fail.  The kubelet's part, the phase, is written by hand.
mapfile -t workers < <(k -n team-a get pods -l job-name=train-1 -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)
other_uid=$(k -n team-a get pod "${workers[1]}" -o jsonpath='{.metadata.uid}')
k -n team-a patch pod "${workers[0]}" --subresource=status --type=merge -p '{"status":{"phase":"Succeeded"}}' >/dev/null
# the engine counts it: the live state says so
counted() {
	curl -sf --max-time 5 "$admin/debug/state" | python3 -c '
import json, sys
w = [x for x in json.load(sys.stdin)["workloads"] if x["name"] == "team-a/train-1"]
sys.exit(0 if w and w[0].get("succeeded") == 1 and w[0]["replicas"] == 1 else 1)'
}
until_ok 30 "the engine counts train-1's finished worker (succeeded 1, replicas 1 in /debug/state)" counted
sleep 3 # three more cycles, each of which would stop a broken gang
[[ $(k -n team-a get pod "${workers[1]}" -o jsonpath='{.metadata.uid} {.status.phase}') == "$other_uid Running" ]] ||
	fail "train-1's other worker did not run on after the first finished: $(k -n team-a get pods -l job-name=train-1 -o wide 2>&1)"
! grep -qE '^evict team-a/' "$work/serve.out" || fail "understory evicted training: $(grep -E '^evict team-a/' "$work/serve.out")"
[[ $(k -n team-a get job train-1 -o jsonpath='{.status.active} {.status.succeeded} {.status.failed}') == "1 1 " ]] ||
	fail "Job train-1 is not 1 active, 1 succeeded, none failed: $(k -n team-a get job train-1 -o jsonpath='{.status}')"
# --- training leaves: the burn-in comes back ---------------------------
k -n team-a delete job train-1 --wait=true >/dev/null
k -n team-a delete podgroup train-1 >/dev/null
until_ok 90 "the burn-in back on every idle GPU (28 bound)" burn28
# more burn-in than idle GPUs (4): the 3 pods beyond them wait for idle
# resources, with that condition
k -n infra scale deployment gpu-burn --replicas 35 >/dev/null
burn32() { [[ $(bound_count infra app=gpu-burn) -eq 32 ]]; }
until_ok 60 "the burn-in on all 32 GPUs" burn32
waiting3() {
	[[ $(k -n infra get pods -l app=gpu-burn -o jsonpath='{range .items[*]}{.spec.nodeName}:{.status.conditions[?(@.type=="PodScheduled")].status}:{.status.conditions[?(@.type=="PodScheduled")].reason}{"\n"}{end}' |
		grep -cx ':False:WaitingForIdleResources' || true) -eq 3 ]]
}
until_ok 30 "3 burn-in pods PodScheduled=False WaitingForIdleResources" waiting3
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "the daemon did not stop cleanly on SIGTERM"
# the dry run's audit check counts what it should: the daemon's writes are there
sa_writes=$(grep -c '"username":"system:serviceaccount:understory-system:understory"' "$work/c/audit.log" || true)
[[ $sa_writes -ge 33 ]] || fail "the audit log holds only $sa_writes writes by the daemon's ServiceAccount"
echo "ok: seed story on a real control plane ($n_evicted burn-in pods evicted for training)"
