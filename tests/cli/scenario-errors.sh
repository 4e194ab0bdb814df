#!/usr/bin/env bash
# Scenarios that cannot be loaded: a non-zero exit (2), a message naming the
# file and, for malformed documents, the JSON path at fault; no partial run,
# so nothing on stdout.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

# A missing file.
run simulate "$TMP/no-such-dir/nope.json"
expect_failure
expect_stdout_empty
expect_stderr_has "nope.json"

# Not JSON at all.
printf '{"name": "broken", "nodes": [' >"$TMP/truncated.json"
run simulate "$TMP/truncated.json"
expect_status 2
expect_stdout_empty
expect_stderr_has "truncated.json"

# Well-formed JSON naming a queue that does not exist (workloads[3]).
cat >"$TMP/bad-queue.json" <<'JSON'
{
  "name": "bad queue",
  "nodes": [{"name": "n1", "cpu": "8", "memory": "32Gi", "gpu": 2}],
  "queues": [{"name": "team-a", "resources": {"gpu": {"quota": 2}}}],
  "workloads": [
    {"name": "w0", "queue": "team-a", "requests": {"gpu": 1}},
    {"name": "w1", "queue": "team-a", "requests": {"gpu": 1}},
    {"name": "w2", "queue": "team-a", "requests": {"gpu": 1}},
    {"name": "w3", "queue": "team-z", "requests": {"gpu": 1}}
  ]
}
JSON
run simulate "$TMP/bad-queue.json" --json
expect_status 2
expect_stdout_empty
expect_stderr_has "bad-queue.json"
expect_stderr_has "workloads[3].queue"
expect_stderr_has "team-z"

# A field of the wrong type.
cat >"$TMP/bad-gpu.json" <<'JSON'
{"name": "bad gpu", "nodes": [{"name": "n1", "gpu": "lots"}], "queues": [], "workloads": []}
JSON
run simulate "$TMP/bad-gpu.json"
expect_status 2
expect_stdout_empty
expect_stderr_has "nodes[0].gpu"

# A pre-existing pod of a workload asking for more than one GPU but not
# whole ones (background work may ask so, and is never scheduled): no node
# can hold it, and the message says why (found by fuzzing).
run simulate tests/fuzz/corpus/scenario/regress-fractional-multi-gpu-pod.json
expect_status 2
expect_stdout_empty
expect_stderr_has 'workloads[0].pods[0].node: no node can hold a pod of "w": it asks for more than one GPU but not whole ones'
