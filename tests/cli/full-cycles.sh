#!/usr/bin/env bash
# Incremental cycles decide what full ones do: every example scenario gives
# the same output, byte for byte, whether each cycle reuses what the last
# one left (the default) or recomputes everything (--full-cycles), in the
# JSON document and in the readable account.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

n=0
for f in examples/*.json; do
    for mode in --json --verbose; do
        run simulate "$f" $mode
        expect_status 0
        cp "$TMP/out" "$TMP/incremental"
        run simulate "$f" $mode --full-cycles
        expect_status 0
        [ -s "$TMP/out" ] || fail "$LAST: no output"
        cmp -s "$TMP/incremental" "$TMP/out" ||
            fail "$f $mode: incremental and full cycles differ: $(diff "$TMP/incremental" "$TMP/out" | head -20)"
    done
    n=$((n + 1))
done
[ "$n" -ge 10 ] || fail "only $n example scenarios found"

# the option is the simulator's, and check and diff (which run cycles) take it too
run simulate examples/seed-story.json --full-cycles --json
expect_status 0
expect_stdout_has '"cycles"'
run check policies --scenario examples/seed-story.json --full-cycles
expect_status 0
echo "ok: $n examples, incremental and full cycles byte-identical"
