#!/usr/bin/python3
# tests/kube/state_normal.py FILE — a scenario document in the normal form
# two captures of one cluster are compared in (docs/operations.md,
# "Replaying production"): the document's name and its time fields
# (created_at, release_at: relative to the moment of capture) dropped,
# nodes, queues, workloads and each workload's pods sorted by name, keys
# sorted; printed one key a line, for diff.
import json
import sys


def by_name(items):
    return sorted(items, key=lambda o: o.get("name", ""))


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    doc.pop("name", None)
    for key in ("nodes", "queues", "workloads"):
        doc[key] = by_name(doc.get(key, []))
    for q in doc["queues"]:
        q.pop("created_at", None)
    for w in doc["workloads"]:
        w.pop("created_at", None)
        w["pods"] = by_name(w.get("pods", []))
        for p in w["pods"]:
            p.pop("release_at", None)
    json.dump(doc, sys.stdout, indent=1, sort_keys=True)
    print()


main()
