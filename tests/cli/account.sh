#!/usr/bin/env bash
# The readable account: summary first, a legend, decisions rolled up per
# workload and node (each rolled-up line counts the decisions it stands
# for), --verbose for every pod, names in natural order, and a progress
# line on stderr only when stderr is a terminal.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

seed=examples/seed-story.json

run simulate "$seed"
expect_status 0
expect_stderr_empty
cp "$TMP/out" "$TMP/short"
expect_stdout_has "evicted 13 pods of gpu-burn from n3, n4 for train-1  (backgroundpods)"
expect_stdout_has "pipelined 2 pods of train-1 onto n3, n4, waiting for 13 pods  (allocate)"
expect_stdout_has "bound 2 pods of train-1 on n3, n4  (after pipeline)"
expect_stdout_has "legend"
expect_stdout_has "(backgroundpods)  background work placed in room AI does not need"
# summary first: before the first cycle
s=$(grep -n '^summary$' "$TMP/short" | cut -d: -f1)
c=$(grep -n '^cycle 1 ' "$TMP/short" | cut -d: -f1)
[ -n "$s" ] && [ -n "$c" ] && [ "$s" -lt "$c" ] || fail "summary does not come before cycle 1"
! grep -qE '^  bind +gpu-burn-0 ' "$TMP/short" || fail "the short account lists single pods"

# every decision of the JSON document is counted by exactly one rolled-up line
run simulate "$seed" --json
decisions=$(grep -cE '"op":\s+"(bind|pipeline|evict)"' "$TMP/out")
rolled=$(awk '/^cycle/ { c = 1 } c && /^  (bound|pipelined|evicted) / { n += ($2 ~ /^[0-9]+$/ && $3 == "pods") ? $2 : 1 } END { print n }' "$TMP/short")
[ "$decisions" -gt 0 ] && [ "$decisions" -eq "$rolled" ] ||
    fail "rolled-up lines count $rolled decisions, the document has $decisions"

run simulate "$seed" --verbose
expect_status 0
expect_stdout_has "  evict     gpu-burn-"
verbose_decisions=$(grep -cE '^  (bind|pipeline|evict) +[^ ]+ +(->|from) ' "$TMP/out")
[ "$verbose_decisions" -eq "$decisions" ] || fail "--verbose lists $verbose_decisions decisions of $decisions"

# natural order: many nodes and pods
cat >"$TMP/many.json" <<'JSON'
{"name": "many", "cycle_interval": 10, "horizon": 0,
 "nodes": [
  {"name": "n10", "gpu": 1}, {"name": "n2", "gpu": 1}, {"name": "n1", "gpu": 1}, {"name": "n11", "gpu": 1},
  {"name": "n3", "gpu": 1}, {"name": "n4", "gpu": 1}, {"name": "n5", "gpu": 1}, {"name": "n6", "gpu": 1},
  {"name": "n7", "gpu": 1}, {"name": "n8", "gpu": 1}, {"name": "n9", "gpu": 1}, {"name": "n12", "gpu": 1}],
 "queues": [{"name": "bg", "resources": {"gpu": {"quota": 0, "over_quota_weight": 0},
            "cpu": {"quota": 0, "over_quota_weight": 0}, "memory": {"quota": 0, "over_quota_weight": 0}}}],
 "workloads": [{"name": "burn", "queue": "bg", "labels": {"kai.scheduler/background": "true"},
                "controller": "deployment", "replicas": 12, "requests": {"gpu": 1}, "termination_grace": 5}]}
JSON
run simulate "$TMP/many.json"
expect_status 0
expect_stdout_has "bound 12 pods of burn on n1, n2, n3, n4, n5, n6 and 6 more  (backgroundpods)"
expect_stdout_has "burn   12 pods  on n1, n2, n3, n4, n5, n6 and 6 more  (background)"
run simulate "$TMP/many.json" --verbose
expect_status 0
sed -n '/^  running (12)$/,$p' "$TMP/out" | sed 1d | awk '{print $1}' >"$TMP/pods"
[ "$(wc -l <"$TMP/pods")" -eq 12 ] || fail "--verbose final: 12 running pods expected: $(cat "$TMP/out")"
sort -V "$TMP/pods" | cmp -s - "$TMP/pods" || fail "final pods not in natural order: $(cat "$TMP/pods")"
[ "$(sed -n 3p "$TMP/pods")" = burn-2 ] || fail "burn-2 is not third: $(cat "$TMP/pods")"

# the progress line: on a terminal only, erased at the end
if command -v script >/dev/null; then
    UNDERSTORY_PROGRESS_AFTER=0 script -qec "$UNDERSTORY simulate $seed >/dev/null" "$TMP/tty" >/dev/null 2>&1 ||
        fail "simulate under script failed"
    grep -q "$seed: cycle 1 of at most 41, t=0s" "$TMP/tty" || fail "no progress line on a terminal: $(cat "$TMP/tty")"
    grep -q $'\r\033\\[K' "$TMP/tty" || fail "the progress line is not erased"
fi
exit 0
