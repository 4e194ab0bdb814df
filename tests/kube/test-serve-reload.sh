#!/usr/bin/env bash
# tests/kube/test-serve-reload.sh — `understory serve --policies DIR` on a
# real control plane, DIR laid out as the kubelet lays out a ConfigMap
# volume (files are symlinks into ..data, a symlink to a timestamped
# directory; an update renames a new ..data_tmp over ..data):
#   - policies that do not load at start: exit 2, naming file and line;
#   - a reload storm: a broken and a good placement policy alternate,
#     swapped in by the atomic writer's rename (bounded: 10 swaps, 1.5 s
#     apart) while 24 pods are created and scheduled;
#   - no decision lost: every pod is bound, and the API server's audit log
#     shows exactly one binding created for each, by understory;
#   - refused reloads keep the good policy: /metrics counts 5 ok and 5
#     refused, the policy in force is the last good one (its id as
#     `understory check` computes it) and PolicyReloadRefused events
#     name placement.lua and the line; PolicyReloaded events name the id;
#   - the last good policy decides: it prefers the node labelled
#     understory.test/preferred (the last by name, which the default
#     bin-packing fills last), and new pods go there;
#   - POST /reload answers 200 with the id, or 422 with file:line when the
#     directory is broken, and the policy in force stays.
set -euo pipefail
. "$(dirname "$0")/lib.bash"
understory=${UNDERSTORY:-$root/build/release/understory}
python=/usr/bin/python3

# the policies are made before the control plane: the trap from the start
trap kube_cleanup EXIT

# --- the policies: default, preferring a label, broken ---------------------
mkdir -p "$work/good" "$work/broken"
cp "$root/policies/fairshare.lua" "$root/policies/background.lua" "$work/good/"
cp "$root/policies/fairshare.lua" "$root/policies/background.lua" "$work/broken/"
cat >"$work/good/placement.lua" <<-'LUA'
	-- placement.lua (prefer-label): nodes labelled
	-- understory.test/preferred=true first, then bin-packing by GPU.
	local M = {labels = {"understory.test/preferred"}}

	function M.score(pod, node)
	  local preferred = node.labels["understory.test/preferred"] == "true" and 1e6 or 0
	  local gpu = node.capacity.gpu > 0 and (node.allocated.gpu + pod.requests.gpu) / node.capacity.gpu or 0
	  return preferred + 1000 * gpu
	end

	return M
LUA
cat >"$work/broken/placement.lua" <<-'LUA'
	-- placement.lua, broken: line 4 does not parse.
	local M = {}
	function M.score(pod, node)
	  return 1000 * * node.free.gpu
	end
	return M
LUA
good_id=$("$understory" check "$work/good" | sed -n 's/.*(policy id \([0-9a-f]*\)).*/\1/p')
[[ -n $good_id ]] || fail "understory check did not give the good policy's id"
default_id=$("$understory" check "$root/policies" | sed -n 's/.*(policy id \([0-9a-f]*\)).*/\1/p')
[[ -n $default_id && $default_id != "$good_id" ]] || fail "no default policy id, or the same as the good one"

