#!/usr/bin/env bash
# The KAI-parity example runs as docs/scheduling.md tells: two teams under
# one parent at its fair share reclaim from each other (8 pods of the
# borrower go, the owner's gang of 4 runs), as they would without the
# parent (examples/reclaim.json).
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

for ex in examples/reclaim-siblings.json examples/reclaim.json; do
    run simulate "$ex" --verbose
    expect_status 0
    expect_stderr_empty
    grep -Eq '^  reclaims +8$' "$TMP/out" || fail "$LAST: expected 8 reclaims: $(grep reclaims "$TMP/out")"
    grep -Eq '^    owner-3 +n[12]$' "$TMP/out" || fail "$LAST: the owner's gang does not run"
done
exit 0
