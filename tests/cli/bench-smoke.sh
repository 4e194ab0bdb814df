#!/usr/bin/env bash
# The benchmark at 1,000 nodes, as a smoke check: it generates its cluster
# in both label shapes, runs the cycles and the one after a 1% change with
# the Lua policies and with the built-in C ones; both place the same pods,
# and so do both shapes (nothing selects on a hostname); the same cluster
# fed through the C API, with rounds of churn.  No timing is asserted (machines are noisy);
# the figures themselves are for `make bench` and docs/benchmarks.md.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

bench=$(dirname "$UNDERSTORY")/bench/understory-bench
[ -x "$bench" ] || fail "not built: $bench"
"$bench" --nodes 1000 --cycles 2 --scale 20000 >"$TMP/out" 2>"$TMP/err" || fail "bench exit status $?: $(cat "$TMP/err")"
if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$TMP/err"; then
    cat "$TMP/err" >&2
    fail "bench: sanitizer report"
fi
grep -q "1000 nodes, .* pods, 1000 pending AI pods, node labels plain" "$TMP/out" || fail "no 1000-node run: $(cat "$TMP/out")"
grep -q "1000 nodes, .* pods, 1000 pending AI pods, node labels real" "$TMP/out" || fail "no real-label run: $(cat "$TMP/out")"
# the Lua policies and the C ones place the same number of pods, each cycle
lua=$(grep -A1 -E '^  lua #' "$TMP/out" | grep -o 'placed *[0-9]*' | tr -d ' ')
c=$(grep -A1 -E '^  c #' "$TMP/out" | grep -o 'placed *[0-9]*' | tr -d ' ')
[ -n "$lua" ] || fail "no placements reported: $(cat "$TMP/out")"
[ "$lua" = "$c" ] || fail "Lua placed [$lua], C placed [$c]"
echo "$lua" | head -1 | grep -q 'placed800' || fail "expected 800 pods placed in the first cycle, got: $lua"
grep -q "lua / c cycle time" "$TMP/out" || fail "no ratio printed"
# the cycle after the 1% change, in both shapes and both policy kinds
inc=$(grep -A1 -E '^  (lua|c) \+1%' "$TMP/out" | grep -o 'placed *[0-9]*' | tr -d ' ' | sort -u)
[ "$inc" = "placed60" ] || fail "expected 60 pods placed after the 1% change everywhere, got: $inc"
grep -q "the cycle after 120 pods changed" "$TMP/out" || fail "no 1% change reported: $(cat "$TMP/out")"
# the quiet cycle (after the change's next, nothing changed since from
# outside; the fastest of five): in both shapes and both policy kinds,
# incremental and full, it places nothing; the incremental one reads only
# the pods that changed by themselves since the cycle before (placed by
# it, or their termination grace ended: a few dozen at most, which of the
# five is fastest decides), the full one every pod (10,055)
quiet=$(grep -A1 -E '^  (lua|c) quiet +[0-9]' "$TMP/out" | grep -oE 'placed *[0-9]+ pods .*pods read [0-9]+' | sed -E 's/\([^)]*\)//; s/ +/ /g')
[ "$(echo "$quiet" | grep -c .)" = 4 ] || fail "expected 4 quiet incremental cycles, got: $quiet"
echo "$quiet" | while read -r line; do
    read_n=${line##*pods read }
    case "$line" in
    "placed 0 pods | node classes kept 1000 of 1000, scores kept 0, views kept 1000, pods read "*) ;;
    *) fail "a quiet incremental cycle placed something or kept less than every node's class: $line" ;;
    esac
    [ "$read_n" -le 100 ] || fail "a quiet incremental cycle read $read_n pods (more than 1% of 10,055): $line"
done || exit 1
# and it asks whether background pods still fit only on the nodes whose
# views changed since: those of the pods it read (a pod moved changes two),
# where the full one asks every node (each runs DaemonSet pods)
# and copies from the kept counts the views of those nodes only
asked=$(grep -A1 -E '^  (lua|c) quiet +[0-9]' "$TMP/out" | grep -oE 'pods read [0-9]+, fits asked [0-9]+, views copied [0-9]+$' | awk '{print $3 $6 $9}')
[ "$(echo "$asked" | grep -c .)" = 4 ] || fail "expected 'fits asked N, views copied N' on 4 quiet incremental cycles, got: $asked"
for triple in $asked; do
    IFS=, read -r read_n n copied <<<"$triple"
    [ "$n" -le 20 ] && [ "$n" -le $((2 * read_n)) ] ||
        fail "a quiet incremental cycle asked $n nodes whether their background pods fit, having read $read_n pods (want at most 2 per pod read and 2% of 1,000)"
    [ "$copied" -le 20 ] && [ "$copied" -le $((2 * read_n)) ] ||
        fail "a quiet incremental cycle copied the views of $copied nodes, having read $read_n pods (want at most 2 per pod read and 2% of 1,000)"
