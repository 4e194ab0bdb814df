#!/usr/bin/env bash
# understory diff --from DIR --to DIR FILE [--json]: the decisions that
# differ, cycle by cycle, and the change in the summary figures; exit 0
# whether or not anything differs, 2 when an input does not load.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

seed=examples/seed-story.json

# The same policies: nothing differs.
run diff --from policies --to policies "$seed"
expect_status 0
expect_stderr_empty
expect_stdout_has "no decision differs in 41 cycles"
expect_stdout_has "evictions (backgroundpods)"

# Spread placement: eval-b goes elsewhere.  "-" lines are the baseline's,
# "+" lines the new version's, under the cycle they belong to.
run diff --from policies --to examples/policies/spread "$seed"
expect_status 0
expect_stdout_has "understory diff: seed story"
expect_stdout_has "cycle 7  t=60s"
expect_stdout_has "  - pipeline  eval-b-0     -> n1"
expect_stdout_has "  + pipeline  eval-b-0     -> n2"
expect_stdout_has "3 of 41 cycles differ"
grep -qE '^  evictions \(backgroundpods\) +17 +17 +0$' "$TMP/out" ||
    fail "$LAST: no backgroundpods row: $(cat "$TMP/out")"
cp "$TMP/out" "$TMP/first.txt"
run diff --from policies --to examples/policies/spread "$seed"
cmp -s "$TMP/out" "$TMP/first.txt" || fail "$LAST: two runs differ"

# Swapping the sides swaps the signs.
run diff --from examples/policies/spread --to policies "$seed"
expect_status 0
expect_stdout_has "  + pipeline  eval-b-0     -> n1"
expect_stdout_has "  - pipeline  eval-b-0     -> n2"

# The JSON document carries the same.
run diff --from policies --to examples/policies/spread "$seed" --json
expect_status 0
for key in '"scenario":' '"from":' '"to":' '"dir":' '"id":' '"cycles":' '"only_from":' \
    '"only_to":' '"summary":' '"change":' '"evictions":' '"backgroundpods":' '"reclaim":' \
    '"preempt":' '"allocate":' '"ai_pods_pending":' '"fair_share":' '"team-a":'; do
    expect_stdout_has "$key"
done
if command -v python3 >/dev/null; then
    python3 - "$TMP/out" <<'PY' || fail "$LAST: document check failed"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["from"]["dir"] == "policies" and len(d["to"]["id"]) == 16
assert [c["cycle"] for c in d["cycles"]] == [7, 8, 20], d["cycles"]
c7 = d["cycles"][0]
assert {x["pod"] for x in c7["only_from"]} >= {"eval-b-0", "eval-b-1"}
s = d["summary"]
for side in ("from", "to", "change"):
    assert set(s[side]["evictions"]) == {"allocate", "reclaim", "preempt", "backgroundpods",
                                         "stalegangeviction"}
assert s["change"]["evictions"]["backgroundpods"] == 0
assert s["from"]["ai_pods_pending"] == 0
assert set(s["from"]["fair_share"]) == {"research", "team-a", "team-b", "infra-bg"}
PY
fi

# DRF fair share (examples/policy-diff.json, as docs/policies.md shows it):
# the GPU-hungry queue keeps more GPUs, so fewer of its pods are reclaimed.
run diff --from policies --to examples/policies/drf examples/policy-diff.json
expect_status 0
expect_stdout_has "  - evict     train-22    from n2  (reclaim, for features)"
grep -qE '^  evictions \(reclaim\) +4 +2 +-2$' "$TMP/out" || fail "$LAST: reclaims: $(cat "$TMP/out")"
grep -qE '^  vision +gpu +16 +24 +\+8$' "$TMP/out" || fail "$LAST: vision fair share: $(cat "$TMP/out")"

# Inputs that do not load: exit 2, nothing on stdout.
run diff --from policies --to "$TMP/nowhere" "$seed"
expect_status 2
expect_stdout_empty
expect_stderr_has "policies $TMP/nowhere"
run diff --from policies --to policies "$TMP/nope.json"
expect_status 2
expect_stdout_empty
expect_stderr_has "nope.json"
run diff --from policies "$seed"
expect_status 2
expect_stderr_has "missing --to DIR"
run diff --to policies "$seed"
expect_status 2
expect_stderr_has "missing --from DIR"
run diff --from policies --to policies
expect_status 2
expect_stderr_has "missing the scenario FILE"
