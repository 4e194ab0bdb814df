#!/usr/bin/env bash
# The benchmark at 1,000 nodes, as a smoke check: it generates its cluster,
# runs the cycles with the Lua policies and with the built-in C ones, and
# both place the same pods.  No timing is asserted (machines are noisy);
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
grep -q "1000 nodes, .* pods, 1000 pending AI pods" "$TMP/out" || fail "no 1000-node run: $(cat "$TMP/out")"
# the Lua policies and the C ones place the same number of pods, each cycle
lua=$(grep -A1 -E '^  lua #' "$TMP/out" | grep -o 'placed *[0-9]*' | tr -d ' ')
c=$(grep -A1 -E '^  c #' "$TMP/out" | grep -o 'placed *[0-9]*' | tr -d ' ')
[ -n "$lua" ] || fail "no placements reported: $(cat "$TMP/out")"
[ "$lua" = "$c" ] || fail "Lua placed [$lua], C placed [$c]"
echo "$lua" | head -1 | grep -q 'placed800' || fail "expected 800 pods placed in the first cycle, got: $lua"
grep -q "lua / c cycle time" "$TMP/out" || fail "no ratio printed"
# the paths that must stay linear ran and checked their results
for what in "scale-down, 20000 replicas to 1" "scenario load, a queue chain 2000 deep" \
    "a chain of 80 queues, one upsert at a time"; do
    grep -q "  $what  *[0-9.]* s\$" "$TMP/out" || fail "no \"$what\" line: $(cat "$TMP/out")"
done
