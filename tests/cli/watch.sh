#!/usr/bin/env bash
# understory simulate FILE --watch: a full account first; after a save of a
# policy file, a second run that reports what changed; a scenario that does
# not load is reported and watching goes on.  --watch-max-runs ends it.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

mkdir -p "$TMP/pol"
cp policies/*.lua "$TMP/pol/"
cp examples/seed-story.json "$TMP/scenario.json"

# Wait (up to 15 s) until the file has n lines matching the pattern.
wait_for() { # file pattern n
    local i
    for i in $(seq 150); do
        [ "$(grep -c -- "$2" "$1" 2>/dev/null)" -ge "$3" ] && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# Run 1, then a save of placement.lua (write elsewhere, rename over it, as
# editors do) turning it into spread placement, then a broken scenario.
timeout 20 "$UNDERSTORY" simulate "$TMP/scenario.json" --policies "$TMP/pol" --watch \
    --watch-max-runs 3 >"$TMP/out" 2>"$TMP/err" &
pid=$!
wait_for "$TMP/out" "^watching " 1 || fail "no first report: $(cat "$TMP/out" "$TMP/err")"
grep -q "^== run 1 ==" "$TMP/out" || fail "run 1 has no header: $(head "$TMP/out")"
grep -q "^understory simulation: seed story" "$TMP/out" || fail "run 1 is not the full account"

cp examples/policies/spread/placement.lua "$TMP/placement.new"
mv "$TMP/placement.new" "$TMP/pol/placement.lua"
wait_for "$TMP/out" "^watching " 2 || fail "no second report: $(cat "$TMP/out" "$TMP/err")"

printf '{"name": "broken", ' >"$TMP/scenario.json"
wait "$pid"
status=$?
[ "$status" -eq 0 ] || fail "watch exited with $status: $(cat "$TMP/err")"
if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$TMP/err"; then
    cat "$TMP/err" >&2
    fail "sanitizer report"
fi

# The second report: what changed since run 1, and why it ran.
sed -n '/^== run 2/,/^== run 3/p' "$TMP/out" >"$TMP/run2"
grep -q "^== run 2 (placement.lua changed) ==" "$TMP/run2" || fail "run 2 header: $(cat "$TMP/run2")"
grep -q "^changes since run 1:" "$TMP/run2" || fail "run 2 is not a diff: $(cat "$TMP/run2")"
grep -q "^cycle 7  t=60s" "$TMP/run2" || fail "run 2 lacks cycle 7: $(cat "$TMP/run2")"
grep -qF "  - pipeline  eval-b-0     -> n1" "$TMP/run2" || fail "run 2 lacks the old decision"
grep -qF "  + pipeline  eval-b-0     -> n2" "$TMP/run2" || fail "run 2 lacks the new decision"
grep -qE "^summary +run 1 +run 2 +change$" "$TMP/run2" || fail "run 2 lacks the summary"
# one report per save, not one per file event
[ "$(grep -c '^== run ' "$TMP/out")" -eq 3 ] || fail "expected 3 runs: $(grep '^== run' "$TMP/out")"

# The third: the scenario does not load, which is said, not fatal.
sed -n '/^== run 3/,$p' "$TMP/out" >"$TMP/run3"
grep -q "^== run 3 (scenario.json changed) ==" "$TMP/run3" || fail "run 3 header: $(cat "$TMP/run3")"
grep -qF "run 3: $TMP/scenario.json:" "$TMP/run3" || fail "run 3 does not say why: $(cat "$TMP/run3")"

# Only with --watch.
run simulate examples/seed-story.json --watch-max-runs 2
expect_status 2
expect_stderr_has "--watch-max-runs only goes with --watch"
run simulate examples/seed-story.json --watch --watch-max-runs 0
expect_status 2
expect_stderr_has "--watch-max-runs"

# --watch-max-runs 1: one run, the account, and done.
run simulate examples/seed-story.json --watch --watch-max-runs 1
expect_status 0
expect_stdout_has "understory simulation: seed story"
