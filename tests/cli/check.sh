#!/usr/bin/env bash
# understory check DIR [--scenario FILE]: exit 0 only when syntax, required
# functions and the result contract all pass; 1 with path:line: message for
# each problem; 2 for bad usage or a scenario that does not load.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

# The default policies and both example alternatives pass.
for dir in policies examples/policies/spread examples/policies/drf; do
    run check "$dir"
    expect_status 0
    expect_stderr_empty
    expect_stdout_has "ok   syntax"
    expect_stdout_has "ok   required functions"
    expect_stdout_has "ok   result contract on scenario \"built-in check\""
    expect_stdout_has "$dir: passed"
done

# ... on a scenario of one's own as well.
run check policies --scenario examples/seed-story.json
expect_status 0
expect_stdout_has "result contract on scenario \"seed story\""

# A policy directory with one file replaced.
broken() { # name file contents
    mkdir -p "$TMP/$1"
    cp policies/*.lua "$TMP/$1/"
    printf '%b' "$3" >"$TMP/$1/$2"
}

broken syntax placement.lua 'local M = {}\nlocal x = = 1\nreturn M\n'
printf 'return {\n' >"$TMP/syntax/fairshare.lua"
run check "$TMP/syntax"
expect_status 1
# both files' syntax errors, each as path:line:
expect_stdout_has "$TMP/syntax/placement.lua:2:"
expect_stdout_has "$TMP/syntax/fairshare.lua:2:"
expect_stdout_has "FAIL syntax"
expect_stdout_has "FAILED, 2 problems"

broken nofn background.lua 'return { reoffer_all = function() end }\n'
run check "$TMP/nofn"
expect_status 1
expect_stdout_has "$TMP/nofn/background.lua: must return a table with a function \"reoffer\""
expect_stdout_has "FAIL required functions"

broken runtime placement.lua 'local M = {}\nfunction M.score(pod, node)\n  return pod.nope.x\nend\nreturn M\n'
run check "$TMP/runtime"
expect_status 1
expect_stdout_has "$TMP/runtime/placement.lua:3: attempt to index a nil value"
expect_stdout_has "PolicyFailed in cycle 1, t=0s"
expect_stdout_has "FAIL result contract"

broken loop fairshare.lua 'local M = {}\nfunction M.compute(view)\n  while true do end\nend\nreturn M\n'
run check "$TMP/loop" --instructions 100000
expect_status 1
# the call's budget: 100,000 and 64 for each of the 4 queues in its view
expect_stdout_has "$TMP/loop/fairshare.lua:3: instruction budget exceeded (100256 instructions)"

broken bomb background.lua 'local M = {}\nfunction M.reoffer(view)\n  local t = {}\n  for i = 1, 1e9 do t[i] = string.rep("x", 1000) .. i end\nend\nreturn M\n'
run check "$TMP/bomb" --memory 8Mi
expect_status 1
expect_stdout_has "$TMP/bomb/background.lua:4: memory budget exceeded (8388608 bytes)"

broken overfill background.lua 'local M = {}\nfunction M.reoffer(view)\n  local keep, place = {}, {}\n  for _, p in ipairs(view.running) do keep[#keep + 1] = p.name end\n  for _, p in ipairs(view.pending) do place[p.name] = p.candidates[1] end\n  return { keep = keep, place = place }\nend\nreturn M\n'
run check "$TMP/overfill"
expect_status 1
expect_stdout_has "$TMP/overfill/background.lua: result rejected:"
expect_stdout_has "over capacity"
expect_stdout_has "PolicyRejected"

# A scenario with no background work never calls reoffer: the built-in
# scenario is run too, and finds what the scenario could not.
cat >"$TMP/ai-only.json" <<'JSON'
{"name": "ai only", "horizon": 20,
 "nodes": [{"name": "n1", "gpu": 8}],
 "queues": [{"name": "q", "resources": {"gpu": {"quota": 8}}}],
 "workloads": [{"name": "w", "queue": "q", "requests": {"gpu": 1}}]}
JSON
run check "$TMP/overfill" --scenario "$TMP/ai-only.json"
expect_status 1
expect_stdout_has "ok   result contract on scenario \"ai only\""
expect_stdout_has "never called reoffer"
expect_stdout_has "FAIL result contract on scenario \"built-in check\""

# A directory holding only the file it changes: the rest are the
# defaults, and check says so.
mkdir -p "$TMP/partial"
cp examples/policies/spread/placement.lua "$TMP/partial/"
run check "$TMP/partial"
expect_status 0
expect_stdout_has "note fairshare.lua is not in $TMP/partial: the default is used"
expect_stdout_has "note background.lua is not in $TMP/partial: the default is used"
! grep -q "note placement.lua" "$TMP/out" || fail "$LAST: placement.lua is in the directory"
expect_stdout_has "$TMP/partial: passed"

# A score that reads names: the class cache scores one node (pod) for all
# identical ones, so the decisions change when every pair is scored on its
# own; check finds it for a node name and for a pod name, and the
# defaults and examples pass (the loop at the top).
mkdir -p "$TMP/node-named" "$TMP/pod-named"
printf 'return { score = function(pod, node) if node.name == "n3" then return 1 end return 0 end }\n' \
    >"$TMP/node-named/placement.lua"
printf 'return { score = function(pod, node)\n  if pod.name:sub(-1) == "1" then return node.free_gpus end\n  return -node.free_gpus\nend }\n' \
    >"$TMP/pod-named/placement.lua"
# (the pods of a workload share a class: on the seed story, eval-b's two
# pods would go to different nodes if each were scored on its own)
for d in node-named pod-named; do
    run check "$TMP/$d" --scenario examples/seed-story.json
    expect_status 1
    expect_stdout_has "$TMP/$d/placement.lua: the score depends on node or pod names: scored once per class"
    expect_stdout_has "with every (pod, node) pair scored on its own"
    expect_stdout_has "FAIL score independent of names"
    expect_stdout_has "ok   result contract"
    expect_stdout_has "FAILED, 1 problem"
done
run check policies
expect_stdout_has "ok   score independent of names: the same decisions with every (pod, node) pair scored on its own"
expect_stdout_has "ok   score independent of earlier cycles: the same decisions with every cycle scoring afresh"

# A score that depends on what earlier cycles saw: fairshare.lua counts
# its calls in a module both files require, and placement.lua prefers the
# emptiest node in even cycles and the fullest in odd ones.  Scores are
# kept from cycle to cycle for the same views, so with them the second
# arrival goes where the first cycle's scores sent the first; check finds
# it by running every cycle afresh, and says it is not about names.
mkdir -p "$TMP/cycle-state"
printf 'return { computes = 0 }\n' >"$TMP/cycle-state/shared.lua"
cat >"$TMP/cycle-state/fairshare.lua" <<'LUA'
local shared = require "shared"
return { compute = function(view)
  shared.computes = shared.computes + 1
  local r = {}
  for _, q in ipairs(view.queues) do r[q.name] = { gpu = 0, cpu = 0, memory = 0 } end
  return r
end }
LUA
cat >"$TMP/cycle-state/placement.lua" <<'LUA'
local shared = require "shared"
return { score = function(pod, node)
  if shared.computes % 2 == 0 then return node.free.gpu end
  return -node.free.gpu
end }
LUA
cat >"$TMP/arrivals.json" <<'JSON'
{"name": "arrivals", "cycle_interval": 10, "horizon": 40,
 "nodes": [{"name": "n1", "gpu": 8, "cpu": "64", "memory": "512Gi"},
           {"name": "n2", "gpu": 8, "cpu": "64", "memory": "512Gi"},
           {"name": "n3", "gpu": 8, "cpu": "64", "memory": "512Gi"}],
 "queues": [{"name": "team", "resources": {"gpu": {"quota": 24}}}],
 "workloads": [
  {"name": "w0", "queue": "team", "requests": {"gpu": 1}, "submit_at": 0},
  {"name": "w1", "queue": "team", "requests": {"gpu": 1}, "submit_at": 10},
  {"name": "w2", "queue": "team", "requests": {"gpu": 1}, "submit_at": 20}]}
JSON
run check "$TMP/cycle-state" --scenario "$TMP/arrivals.json"
expect_status 1
expect_stdout_has "$TMP/cycle-state/placement.lua: the score depends on what earlier cycles saw, not only on its views: with scores kept from cycle to cycle, cycle 2 (t=10s) decides bind w1-0 on n1; with every cycle scoring afresh, bind w1-0 on n2"
expect_stdout_has "FAIL score independent of earlier cycles"
expect_stdout_has "ok   score independent of names"
expect_stdout_has "ok   result contract on scenario \"arrivals\""
expect_stdout_has "FAILED, 1 problem"
# the defaults, on the same arrivals: scores kept, nothing changes
run check policies --scenario "$TMP/arrivals.json"
expect_status 0
expect_stdout_has "ok   score independent of earlier cycles"

# A missing directory, or one with none of the files, says so.
run check "$TMP/nowhere"
expect_status 1
expect_stdout_has "$TMP/nowhere: cannot open the directory: No such file or directory"
mkdir -p "$TMP/empty"
run check "$TMP/empty"
expect_status 1
expect_stdout_has "$TMP/empty: holds none of fairshare.lua, placement.lua, background.lua"

# The check cannot run: exit 2, the reason on stderr.
run check policies --scenario "$TMP/no-such.json"
expect_status 2
expect_stderr_has "no-such.json"
run check
expect_status 2
expect_stderr_has "missing the policy directory DIR"
run check policies other
expect_status 2
expect_stderr_has "one policy directory at a time"
run check policies --json
expect_status 2
expect_stderr_has "unknown option --json"
