#!/usr/bin/env bash
# tests/kube/test-serve-replay.sh — operating `understory serve` on the
# seed story (examples/kubernetes/seed-story/) on a real control plane:
#   - /metrics, read by a real Prometheus parser, agrees with the cluster
#     as kubectl shows it: background GPUs = the bound burn-in pods' GPUs,
#     idle GPUs = capacity - every bound pod's GPUs, pending pods by kind
#     and reason = kubectl's pending pods of ours (the inference server,
#     held by its queue's quota; burn-in beyond the idle GPUs waiting for
#     idle resources), binds counted, every cycle phase timed;
#   - replaying production: the live state from /debug/state and the same
#     cluster from `kubectl get ... -o json | understory import -
#     --canonical` agree (equal after the normalisation docs/operations.md
#     states: time fields dropped, objects sorted by name), both at rest
#     and with a training gang pending under a shadow (--dry-run) daemon;
#     `understory simulate` runs the capture and `understory diff` against
#     a placement policy that prefers the other zone reports exactly the
#     gang moving there, with the burn-in evicted for it;
#   - POST /reload on a daemon without --policies is 409.
set -euo pipefail
. "$(dirname "$0")/lib.bash"
understory=${UNDERSTORY:-$root/build/release/understory}
story=$root/examples/kubernetes/seed-story
python=/usr/bin/python3

kube_up
k apply -f "$story/00-cluster.yaml" >/dev/null
k apply -f "$story/10-background.yaml" -f "$story/20-serve.yaml" >/dev/null
sa_kubeconfig

scrape() {
	curl -s --max-time 10 "$admin/metrics" >"$work/metrics.txt" || return 1
	"$python" "$root/tests/prom_check.py" "$work/metrics.txt" >"$work/metrics.prom"
}
sample() { awk -v p="$1" 'index($0, p) == 1 { print $NF }' "$work/metrics.prom"; }
# the pods as "namespace/name node phase gpus background" lines
pods() {
	k get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.spec.nodeName}- {.spec.schedulerName} {.spec.containers[0].resources.requests.nvidia\.com/gpu}0 {.metadata.labels.kai\.scheduler/background}-{"\n"}{end}'
}

# --- the scheduler in charge: the seed story settles ---------------------
start_serve live
# without --policies: the built-in policies, and nothing to reload (409)
code=$(curl -s -o "$work/reload.body" -w '%{http_code}' -X POST "$admin/reload")
[[ $code == 409 ]] && grep -q 'without --policies' "$work/reload.body" ||
	fail "POST /reload without --policies: $code $(cat "$work/reload.body")"
until_ok 60 "the controllers created the seed story's 33 pods" \
	bash -c "[[ \$('$kubectl' --kubeconfig '$work/c/kubeconfig' get pods -A --no-headers | wc -l) -eq 33 ]]"
settled() {
	[[ $(k -n infra get pods -l app=gpu-burn -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true) -eq 28 &&
		$(k -n infra get pods -l app=node-check -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true) -eq 4 ]]
}
until_ok 90 "the burn-in on the idle GPUs and a health check on every node" settled
# more burn-in than idle GPUs: 3 wait for idle resources
k -n infra scale deployment gpu-burn --replicas 35 >/dev/null
burn32() { [[ $(k -n infra get pods -l app=gpu-burn -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true) -eq 32 ]]; }
until_ok 60 "the burn-in on all 32 GPUs" burn32
waiting3() {
	[[ $(k -n infra get pods -l app=gpu-burn -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="PodScheduled")].reason}{"\n"}{end}' | grep -cx WaitingForIdleResources || true) -eq 3 ]]
}
until_ok 30 "3 burn-in pods waiting for idle resources" waiting3

