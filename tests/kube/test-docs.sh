#!/usr/bin/env bash
# tests/kube/test-docs.sh — the walk-throughs that need a control plane
# (the documents marked `<!-- doctest: kube -->`: docs/kubernetes.md, from
# an empty cluster to the seed story; docs/operations.md, the admin
# endpoint, metrics, reload and capture of a running serve) run as
# documented: every command of their console blocks, in order, in one
# shell session per document, its output checked by tests/docs/doctest.lua
# (docs/testing.md).  The document starts its
# own control plane and stops it; a cluster it leaves behind after a
# failure dies with this test (KUBE_CLUSTER_OWNER), and the daemon it
# started in the background is stopped by the runner.
set -euo pipefail
. "$(dirname "$0")/lib.bash"
understory=${UNDERSTORY:-$root/build/release/understory}
trap 'rm -rf "$work"' EXIT
# every document that declares itself a kube walk-through
mapfile -t docs < <(cd "$root" && grep -l -- '^<!-- doctest: kube -->$' README.md docs/*.md)
((${#docs[@]} > 0)) || { echo "FAIL: no document is marked <!-- doctest: kube -->" >&2; exit 1; }
KUBE_CLUSTER_OWNER=$$ DOCTEST_KUBE=1 TMPDIR=$work \
	lua5.4 "$root/tests/docs/doctest.lua" "$root" "$understory" "${docs[@]}" | tee "$work/doctest.out"
grep -q '^ok .*console (kube session)$' "$work/doctest.out" || { echo "FAIL: no kube session ran" >&2; exit 1; }
