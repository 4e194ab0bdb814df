#!/usr/bin/env bash
# --check-invariants: every example runs with the engine's invariants
# checked after every cycle, and the check changes nothing in the output.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

for f in examples/*.json; do
    run simulate "$f" --json --policies policies
    expect_status 0
    cp "$TMP/out" "$TMP/plain.json"
    run simulate "$f" --json --policies policies --check-invariants
    expect_status 0
    expect_stderr_empty
    cmp -s "$TMP/out" "$TMP/plain.json" || fail "$LAST: output differs from the run without the check"
done

# Also accepted by the other commands that run cycles.
run check policies --check-invariants
expect_status 0
