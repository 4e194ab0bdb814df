#!/usr/bin/env bash
# The harvest figures in the readable summary and in --csv DIR, on
# examples/fragmented.json, whose figures tests/spec/harvest_spec.lua works
# out by hand; --csv errors are usage errors or name the file.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

sc=examples/fragmented.json

run simulate "$sc"
expect_status 0
expect_stderr_empty
grep -qE '^  default +640 +160 +360 +120 +0\.75$' "$TMP/out" || fail "$LAST: no GPU-use row: $(cat "$TMP/out")"
grep -qE '^  default +6 +4 +1 +10s +10s +10s$' "$TMP/out" || fail "$LAST: no disturbance row: $(cat "$TMP/out")"

run simulate "$sc" --csv "$TMP/csv"
expect_status 0
cmp -s "$TMP/out" <("$UNDERSTORY" simulate "$sc") || fail "$LAST: --csv changed stdout"
for f in pools queues nodes summary; do [ -s "$TMP/csv/$f.csv" ] || fail "$LAST: no $f.csv"; done
[ "$(sed -n 3p "$TMP/csv/pools.csv")" = '2,10,"default",16,0,12,4,1,6,6,4' ] ||
    fail "$LAST: pools.csv cycle 2: $(cat "$TMP/csv/pools.csv")"
[ "$(wc -l <"$TMP/csv/pools.csv")" -eq 5 ] || fail "$LAST: pools.csv: a header and 4 cycles expected"
[ "$(sed -n 2p "$TMP/csv/summary.csv")" = '"default",640,160,360,120,0.75,6,4,1,10,10,10' ] ||
    fail "$LAST: summary.csv: $(cat "$TMP/csv/summary.csv")"
grep -qx '3,20,"ml",8,0,0,16,0,0,16,0,0' "$TMP/csv/queues.csv" || fail "$LAST: queues.csv: $(cat "$TMP/csv/queues.csv")"
grep -qx '3,20,"n1","default",8,8,0,0' "$TMP/csv/nodes.csv" || fail "$LAST: nodes.csv: $(cat "$TMP/csv/nodes.csv")"
grep -qx '3,20,"n2","default",8,0,6,2' "$TMP/csv/nodes.csv" || fail "$LAST: nodes.csv: $(cat "$TMP/csv/nodes.csv")"

# the same figures in the JSON summary
run simulate "$sc" --json
expect_status 0
grep -qP '"harvest_ratio":\s+0\.75,' "$TMP/out" || fail "$LAST: no harvest ratio 0.75"
grep -qP '"background_evictions_needed":\s+4,' "$TMP/out" || fail "$LAST: no bound of 4"

# a directory that cannot be made: the error names it, exit 1
touch "$TMP/file"
run simulate "$sc" --csv "$TMP/file/sub"
expect_status 1
expect_stderr_has "$TMP/file/sub"
run simulate "$sc" --csv
expect_status 2
run simulate "$sc" --csv "$TMP/x" --watch
expect_status 2
expect_stderr_has "--csv does not go with --watch"
exit 0
