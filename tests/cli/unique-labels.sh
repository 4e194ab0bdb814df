#!/usr/bin/env bash
# Every example scenario decides the same, byte for byte, when every node
# also carries a unique kubernetes.io/hostname and an instance id, as real
# nodes do: labels nothing selects on and no policy declares tell no nodes
# apart (node classes, the tie-break and policy views ignore them).  Nodes
# added by a timeline get them too.
# shellcheck source=tests/cli/lib.bash
. "$(dirname "$0")/lib.bash"

command -v python3 >/dev/null || fail "python3 is needed to rewrite the scenarios"
# the rewritten scenario sits beside the original, so that the directories
# a timeline reloads from resolve the same; it goes whatever happens
beside="examples/.labelled-$$.json"
trap 'rm -rf "$TMP" "$beside"' EXIT
n=0
for f in examples/*.json; do
    python3 - "$f" "$TMP/labelled.json" <<'PY' || fail "cannot rewrite $f"
import json, sys
doc = json.load(open(sys.argv[1]))
def tag(node):
    labels = node.setdefault("labels", {})
    labels["kubernetes.io/hostname"] = node["name"]
    labels["instance-id"] = "i-%08x" % (hash(node["name"]) & 0xffffffff)
for node in doc.get("nodes", []):
    tag(node)
for entry in doc.get("timeline", []):
    if isinstance(entry.get("node"), dict):
        tag(entry["node"])
json.dump(doc, open(sys.argv[2], "w"), indent=1)
PY
    cp "$TMP/labelled.json" "$beside"
    run simulate "$f" --json
    expect_status 0
    cp "$TMP/out" "$TMP/plain.out"
    run simulate "$beside" --json
    rm -f "$beside"
    expect_status 0
    cmp -s "$TMP/plain.out" "$TMP/out" ||
        fail "$f: the output changes with a unique hostname label per node: $(diff "$TMP/plain.out" "$TMP/out" | head -20)"
    n=$((n + 1))
done
[ "$n" -ge 10 ] || fail "only $n example scenarios checked"
