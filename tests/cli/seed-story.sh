#!/usr/bin/env bash
# The seed story runs to the end in both output forms, and the same input
# gives the same output, byte for byte.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

seed=examples/seed-story.json
[ -f "$seed" ] || fail "missing $seed"

run simulate "$seed" --json
expect_status 0
expect_stderr_empty
head -c 1 "$TMP/out" | grep -q '{' || fail "$LAST: output does not start with '{'"
for key in '"scenario"' '"cycles"' '"final"' '"summary"' '"background_evictions"'; do
    expect_stdout_has "$key"
done
cp "$TMP/out" "$TMP/first.json"
run simulate "$seed" --json
cmp -s "$TMP/out" "$TMP/first.json" || fail "$LAST: two runs differ"

run simulate "$seed"
expect_status 0
expect_stderr_empty
expect_stdout_has "understory simulation:"
expect_stdout_has "summary"
cp "$TMP/out" "$TMP/first.txt"
run simulate "$seed"
cmp -s "$TMP/out" "$TMP/first.txt" || fail "$LAST: two runs differ"

# Plain ties is accepted and runs.
run simulate "$seed" --json --plain-ties --long-grace 60
expect_status 0

# --timings adds wall-clock figures on stderr only: stdout stays the same.
run simulate "$seed" --json --timings
expect_status 0
cmp -s "$TMP/out" "$TMP/first.json" || fail "$LAST: --timings changed stdout"
grep -q '^timings: load .* cycles .* output' "$TMP/err" || fail "$LAST: no timings on stderr: $(cat "$TMP/err")"
grep -q 'phases: snapshot' "$TMP/err" || fail "$LAST: no phase timings on stderr"
