#!/usr/bin/env bash
# --cycle-budget on simulate, check and diff: a placement policy legal call
# by call but slow over a cycle hands the rest of the cycle to the built-in
# policies, with a PolicyFailed warning naming the policy and the budget;
# with the default budget the same policy runs undisturbed.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

mkdir -p "$TMP/slow"
cp policies/*.lua "$TMP/slow/"
# the default score after a busy loop of a few million instructions
cat >"$TMP/slow/placement.lua" <<'LUA'
local M = {}
function M.score(pod, node)
  local x = 0
  for i = 1, 1500000 do x = x + i end
  local gpu = node.capacity.gpu == 0 and 0 or (node.allocated.gpu + pod.requests.gpu) / node.capacity.gpu
  local cpu = node.capacity.cpu == 0 and 0 or (node.allocated.cpu + pod.requests.cpu) / node.capacity.cpu
  return 1000 * gpu + cpu + x * 0
end
return M
LUA
# 30 node classes (distinct CPU sizes), 8 pods
{
    printf '{"name": "slow", "cycle_interval": 10, "horizon": 0, "nodes": ['
    for i in $(seq 1 30); do
        [ "$i" -gt 1 ] && printf ','
        printf '{"name": "n%02d", "gpu": 8, "cpu": "%d", "memory": "256Gi"}' "$i" $((32 + i))
    done
    printf '], "queues": [{"name": "ml", "resources": {"gpu": {"quota": 240}}}],'
    printf ' "workloads": [{"name": "a", "queue": "ml", "replicas": 8, "requests": {"gpu": 1}}]}\n'
} >"$TMP/slow.json"

run simulate "$TMP/slow.json" --policies "$TMP/slow" --verbose --cycle-budget 0.05
expect_status 0
expect_stdout_has "PolicyFailed: placement.lua"
expect_stdout_has "cycle budget"
expect_stdout_has "(0.05 s)"
expect_stdout_has "the rest of this cycle uses the built-in policies"
# what happened instead: all 8 pods bound, by the built-in
[ "$(grep -c '^  bind ' "$TMP/out")" -eq 8 ] || fail "$LAST: expected 8 binds: $(cat "$TMP/out")"

run simulate "$TMP/slow.json" --policies "$TMP/slow" --json --cycle-budget 0.05
expect_status 0
grep -qE '"cycle-budget":[[:space:]]*"0.05"' "$TMP/out" || fail "$LAST: no cycle-budget annotation"

run simulate "$TMP/slow.json" --policies "$TMP/slow" --verbose
expect_status 0
! grep -qF PolicyFailed "$TMP/out" || fail "$LAST: a PolicyFailed within the budget: $(cat "$TMP/out")"
[ "$(grep -c '^  bind ' "$TMP/out")" -eq 8 ] || fail "$LAST: expected 8 binds: $(cat "$TMP/out")"

# check counts the spent budget as a problem of the policy
run check "$TMP/slow" --scenario "$TMP/slow.json" --cycle-budget 0.05
expect_status 1
expect_stdout_has "cycle budget"

run diff --from policies --to "$TMP/slow" "$TMP/slow.json" --cycle-budget 0.05
expect_status 0
grep -qE '^  policy warnings +0 +1 +\+1$' "$TMP/out" || fail "$LAST: policy warnings: $(cat "$TMP/out")"
