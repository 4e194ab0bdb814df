#!/usr/bin/env bash
# understory import: usage errors exit 2 with a usage line; a file that is
# not a List exits 2 naming the file and the JSON path, with nothing on
# stdout; the captured fixture imports, and its document runs in simulate
# and diff as it is.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

run import
expect_status 2
expect_stderr_has "import: missing the FILE"
expect_stderr_has "usage: understory import FILE"

run import --nope x.json
expect_status 2
expect_stderr_has "unknown option --nope"

run import --help
expect_status 0
expect_stdout_has "--scheduler-name NAME"

run import "$TMP/missing.json"
expect_failure
expect_stdout_empty
expect_stderr_has "missing.json"

echo '{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "eight"}}}]}' >"$TMP/bad.json"
run import "$TMP/bad.json"
expect_status 2
expect_stdout_empty
expect_stderr_has "bad.json: items[0].status.allocatable[\"cpu\"] (Node \"n1\"): \"eight\" is not a cpu quantity"

# a List whose objects map, but whose scenario breaks a rule of the format
# (a pod on a node without room): refused as a whole
cat >"$TMP/full.json" <<'JSON'
{"kind": "List", "items": [
 {"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "1", "memory": "1Gi"}}},
 {"kind": "Pod", "metadata": {"name": "p", "namespace": "kube-system"},
  "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}]}
JSON
run import "$TMP/full.json"
expect_status 2
expect_stdout_empty
expect_stderr_has "the imported scenario does not load"
expect_stderr_has "not enough cpu"

# standard input, as from kubectl get ... -o json | understory import -
echo '[1]' >"$TMP/array.json"
"$UNDERSTORY" import - <"$TMP/array.json" >"$TMP/out" 2>"$TMP/err"
status=$?
LAST="understory import - (an array)"
expect_status 2
expect_stdout_empty
expect_stderr_has "standard input: (top level): must be an object (a List), not an array"
"$UNDERSTORY" import - <tests/fixtures/kubectl-seed-story.json >"$TMP/stdin.json" 2>"$TMP/err" ||
    fail "import - of the fixture: $(cat "$TMP/err")"

run import tests/fixtures/kubectl-seed-story.json
expect_status 0
# the same document from a file and from standard input, but for its name
diff <(grep -v '"name":.*"\(standard input\|kubectl-seed-story.json\)"' "$TMP/out") \
     <(grep -v '"name":.*"\(standard input\|kubectl-seed-story.json\)"' "$TMP/stdin.json") >/dev/null ||
    fail "import - and import FILE differ"
expect_stderr_empty
cp "$TMP/out" "$TMP/imported.json"
run simulate "$TMP/imported.json" --check-invariants --verbose
expect_status 0
expect_stdout_has "pipeline  team-a/train-1-0"
run diff --from policies --to examples/policies/spread "$TMP/imported.json"
expect_status 0
expect_stdout_has "understory diff: kubectl-seed-story.json"
expect_stdout_has "no decision differs in 4 cycles"
exit 0
