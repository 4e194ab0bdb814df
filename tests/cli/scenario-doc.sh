#!/usr/bin/env bash
# docs/scenario.md documents the formats the code really reads and writes:
# every field and every enumerated value the loader accepts (read from the
# tables in engine/scenario.c), and every key of the output documents of the
# examples; README, --help and load errors point to it, and no document
# points outside the repository.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

DOC=docs/scenario.md
[ -f "$DOC" ] || fail "$DOC is missing"

# The loader's tables: static const char *const xxx_fields[] / xxx_names[]
# / xxx_states[] = {"a", "b", ..., NULL}; (possibly over several lines) in
# scenario.c and taints.c (taints and tolerations), and the priority
# classes.
words=$(awk '/(fields|_names|_states)\[\] *= *\{/,/\};/' engine/scenario.c engine/taints.c |
    grep -o '"[A-Za-z_-]*"' | tr -d '"' | sort -u)
classes=$(awk '/^} classes\[\] *= *\{/,/\};/' engine/scenario.c | grep -o '"[a-z-]*"' | tr -d '"')
[ -n "$words" ] || fail "no field tables found in engine/scenario.c"
[ -n "$classes" ] || fail "no priority classes found in engine/scenario.c"
for w in $words $classes; do
    grep -qF -- "\`$w\`" "$DOC" || fail "$DOC does not document \`$w\` (engine/scenario.c accepts it)"
done

# Every event reason the engine emits: the reason of us_log_event(log,
# "Warning", "Reason", ...), one chosen first (reason = "X"), and every
# CamelCase literal of two words or more (PolicyFailed, passed along; the
# taint effects are such words too, and documented as well).
reasons=$( (grep -ohE '"(Normal|Warning)", *"[A-Za-z]+"' engine/*.c | grep -oE '"[A-Za-z]+"$'
            grep -ohE 'reason = "[A-Z][A-Za-z]+"' engine/*.c | grep -oE '"[A-Za-z]+"'
            grep -ohE '"[A-Z][a-z]+([A-Z][a-z]+)+"' engine/*.c) | tr -d '"' | sort -u)
[ -n "$reasons" ] || fail "no event reasons found in engine/*.c"
for r in $reasons; do
    grep -qF -- "\`$r\`" "$DOC" || fail "$DOC does not document the event reason \`$r\`"
done

# Every key of the output documents (object keys are printed as "key":).
cat >"$TMP/more.json" <<'JSON'
{"name": "more", "cycle_interval": 10, "horizon": 40,
 "nodes": [{"name": "n1", "gpu": 8, "cpu": "64", "labels": {"zone": "a"}}],
 "queues": [{"name": "q"}],
 "workloads": [
   {"name": "sel", "queue": "q", "node_selector": {"zone": "b"}, "requests": {"gpu": 1}},
   {"name": "odd", "queue": "q", "labels": {"kai.scheduler/background": "yes"}},
   {"name": "short", "queue": "q", "requests": {"gpu": 1}, "duration": 10}],
 "timeline": [{"at": 10, "action": "cordon", "node": "n1"},
              {"at": 30, "action": "delete", "workload": "sel"}]}
JSON
keys=""
for f in examples/*.json "$TMP/more.json"; do
    run simulate "$f" --json
    expect_status 0
    keys="$keys $(grep -o '"[A-Za-z_-]*":' "$TMP/out" | tr -d '":')"
done
for k in $(printf '%s\n' $keys | sort -u); do
    grep -qF -- "\`$k\`" "$DOC" || fail "$DOC does not document the output key \`$k\`"
done

# Pointers to it, and none outside the repository.
grep -qF "(docs/scenario.md)" README.md || fail "README.md does not link docs/scenario.md"
if grep -n '\.\./shared\|DESIGN\.md' README.md docs/*.md; then
    fail "a document points outside the repository"
fi
for help in "--help" "simulate --help"; do
    # shellcheck disable=SC2086
    run $help
    expect_status 0
    expect_stdout_has "docs/scenario.md"
done
printf '{"nodes": [{"name": "n1", "gpus": 8}]}' >"$TMP/typo.json"
run simulate "$TMP/typo.json"
expect_status 2
expect_stderr_has 'nodes[0].gpus: unknown field (did you mean "gpu"?)'
expect_stderr_has "the scenario format: docs/scenario.md"
