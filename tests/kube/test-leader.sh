#!/usr/bin/env bash
# tests/kube/test-leader.sh — two replicas of `understory serve` under the
# ServiceAccount and RBAC of examples/kubernetes/rbac.yaml contend for one
# Lease; the API server's audit log (userAgent understory/<identity>)
# proves who wrote what:
#   - while A leads, every binding and pod status patch is A's; the
#     standby B writes nothing at all (not even the lease);
#   - SIGKILL A: B takes the lease (holderIdentity changes; the time it
#     took is logged, not asserted) and binds the pods created after the
#     kill;
#   - SIGTERM the leader B with a standby C: B gives the lease up as it
#     stops (right after B exits the lease names nobody or C, never B) and
#     C takes over and binds;
#   - SIGSTOP the leader C past the lease duration: D takes over; SIGCONT C:
#     C says it lost the lease and writes nothing afterwards while D binds
#     the pods created since;
#   - every pod is bound by exactly one successful binding, whoever led.
set -euo pipefail
. "$(dirname "$0")/lib.bash"
understory=${UNDERSTORY:-$root/build/release/understory}
story=$root/examples/kubernetes/seed-story
# short timings keep the test quick; the rules are kube-scheduler's
timings=(--lease-duration 6s --renew-deadline 4s --retry-period 1s)

declare -A pid id
kube_up
k apply -f "$story/00-cluster.yaml" >/dev/null
sa_kubeconfig