# publish SRC: what the kubelet's atomic writer does to a ConfigMap volume
# at $work/policies: the files into a new timestamped directory, a
# ..data_tmp symlink to it renamed over ..data, the old directory removed.
pdir=$work/policies
mkdir -p "$pdir"
n_pub=0
publish() {
	n_pub=$((n_pub + 1))
	local ts old
	ts=$(printf '..2026_12_01_00_00_%02d.%09d' "$n_pub" "$n_pub")
	mkdir "$pdir/$ts"
	cp "$1"/*.lua "$pdir/$ts/"
	old=$(readlink "$pdir/..data" 2>/dev/null || true)
	ln -s "$ts" "$pdir/..data_tmp"
	mv -T "$pdir/..data_tmp" "$pdir/..data"
	for f in fairshare.lua placement.lua background.lua; do
		[[ -L $pdir/$f ]] || ln -s "..data/$f" "$pdir/$f"
	done
	[[ -z $old ]] || rm -rf "${pdir:?}/$old"
}
publish "$root/policies"
[[ -L $pdir/placement.lua && $(readlink "$pdir/..data") == ..2026_12_01_00_00_01.* ]] ||
	fail "the ConfigMap layout was not made"

kube_up
for i in 1 2 3 4; do
	preferred=false
	[[ $i == 4 ]] && preferred=true
	k apply -f - >/dev/null <<-YAML
		apiVersion: v1
		kind: Node
		metadata:
		  name: n$i
		  annotations: {kwok.x-k8s.io/node: fake}
		  labels: {type: kwok, understory.test/preferred: "$preferred"}
		status:
		  allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}
		  capacity: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}
	YAML
done
queue_namespace team-a 32 | k apply -f - >/dev/null

sa_kubeconfig

# --- broken at start: exit 2, naming the file and line ------------------
status=0
"$understory" serve --kubeconfig "$work/understory.kubeconfig" --admin-address 127.0.0.1:0 \
	--policies "$work/broken" >"$work/start-broken.out" 2>"$work/start-broken.err" || status=$?
[[ $status -eq 2 ]] || fail "broken policies at start exited $status, not 2"
grep -q "placement.lua:4:" "$work/start-broken.err" || fail "the start-up error does not name placement.lua:4"
status=0
"$understory" serve --kubeconfig "$work/understory.kubeconfig" --admin-address 127.0.0.1:0 \
	--policies "$work/nowhere" >"$work/start-missing.out" 2>"$work/start-missing.err" || status=$?
[[ $status -eq 2 ]] || fail "a missing policy directory exited $status, not 2"
grep -q -- "--policies $work/nowhere" "$work/start-missing.err" || fail "the missing directory was not named"

# --- the daemon, on the ConfigMap-like directory --------------------------
POD_NAMESPACE=understory-system POD_NAME=understory-0 start_serve serve --policies "$pdir"
grep -q "policies from $pdir: policy $default_id" "$work/serve.err" || fail "serve did not start on the default policy"

# pod NAME: one 1-GPU pod of ours in team-a
pod() { gpu_pod "$1" team-a storm 1; }

# --- the storm: 10 swaps, broken and good alternating, pods arriving ------
(
	for i in $(seq 1 24); do
		pod "storm-$i" | k apply -f - >/dev/null
		sleep 0.6
	done
) >"$work/create.out" 2>&1 &
creator=$!
pids+=("$creator")
for i in 1 2 3 4 5; do
	publish "$work/broken"
	sleep 1.5
	publish "$work/good"
	sleep 1.5
done
wait "$creator" || fail "creating the storm's pods failed: $(cat "$work/create.out")"

all_bound() {
	[[ $(k -n team-a get pods -l app=storm -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true) -eq 24 ]]
}
until_ok 60 "all 24 storm pods bound" all_bound

# no decision lost, none doubled: one binding created per pod, by understory
bindings() {
	"$python" - "$work/c/audit.log" <<-'PY'
		import json, sys, collections
		n = collections.Counter()
		for line in open(sys.argv[1]):
		    e = json.loads(line)
		    o = e.get("objectRef", {})
		    if e.get("stage") != "ResponseComplete" or e.get("verb") != "create":
		        continue
		    if o.get("resource") == "pods" and o.get("subresource") == "binding" and o.get("namespace") == "team-a":
		        code = e.get("responseStatus", {}).get("code")
		        print(e["user"]["username"], o["name"], code)
	PY
}
bindings >"$work/bindings.txt"
[[ $(grep -c . "$work/bindings.txt") -eq 24 ]] || fail "expected 24 binding requests, the audit log has $(grep -c . "$work/bindings.txt")"
[[ $(awk '$1 == "system:serviceaccount:understory-system:understory" && $3 == 201' "$work/bindings.txt" | awk '{print $2}' | sort -u | wc -l) -eq 24 ]] ||
	fail "not one 201 binding by understory for each of the 24 pods: $(cat "$work/bindings.txt")"

# metrics: 5 ok, 5 refused, the last good policy in force
scrape() {
	curl -s --max-time 10 "$admin/metrics" >"$work/metrics.txt" || return 1
	"$python" "$root/tests/prom_check.py" "$work/metrics.txt" >"$work/metrics.prom"
}
sample() { awk -v p="$1" 'index($0, p) == 1 { print $NF }' "$work/metrics.prom"; }
scrape || fail "/metrics does not parse: $(cat "$work/metrics.prom")"
[[ $(sample 'understory_policy_reloads_total{result="ok"} ') == 5.0 ]] ||
	fail "reloads ok: $(sample 'understory_policy_reloads_total{result="ok"} '), want 5.0"
[[ $(sample 'understory_policy_reloads_total{result="refused"} ') == 5.0 ]] ||
	fail "reloads refused: $(sample 'understory_policy_reloads_total{result="refused"} '), want 5.0"
[[ $(sample "understory_policy_info{policy_id=\"$good_id\"} ") == 1.0 ]] ||
	fail "the policy in force is not the last good one ($good_id): $(grep policy_info "$work/metrics.prom")"
[[ $(grep -c '^understory_policy_info{' "$work/metrics.prom") -eq 1 ]] || fail "more than one policy id shown"

# events: 5 refused naming placement.lua:4, 5 reloaded naming the id,
# regarding the replica's pod
events() {
	k -n understory-system get events.events.k8s.io -o jsonpath='{range .items[?(@.reportingController=="understory")]}{.reason}|{.regarding.kind}/{.regarding.name}|{.note}{"\n"}{end}'
}
five_each() {
	events >"$work/events.txt"
	[[ $(grep -c '^PolicyReloadRefused|Pod/understory-0|.*placement.lua:4:' "$work/events.txt" || true) -eq 5 &&
		$(grep -c "^PolicyReloaded|Pod/understory-0|.*: $good_id replaces" "$work/events.txt" || true) -eq 5 ]]
}
until_ok 30 "5 PolicyReloadRefused events naming placement.lua:4 and 5 PolicyReloaded naming $good_id" five_each

# the last good policy decides: with n4 emptied, new pods go to the
# preferred n4, where the default bin-packing would put them on the
# fullest node with room
nodes_of() { k -n team-a get pods -l app=storm -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}'; }
on_n4=$(nodes_of | awk '$2 == "n4" {print $1}')
[[ -n $on_n4 ]] || fail "no storm pod on the preferred node n4"
k -n team-a delete pod $on_n4 --wait=true >/dev/null
n4_free() { [[ $(sample 'understory_idle_gpus{} ') == "$(($(grep -c . <<<"$on_n4") + 32 - 24)).0" ]] || { scrape; return 1; }; }
scrape || true
until_ok 30 "the engine sees n4's pods gone" n4_free
for i in 25 26; do pod "storm-$i" | k apply -f - >/dev/null; done
two_on_n4() { [[ $(nodes_of | awk '$1 == "storm-25" || $1 == "storm-26" {print $2}' | sort -u) == n4 ]]; }
until_ok 30 "the two new pods on the preferred node n4" two_on_n4

# POST /reload: 200 with the id; broken: 422 naming file and line, the
# policy stays
code=$(curl -s -o "$work/reload.body" -w '%{http_code}' -X POST "$admin/reload")
[[ $code == 200 && $(cat "$work/reload.body") == "$good_id" ]] || fail "POST /reload: $code $(cat "$work/reload.body")"
publish "$work/broken"
sleep 1 # the watch's own reload of it, refused, first
code=$(curl -s -o "$work/reload.body" -w '%{http_code}' -X POST "$admin/reload")
[[ $code == 422 ]] && grep -q 'placement.lua:4:' "$work/reload.body" ||
	fail "POST /reload of a broken directory: $code $(cat "$work/reload.body")"
scrape || fail "/metrics does not parse"
[[ $(sample "understory_policy_info{policy_id=\"$good_id\"} ") == 1.0 ]] || fail "a refused POST /reload changed the policy"
[[ $(sample 'understory_policy_reloads_total{result="ok"} ') == 6.0 && $(sample 'understory_policy_reloads_total{result="refused"} ') == 7.0 ]] ||
	fail "after POST /reload: ok $(sample 'understory_policy_reloads_total{result="ok"} ') refused $(sample 'understory_policy_reloads_total{result="refused"} '), want 6.0 and 7.0"
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "the daemon did not stop cleanly on SIGTERM"
echo "ok: reload storm (5 good, 5 broken) while 24 pods were bound once each; the last good policy decides"
