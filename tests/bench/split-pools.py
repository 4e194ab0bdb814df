#!/usr/bin/env python3
"""split-pools.py P IN OUT -- the benchmark's cluster in P node pools.

understory-bench --write FILE writes one pool; this moves node i to pool
"pool-K" (K = i * P // nodes: blocks of consecutive nodes), splits every
workload whose pods run in several pools into one per pool (NAME-pool-K,
replicas and min_member cut to its pods), deals the pending workloads out
to the pools in turn, and runs five cycles (horizon 40 s) instead of one.
What `understory simulate OUT --timings` then reports is what each pool's
snapshot costs when the cluster has P pools (docs/benchmarks.md).
"""
import json
import sys


def main():
    if len(sys.argv) != 4 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        sys.exit("usage: split-pools.py POOLS IN OUT")
    npools, src, dst = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    with open(src) as f:
        doc = json.load(f)
    nodes = doc["nodes"]
    pool_of = {}
    for i, node in enumerate(nodes):
        node["pool"] = "pool-%d" % (i * npools // len(nodes))
        pool_of[node["name"]] = node["pool"]
    workloads, dealt = [], 0
    for w in doc["workloads"]:
        pods = w.get("pods")
        if not pods:
            w["pool"] = "pool-%d" % (dealt % npools)
            dealt += 1
            workloads.append(w)
            continue
        by_pool = {}
        for pod in pods:
            by_pool.setdefault(pool_of[pod["node"]], []).append(pod)
        for pool, mine in sorted(by_pool.items()):
            part = dict(w, pool=pool, pods=mine)
            if len(by_pool) > 1:
                part["name"] = "%s-%s" % (w["name"], pool)
            if "replicas" in part and part.get("controller") != "daemonset":
                part["replicas"] = len(mine)
                if "min_member" in part:
                    part["min_member"] = min(part["min_member"], len(mine))
            workloads.append(part)
    doc["workloads"] = workloads
    doc["horizon"] = 40
    with open(dst, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
