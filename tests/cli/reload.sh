#!/usr/bin/env bash
# A reload in a scenario's timeline (examples/reload.json): the good one
# goes live before its cycle and the output names the new id from then on;
# the refused one changes nothing and says why.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

run simulate examples/reload.json
expect_status 0
expect_stderr_empty
expect_stdout_has "  policy now "
expect_stdout_has "PolicyReloaded: policies reloaded from examples/policies/spread"
expect_stdout_has "PolicyReloadRefused: reload of examples/policies/does-not-exist refused"
expect_stdout_has "stays: cannot open the directory: No such file or directory"
# the directory is named once, not again inside the reason
[ "$(grep PolicyReloadRefused "$TMP/out" | grep -o does-not-exist | wc -l)" -eq 1 ] ||
    fail "$LAST: the directory is named more than once: $(grep PolicyReloadRefused "$TMP/out")"
[ "$(grep -c '  policy now ' "$TMP/out")" -eq 1 ] || fail "$LAST: the id changed more than once"

run simulate examples/reload.json --json
expect_status 0
if command -v python3 >/dev/null; then
    python3 - "$TMP/out" <<'PY' || fail "$LAST: document check failed"
import json, sys
d = json.load(open(sys.argv[1]))
ids = [c["policy"] for c in d["cycles"]]
first, spread = ids[0], d["policy"]
assert first != spread and len(spread) == 16, (first, spread)
assert all(p == (first if c["time"] < 50 else spread) for c, p in zip(d["cycles"], ids)), ids
ev = [e for c in d["cycles"] for e in c["events"] if e["reason"].startswith("PolicyReload")]
assert [e["reason"] for e in ev] == ["PolicyReloaded", "PolicyReloadRefused"], ev
assert ev[0]["annotations"]["policy-id"] == spread
assert ev[0]["annotations"]["previous-policy-id"] == first
assert ev[1]["type"] == "Warning" and ev[1]["annotations"]["policy-id"] == spread
PY
fi

# From t=50 the spread policy decides: the seed story decides the same
# before t=60 under both policies, so every cycle matches a run with
# spread from the start.
run simulate examples/reload.json --json
cp "$TMP/out" "$TMP/reload.json"
run simulate examples/seed-story.json --policies examples/policies/spread --json
expect_status 0
if command -v python3 >/dev/null; then
    python3 - "$TMP/reload.json" "$TMP/out" <<'PY' || fail "reload run and spread run differ"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert len(a["cycles"]) == len(b["cycles"])
for x, y in zip(a["cycles"], b["cycles"]):
    assert x["decisions"] == y["decisions"], (x["cycle"], x["decisions"], y["decisions"])
PY
fi