# --- /metrics against the cluster --------------------------------------------
# What kubectl says: GPUs of bound pods, background and all; pending pods
# of ours by kind.  Figures as the parser prints them (floats).
pods >"$work/pods.txt"
bg_gpus=$(awk '$2 != "-" && $5 == "true-" {s += $4 / 10} END {printf "%.1f", s}' "$work/pods.txt")
all_gpus=$(awk '$2 != "-" {s += $4 / 10} END {print s + 0}' "$work/pods.txt")
idle=$(awk -v a="$all_gpus" 'BEGIN {printf "%.1f", 32 - a}')
pending_ai=$(awk '$2 == "-" && $3 == "understory" && $5 != "true-"' "$work/pods.txt" | grep -c . || true)
pending_bg=$(awk '$2 == "-" && $3 == "understory" && $5 == "true-"' "$work/pods.txt" | grep -c . || true)
[[ $bg_gpus == 32.0 && $pending_ai -eq 1 && $pending_bg -eq 3 ]] ||
	fail "the cluster is not where the test expects it: background GPUs $bg_gpus, pending AI $pending_ai, background $pending_bg"
agree() {
	scrape || return 1
	[[ $(sample 'understory_background_gpus{} ') == "$bg_gpus" && $(sample 'understory_idle_gpus{} ') == "$idle" &&
		$(sample 'understory_pending_pods{kind="ai",reason="quota"} ') == "$pending_ai.0" &&
		$(sample 'understory_pending_pods{kind="background",reason="idle-resources"} ') == "$pending_bg.0" ]]
}
until_ok 20 "metrics agree with kubectl (background GPUs $bg_gpus, idle $idle, pending ai $pending_ai (quota), background $pending_bg)" agree
[[ $(grep -c '^understory_pending_pods{' "$work/metrics.prom") -eq 2 ]] ||
	fail "pending pods other than those two: $(grep '^understory_pending_pods{' "$work/metrics.prom")"
binds=$(awk '/^understory_decisions_total\{.*op="bind"/ {s += $NF} END {print s + 0}' "$work/metrics.prom")
bound=$(awk '$2 != "-" && $3 == "understory"' "$work/pods.txt" | grep -c .)
((${binds%.*} >= bound)) || fail "binds counted $binds, but $bound pods of ours are bound"
cycles=$(sample 'understory_cycle_duration_seconds_count{phase="total"} ')
for ph in snapshot eviction fairshare allocate victims reoffer commit sync write; do
	[[ $(sample "understory_cycle_duration_seconds_count{phase=\"$ph\"} ") == "$cycles" ]] ||
		fail "phase $ph timed $(sample "understory_cycle_duration_seconds_count{phase=\"$ph\"} ") times, the cycle $cycles"
done
secs=$(sample 'understory_background_gpu_seconds_total{} ')
[[ ${secs%.*} -gt 0 ]] || fail "no background GPU-seconds accrued: $secs"

# capture NAME: /debug/state and the import of kubectl's List, normalised
capture() {
	curl -s --max-time 10 -o "$work/$1-live.json" -w '%{http_code}' "$admin/debug/state" >"$work/$1.code"
	[[ $(cat "$work/$1.code") == 200 ]] || fail "/debug/state answered $(cat "$work/$1.code")"
	k get nodes,pods,namespaces,queues.scheduling.run.ai,podgroups.scheduling.run.ai,priorityclasses -A -o json |
		"$understory" import - --canonical >"$work/$1-imported.json" || fail "understory import failed"
	"$python" "$root/tests/kube/state_normal.py" "$work/$1-live.json" >"$work/$1-live.norm"
	"$python" "$root/tests/kube/state_normal.py" "$work/$1-imported.json" >"$work/$1-imported.norm"
	diff -u "$work/$1-imported.norm" "$work/$1-live.norm" >"$work/$1-diff.err"
}
# A pod being deleted that understory did not evict (the DaemonSet
# controller replacing a health check, docs/kubernetes.md "Not done yet")
# is running to serve until it is gone, releasing to import: the two agree
# when no pod is terminating, before and after the capture.
quiet() { [[ -z $(k get pods -A -o jsonpath='{range .items[*]}{.metadata.deletionTimestamp}{"\n"}{end}' | tr -d '\n') ]]; }
agree_at() { quiet && capture "$1" && quiet; }
until_ok 30 "at rest, /debug/state and the import agree (rest-diff.err)" agree_at rest
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "the daemon did not stop cleanly on SIGTERM"