# start NAME: a replica, its identity read from its log
start() {
	"$understory" serve --kubeconfig "$work/understory.kubeconfig" --admin-address 127.0.0.1:0 "${timings[@]}" \
		>"$work/$1.out" 2>"$work/$1.err" &
	pid[$1]=$!
	pids+=("${pid[$1]}")
	who=$1
	has_identity() { grep -q '^understory serve: leader election on lease understory-system/understory as ' "$work/$who.err"; }
	until_ok 30 "replica $1 named its identity" has_identity
	id[$1]=$(sed -n 's|^understory serve: leader election on lease understory-system/understory as ||p' "$work/$1.err")
}
# ready NAME: its /readyz answers 200 (caches synced; leader or standby)
ready() {
	local port
	port=$(sed -n 's|^understory serve: admin endpoint on http://127.0.0.1:\([0-9]*\)$|\1|p' "$work/$1.err")
	[[ -n $port && $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz") == 200 ]]
}
# leader_metric NAME: its understory_leader sample
leader_metric() {
	local port
	port=$(sed -n 's|^understory serve: admin endpoint on http://127.0.0.1:\([0-9]*\)$|\1|p' "$work/$1.err")
	curl -s "http://127.0.0.1:$port/metrics" | sed -n 's/^understory_leader{*}* //p'
}
holder() { k -n understory-system get lease understory -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }
holder_is() { [[ $(holder) == "${id[$1]}" ]]; }
# pods FROM TO: one-GPU training pods p<FROM>..p<TO> in team-a
pods() {
	for i in $(seq -f %02g "$1" "$2"); do
		cat <<-YAML
			apiVersion: v1
			kind: Pod
			metadata: {name: p$i, namespace: team-a}
			spec:
			  schedulerName: understory
			  priorityClassName: train
			  containers:
			  - name: c
			    image: registry.example/train:1
			    resources:
			      requests: {cpu: 100m, memory: 128Mi, nvidia.com/gpu: "1"}
			      limits: {nvidia.com/gpu: "1"}
			---
		YAML
	done | k apply -f - >/dev/null
}
bound() { # bound FROM TO: p<FROM>..p<TO> all have a node
	local i
	for i in $(seq -f %02g "$1" "$2"); do
		[[ -n $(k -n team-a get pod "p$i" -o jsonpath='{.spec.nodeName}') ]] || return 1
	done
}
audit_mark() { wc -l <"$work/c/audit.log"; }
# writes AGENT FROM [RESOURCE/SUBRESOURCE]: audit lines after line FROM
# written by user agent AGENT (optionally of one resource), one line each:
# verb resource/subresource namespace/name code
writes() {
	tail -n +"$(($2 + 1))" "$work/c/audit.log" |
		jq -r --arg ua "$1" --arg what "${3:-}" 'select(.userAgent == $ua)
			| [.verb, (.objectRef.resource + "/" + (.objectRef.subresource // "")), ((.objectRef.namespace // "") + "/" + (.objectRef.name // "")), (.responseStatus.code | tostring)]
			| select($what == "" or .[1] == $what) | join(" ")'
}

# --- A leads, B stands by ------------------------------------------------
start a
until_ok 30 "replica a acquired the lease" holder_is a
grep -qx "leader: acquired lease understory-system/understory as ${id[a]}" "$work/a.out" ||
	fail "replica a did not log its acquisition"
mark_b=$(audit_mark)
start b
until_ok 60 "replica a ready" ready a
until_ok 60 "replica b ready while standing by" ready b
[[ $(leader_metric a) == 1 && $(leader_metric b) == 0 ]] ||
	fail "understory_leader: a $(leader_metric a), b $(leader_metric b); expected 1 and 0"
pods 1 6
# a pod no node can hold: the leader writes its PodScheduled=False condition
k apply -f - >/dev/null <<-YAML
	apiVersion: v1
	kind: Pod
	metadata: {name: big-1, namespace: team-a}
	spec:
	  schedulerName: understory
	  priorityClassName: train
	  containers:
	  - name: c
	    image: registry.example/train:1
	    resources:
	      requests: {cpu: 100m, memory: 128Mi, nvidia.com/gpu: "9"}
	      limits: {nvidia.com/gpu: "9"}
YAML
until_ok 60 "p01..p06 bound by the leader" bound 1 6
big_pending() {
	[[ $(k -n team-a get pod big-1 -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}') == Unschedulable ]]
}
until_ok 30 "big-1 PodScheduled=False Unschedulable" big_pending
holder_is a || fail "the lease moved from a to $(holder) with nobody failing"
[[ $(writes "understory/${id[a]}" 0 pods/binding | grep -c ' 201$') -eq 6 ]] ||
	fail "a did not make the 6 bindings: $(writes "understory/${id[a]}" 0 pods/binding)"
[[ $(writes "understory/${id[a]}" 0 pods/status | grep -c '^patch pods/status team-a/big-1 200$') -ge 1 ]] ||
	fail "a did not patch big-1's status"
[[ -z $(writes "understory/${id[b]}" "$mark_b") ]] ||
	fail "the standby b wrote: $(writes "understory/${id[b]}" "$mark_b")"
echo "standby: b wrote nothing while a bound 6 pods and patched big-1"

# --- SIGKILL the leader: B takes over --------------------------------------
kill -KILL "${pid[a]}"
wait "${pid[a]}" 2>/dev/null || true
unset 'pid[a]'
killed=$SECONDS
pods 7 12
until_ok 60 "b acquired the lease after a was killed" holder_is b
echo "takeover after SIGKILL: $((SECONDS - killed)) s (lease duration 6 s, retry period 1 s)"
until_ok 60 "p07..p12 bound by the new leader" bound 7 12
for i in 07 08 09 10 11 12; do
	writes "understory/${id[b]}" 0 pods/binding | grep -qx "create pods/binding team-a/p$i 201" ||
		fail "p$i was not bound by b"
done
[[ $(leader_metric b) == 1 ]] || fail "b's understory_leader is $(leader_metric b) while leading"

# --- SIGTERM the leader: it releases, C takes over at once -----------------
start c
until_ok 60 "replica c ready" ready c
holder_is b || fail "c took the lease from a live leader b: $(holder)"
mark_c=$(audit_mark)
kill -TERM "${pid[b]}"
wait "${pid[b]}" || fail "b did not stop cleanly on SIGTERM"
unset 'pid[b]'
termed=$SECONDS
h=$(holder)
[[ $h == "" || $h == "${id[c]}" ]] || fail "b stopped without giving the lease up: the holder is still $h"
grep -qx 'leader: released lease understory-system/understory' "$work/b.out" || fail "b did not log its release"
until_ok 30 "c acquired the released lease" holder_is c
echo "takeover after SIGTERM (released): $((SECONDS - termed)) s"
pods 13 15
until_ok 60 "p13..p15 bound by c" bound 13 15
for i in 13 14 15; do
	writes "understory/${id[c]}" "$mark_c" pods/binding | grep -qx "create pods/binding team-a/p$i 201" ||
		fail "p$i was not bound by c"
done

# --- SIGSTOP the leader past its lease: D takes over; C must stay quiet ---
start d
until_ok 60 "replica d ready" ready d
kill -STOP "${pid[c]}"
until_ok 60 "d acquired the lease from the frozen c" holder_is d
pods 16 18
until_ok 60 "p16..p18 bound by d" bound 16 18
mark_cont=$(audit_mark)
kill -CONT "${pid[c]}"
lost() { grep -q '^leader: lost lease understory-system/understory' "$work/c.out"; }
until_ok 30 "c said it lost the lease" lost
pods 19 21
until_ok 60 "p19..p21 bound by d" bound 19 21
sleep 3 # three more of c's cycles, each of which would write if it could
[[ -z $(writes "understory/${id[c]}" "$mark_cont") ]] ||
	fail "c wrote after it lost the lease: $(writes "understory/${id[c]}" "$mark_cont")"
for i in 19 20 21; do
	writes "understory/${id[d]}" "$mark_cont" pods/binding | grep -qx "create pods/binding team-a/p$i 201" ||
		fail "p$i was not bound by d"
done
holder_is d || fail "the lease left d: $(holder)"
echo "after SIGCONT: c wrote nothing, d bound p19..p21"

for r in c d; do
	kill -TERM "${pid[$r]}"
	wait "${pid[$r]}" || fail "$r did not stop cleanly on SIGTERM"
	unset "pid[$r]"
done

# --- whoever led, each pod bound once -------------------------------------
jq -r 'select(.userAgent | startswith("understory/")) | select(.objectRef.subresource == "binding" and .responseStatus.code == 201)
	| .objectRef.name' "$work/c/audit.log" | sort | uniq -c | awk '{print $2, $1}' >"$work/binds.txt"
[[ $(wc -l <"$work/binds.txt") -eq 21 ]] || fail "$(wc -l <"$work/binds.txt") pods bound, expected 21: $(cat "$work/binds.txt")"
! awk '$2 != 1' "$work/binds.txt" | grep -q . || fail "bound more than once: $(awk '$2 != 1' "$work/binds.txt")"
refused=$(jq -r 'select(.userAgent | startswith("understory/")) | select(.objectRef.subresource == "binding" and .responseStatus.code != 201) | .objectRef.name' "$work/c/audit.log" | wc -l)
echo "ok: 4 replicas, 3 handovers, 21 pods each bound exactly once ($refused binding attempts refused)"