done
asked_full=$(grep -A1 -E '^  (lua|c) quiet full' "$TMP/out" | grep -oE 'fits asked [0-9]+, views copied [0-9]+$' | sort | uniq -c | sed -E 's/^ +//')
[ "$asked_full" = "4 fits asked 1000, views copied 0" ] ||
    fail "expected 4 quiet full cycles asking every node and keeping no view, got: $asked_full"
quiet_full=$(grep -A1 -E '^  (lua|c) quiet full' "$TMP/out" | grep -oE 'placed *[0-9]+ pods .*pods read [0-9]+' | sed -E 's/\([^)]*\)//; s/ +/ /g' | sort | uniq -c | sed -E 's/^ +//')
[ "$quiet_full" = "4 placed 0 pods | node classes kept 0 of 1000, scores kept 0, views kept 0, pods read 10055" ] ||
    fail "expected 4 quiet full cycles placing nothing and reading every pod, got: $quiet_full"
# both shapes decide the same: the plain run's placements are the real one's
plain=$(sed -n '/node labels plain/,/node labels real/p' "$TMP/out" | grep -A1 -E '^  lua #' | grep -o 'placed *[0-9]*')
real=$(sed -n '/node labels real/,$p' "$TMP/out" | grep -A1 -E '^  lua #' | grep -o 'placed *[0-9]*')
[ -n "$plain" ] && [ "$plain" = "$real" ] || fail "plain labels placed [$plain], real labels [$real]"
# the command line's path ran in both shapes, each step reported: the same
# document loaded, simulated (9,975 pods at the end, releasing ones
# included) and written
io=$(grep -cE '^  simulate --json \(1 MB document, 9975 pods\): load [0-9.]+ s \(cpu [0-9.]+ s\), one cycle [0-9.]+ s, write [0-9.]+ s \(cpu [0-9.]+ s\) \| peak memory [0-9]+ MiB \([0-9]+ MiB after the load\)$' "$TMP/out")
[ "$io" = 2 ] || fail "expected the simulate --json line in both shapes, got $io: $(cat "$TMP/out")"
# the same cluster through the C API, in both shapes: three rounds of
# churn each, Lua and C placing the same in the last round's cycle, and
# that cycle following what changed (tidying dropped the deployments the
# first round removed; the ledger followed, counting no pod afresh)
rounds=$(grep -cE '^  api (lua|c) round [123]: 120 pods churned' "$TMP/out")
[ "$rounds" = 12 ] || fail "expected 3 API rounds for Lua and C in both shapes, got $rounds: $(cat "$TMP/out")"
api=$(grep -A1 -E '^  api (lua|c) #3' "$TMP/out" | grep -o 'placed *[0-9]*' | tr -d ' ' | sort -u)
[ "$api" = "placed80" ] || fail "expected 80 pods placed in every API round 3, got: $api"
counted=$(grep -c '^            pods counted again 0$' "$TMP/out")
[ "$counted" = 4 ] || fail "expected no pod counted again in 4 API round-3 cycles, got $counted: $(cat "$TMP/out")"
# the paths that must stay linear ran and checked their results
for what in "scale-down, 20000 replicas to 1" "scenario load, a queue chain 2000 deep" \
    "a chain of 80 queues, one upsert at a time"; do
    grep -q "  $what  *[0-9.]* s\$" "$TMP/out" || fail "no \"$what\" line: $(cat "$TMP/out")"
done
for what in "80 nodes upserted one at a time, 3 DaemonSets" "80 nodes' 2 pods each reported one by one" \
    "200 workloads upserted one by one, each read" \
    "200 workloads completing in one simulated step"; do
    grep -qE "  $what  *[0-9.]+ s, twice as many  *[0-9.]+ s \([0-9.]+x\)\$" "$TMP/out" ||
        fail "no \"$what\" line: $(cat "$TMP/out")"
done
# loading alone (--load), as docs/benchmarks.md compares two builds: the
# written document loads, each of the runs, and a file that is not a
# scenario fails with the loader's message
"$bench" --nodes 1000 --shape real --write "$TMP/small.json" || fail "bench --write exit status $?"
"$bench" --load "$TMP/small.json" --repeat 2 >"$TMP/load" 2>"$TMP/err" || fail "bench --load exit status $?: $(cat "$TMP/err")"
grep -qE "^load $TMP/small.json: best of 2 [0-9.]+ s cpu \([0-9.]+ s wall\), mean [0-9.]+ s cpu\$" "$TMP/load" ||
    fail "no load line: $(cat "$TMP/load")"
echo '{"nodes": 3}' >"$TMP/bad.json"
if "$bench" --load "$TMP/bad.json" >"$TMP/load" 2>"$TMP/err"; then fail "a bad document loaded"; fi
grep -q "bad.json: nodes: must be an array" "$TMP/err" || fail "no loader message: $(cat "$TMP/err")"