# --- training arrives while a shadow daemon watches --------------------------
k apply -f "$story/30-train.yaml" >/dev/null
two_pending() { [[ $(k -n team-a get pods -l job-name=train-1 --no-headers | grep -c Pending || true) -eq 2 ]]; }
until_ok 30 "the training gang's two pods created, pending" two_pending
start_serve shadow --dry-run --cycle-interval 3600
until_ok 30 "with training pending, /debug/state and the import agree (train-diff.err)" agree_at train
grep -q '"team-a/train-1"' "$work/train-live.json" || fail "the capture has no training gang"
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "the shadow daemon did not stop cleanly on SIGTERM"

# --- replay: simulate, then diff against a policy preferring the other zone
"$understory" simulate "$work/train-live.json" --json >"$work/sim.json" || fail "understory simulate on the capture failed"
train_nodes=$("$python" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join(sorted(p["node"] for p in d["final"]["pods"] if p["workload"] == "team-a/train-1" and p["node"])))
' "$work/sim.json")
[[ $(wc -w <<<"$train_nodes") -eq 2 ]] || fail "the simulation did not place the gang: '$train_nodes'"
# zone a is n1, n2; b is n3, n4 (00-cluster.yaml): prefer the zone the
# default left at least one gang pod out of
zone=a
[[ $train_nodes == "n1 n2" ]] && zone=b
want=$([[ $zone == a ]] && echo "n1 n2" || echo "n3 n4")
mkdir -p "$work/new"
cat >"$work/new/placement.lua" <<-LUA
	-- placement.lua: nodes of zone $zone first, then bin-packing by GPU.
	local M = {labels = {"zone"}}
	function M.score(pod, node)
	  local preferred = node.labels["zone"] == "$zone" and 1e6 or 0
	  local gpu = node.capacity.gpu > 0 and (node.allocated.gpu + pod.requests.gpu) / node.capacity.gpu or 0
	  return preferred + 1000 * gpu
	end
	return M
LUA
"$understory" check "$work/new" >"$work/check.out" || fail "the new policy does not pass understory check: $(cat "$work/check.out")"
status=0
"$understory" diff --from "$root/policies" --to "$work/new" "$work/train-live.json" >"$work/diff.out" || status=$?
[[ $status -le 1 ]] || fail "understory diff failed ($status): $(cat "$work/diff.out")"
to_nodes=$(sed -n 's/^  + pipeline  team-a\/train-1-[0-9] *-> \(n[1-4]\) .*/\1/p' "$work/diff.out" | sort | xargs)
from_nodes=$(sed -n 's/^  - pipeline  team-a\/train-1-[0-9] *-> \(n[1-4]\) .*/\1/p' "$work/diff.out" | sort | xargs)
[[ $to_nodes == "$want" ]] || fail "the diff does not move the gang to zone $zone ($want): '$to_nodes'"
[[ -n $from_nodes && $from_nodes != "$want" ]] || fail "the diff shows no placement it replaces: '$from_nodes'"
# the burn-in evicted for it, under the new policy, is on its nodes
evicted_on=$(sed -n 's/^  + evict .* from \(n[1-4]\)  (backgroundpods, for team-a\/train-1)$/\1/p' "$work/diff.out" | sort -u | xargs)
[[ -n $evicted_on ]] && for n in $evicted_on; do [[ " $want " == *" $n "* ]] || fail "the new policy evicts on $n, outside $want"; done
echo "ok: metrics agree with the cluster; /debug/state agrees with the import (at rest and with training pending); the diff moves the gang to $want"
