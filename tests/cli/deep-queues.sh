#!/usr/bin/env bash
# A queue chain thousands of queues deep is valid input: it loads, runs, and
# the readable account indents its queue table by at most 12 levels, so the
# table does not grow with the square of the depth (--json has every parent).
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

n=3000
{
    printf '{"name": "deep", "horizon": 10, "nodes": [{"name": "n1", "gpu": 8, "cpu": "64", "memory": "64Gi"}],\n'
    printf ' "queues": [{"name": "q0"}'
    for ((i = 1; i < n; i++)); do printf ', {"name": "q%d", "parent": "q%d"}' "$i" $((i - 1)); done
    printf '],\n "workloads": [{"name": "w", "queue": "q%d", "requests": {"gpu": 1}}]}\n' $((n - 1))
} >"$TMP/deep.json"

run simulate "$TMP/deep.json"
expect_status 0
expect_stdout_has "w-0"
# q12 and everything deeper sit at the same indentation: 2 + 24 columns
grep -q "^                          q2999 " "$TMP/out" || fail "$LAST: q2999 not indented 12 levels"
grep -q "^                        q11 " "$TMP/out" || fail "$LAST: q11 not indented 11 levels"
longest=$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$TMP/out")
[ "$longest" -lt 200 ] || fail "$LAST: a line of $longest characters"

run simulate "$TMP/deep.json" --json
expect_status 0
if command -v python3 >/dev/null; then
    python3 - "$TMP/out" <<'PY' || fail "$LAST: document check failed"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["cycles"][0]["decisions"][0]["pod"] == "w-0", d["cycles"][0]["decisions"]
PY
fi
exit 0
