#!/usr/bin/env bash
# Output is always valid, and messages say what to fix (issue 13):
# - invalid UTF-8 anywhere in a scenario is refused at load, naming the
#   byte offset, line and column; --json output is valid UTF-8;
# - control characters and terminal escapes in names, and in what a policy
#   raises, are escaped in the readable account (and valid in --json);
# - a negative fair share is reported in the policy's units;
# - a quantity with too many digits says so;
# - a node without cpu or memory draws a Warning.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

scenario() { # file, node name (raw bytes allowed), node fields
    printf '{"name": "out", "horizon": 0,\n "nodes": [{"name": "%s", %s}],\n' "$2" "$3" >"$1"
    printf ' "queues": [{"name": "q", "resources": {"gpu": {"quota": 8}}}],\n' >>"$1"
    printf ' "workloads": [{"name": "w", "queue": "q", "requests": {"gpu": 1, "cpu": "1", "memory": "1Gi"}}]}\n' >>"$1"
}
FULL='"gpu": 8, "cpu": "64", "memory": "64Gi"'

# invalid UTF-8 (a lone continuation byte, an overlong '/', a surrogate)
for bad in '\x80' '\xc0\xaf' '\xed\xa0\x80'; do
    scenario "$TMP/bad.json" "n$(printf "$bad")x" "$FULL"
    run simulate "$TMP/bad.json" --json
    expect_status 2
    expect_stdout_empty
    expect_stderr_has "bad.json: invalid UTF-8 at byte offset 52 (line 2, column 23)"
done

# an escape sequence and a bell in a node name: valid JSON text, so loaded
scenario "$TMP/esc.json" 'n\u001b[2J\u0007\u009b1' "$FULL"
run simulate "$TMP/esc.json"
expect_status 0
grep -q $'\x1b' "$TMP/out" && fail "$LAST: an ESC byte reached the output"
grep -q $'\x07' "$TMP/out" && fail "$LAST: a BEL byte reached the output"
grep -q $'\xc2\x9b' "$TMP/out" && fail "$LAST: a C1 CSI reached the output"
expect_stdout_has 'n\x1b[2J\x07\u009b1'
run simulate "$TMP/esc.json" --json
expect_status 0
python3 -c 'import json,sys; d=json.load(open(sys.argv[1], encoding="utf-8", errors="strict")); assert d["cycles"][0]["decisions"][0]["node"] == "n\x1b[2J\x07\x9b1"' "$TMP/out" ||
    fail "$LAST: not the name, or not valid JSON"

# what a policy raises: invalid UTF-8 and a terminal escape
mkdir -p "$TMP/pol"
cp policies/*.lua "$TMP/pol/"
printf 'return { score = function() error("bad \\xff\\x1b[2J\\xe2\\x82") end }\n' >"$TMP/pol/placement.lua"
scenario "$TMP/ok.json" n1 "$FULL"
run simulate "$TMP/ok.json" --policies "$TMP/pol"
expect_status 0
expect_stdout_has 'placement.lua:1: bad \xff\x1b[2J'
grep -q $'\x1b' "$TMP/out" && fail "$LAST: an ESC byte reached the output"
run simulate "$TMP/ok.json" --policies "$TMP/pol" --json
expect_status 0
python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8", errors="strict"))' "$TMP/out" ||
    fail "$LAST: the JSON output is not valid UTF-8"
# messages are escaped where they are made: the JSON shows the escapes
expect_stdout_has '"placement.lua:1: bad \\xff\\x1b[2J; this cycle uses the built-in policy instead"'
# ... and in the messages of `understory check`
run check "$TMP/pol"
expect_status 1
expect_stdout_has 'placement.lua:1: bad \xff\x1b[2J'
grep -q $'\x1b' "$TMP/out" && fail "$LAST: an ESC byte reached the output"

# a negative fair share, in GPUs as the policy returned it
cat >"$TMP/pol/fairshare.lua" <<'LUA'
return { compute = function(view)
  local out = {}
  for _, q in ipairs(view.queues) do out[q.name] = { gpu = -5, cpu = 0, memory = 0 } end
  return out
end }
LUA
cp policies/placement.lua "$TMP/pol/"
run simulate "$TMP/ok.json" --policies "$TMP/pol"
expect_status 0
expect_stdout_has 'fair share of queue "q" for gpu is -5: must be a finite number >= 0'

# a quantity with too many digits
scenario "$TMP/digits.json" n1 "\"gpu\": 8, \"cpu\": \"$(printf '1%.0s' $(seq 70))\", \"memory\": \"64Gi\""
run simulate "$TMP/digits.json"
expect_status 2
expect_stderr_has 'nodes[0].cpu: "111111111111111111111111111111111111111111111111111111111111..."'
expect_stderr_has 'is not a cpu quantity (more than 64 significant digits)'

# nodes without cpu, without memory, without both: one Warning each, once
printf '{"name": "caps", "horizon": 20, "nodes": [{"name": "a", "gpu": 8, "memory": "8Gi"},
  {"name": "b", "gpu": 8, "cpu": "8"}, {"name": "c", "gpu": 8}, {"name": "d", "gpu": 8, "cpu": "8", "memory": "8Gi"}],
  "queues": [{"name": "q"}], "workloads": []}\n' >"$TMP/caps.json"
run simulate "$TMP/caps.json"
expect_status 0
expect_stdout_has "Warning  a  IncompleteCapacity: node has no cpu capacity: it can never run a pod that requests cpu"
expect_stdout_has "Warning  b  IncompleteCapacity: node has no memory capacity: it can never run a pod that requests memory"
expect_stdout_has "Warning  c  IncompleteCapacity: node has no cpu and no memory capacity: it can never run a pod that requests either"
[ "$(grep -c IncompleteCapacity "$TMP/out")" -eq 3 ] || fail "$LAST: not exactly three warnings: $(cat "$TMP/out")"
exit 0
