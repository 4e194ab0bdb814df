#!/usr/bin/env bash
# tests/kube/test-bench-smoke.sh — `make bench-kube` in small (10 nodes,
# 10 burn-in pods, 40 AI pods in 40 PodGroups over 2 queues), so that the
# benchmark cannot rot: every AI pod is bound exactly once (bench-report.py
# --check reads the API server's audit log), the burn-in is evicted from
# the room the AI pods need, and the report carries each figure.  The
# figures themselves are not asserted: they are the benchmark's.
set -euo pipefail
# A command that stops the test under `set -e` names itself and its line:
# a failure outside fail() would otherwise leave no message at all.
set -E
trap 'echo "FAIL: ${BASH_SOURCE[0]##*/}:$LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() {
	echo "FAIL: $*" >&2
	cat "$out" >&2
	exit 1
}
"$here/bench.sh" --nodes 10 --burn 10 --pods 80 --queues 2 --concurrency 8 --check >"$out" ||
	fail "the small benchmark failed"
grep -q '^AI pods created: 80, bound: 80 (bound twice: 0)$' "$out" || fail "not every AI pod was bound once"
for figure in 'binds/s, first AI pod created to last bound: [0-9]' 'create->bind: median [0-9.]* s, p99 [0-9.]* s' \
	'daemon: [0-9.]* CPU s, peak RSS [0-9.]* MiB' '^ceiling \(trivial binder, no scheduler\): 80 bound, [0-9]+ binds/s' \
	'^understory / ceiling: [0-9.]+$' '^  create 201 *[0-9]' '^  create *pods/binding *201  *[0-9]'; do
	grep -Eq -- "$figure" "$out" || fail "the report has no line matching '$figure'"
done
# 10 nodes hold 80 GPUs: the 80 AI pods needed every one, so the burn-in went
grep -Eq '^  delete *pods *200  *10$' "$out" || fail "the daemon did not evict the 10 burn-in pods"
echo "ok: bench-kube, small: $(grep '^binds/s' "$out")"
