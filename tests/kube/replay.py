#!/usr/bin/python3
# tests/kube/replay.py — a scenario (docs/scenario.md) as Kubernetes
# objects, and the states test-replay.sh compares, for the replay test.
#
#   replay.py times FILE        the submit times of the scenario's
#       workloads, one a line, ascending (the stages to apply)
#   replay.py objects FILE T    a v1 List (JSON) of the objects that exist
#       from time T on: at T=0 the KWOK nodes, priority classes, the
#       namespace and the KAI Queues too; then the PodGroup and controller
#       of every workload whose submit_at is T
#   replay.py pods FILE T       how many pods the objects of T make (their
#       controllers' and the bound ones; a daemonset's: one a node)
#   replay.py sim-state SIM.json FILE   the state the simulator ends in
#   replay.py kube-state PODS.json EVENTS.json FILE   the state a cluster
#       is in (kubectl get pods -A -o json; events.k8s.io events -o json)
#
# A test tool, not a product command: the inverse of `understory import`
# cannot be exact, since a cluster holds controllers (ReplicaSets, DaemonSets)
# where import reads the pods they made, with names the API server picks.
#
# The mapping: a node is a KWOK node (annotation kwok.x-k8s.io/node: fake)
# with the scenario's allocatable, labels, taints, cordon and the pool label
# kai.scheduler/node-pool (pool "default": no label).  A queue is a KAI
# Queue in KAI's units.  Each workload has a PodGroup (its name, minMember,
# queue, priority class, preemptibility) and a controller whose pod template
# names the PodGroup: a DaemonSet for controller daemonset, else a
# ReplicaSet, created after the scenario's running pods (bound), which it
# adopts.  A ReplicaSet for none and job too: the simulator keeps a
# workload's pods until it is deleted and sends an evicted pod back to
# pending whatever its controller, which is what a ReplicaSet does (a
# Job counts an evicted pod as failed, and a bare pod evicted is gone).
# External workloads are bound pods of the default scheduler.  Priorities
# are PriorityClasses (a number N: class priority-N).
#
# A feature with no Kubernetes form here is refused, naming it, exit 2:
# a timeline, a duration, created_at, a queue's per-pool resources,
# pre-existing pods that are not running, a daemonset with pre-existing pods
# or in a scenario of several pools.  cycle_interval and horizon are the
# simulator's clock, not the cluster's: they are read by nobody here.
#
# A state (sim-state, kube-state) is JSON: "nodes", per class of equivalent
# nodes (same pool, labels, taints, cordon and cpu, memory and gpu: any of
# them could hold any pod another holds) the sorted list of what each of
# its nodes runs (a sorted list of workload names, one per bound pod);
# "pending", per workload, its pods not bound; "evictions", per
# "workload action", the pods evicted.  Two runs agree when their states
# are equal: the same pods bound to equivalent nodes, the same evictions by
# action.  Workload names drop the namespace "default/".
import json
import sys
from decimal import Decimal, ROUND_CEILING

NS = "default"
POOL_LABEL = "kai.scheduler/node-pool"
CLASSES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
SUFFIX = {"m": Decimal("0.001"), "": Decimal(1), "k": Decimal(10) ** 3, "M": Decimal(10) ** 6,
          "G": Decimal(10) ** 9, "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
          "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
          "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60}


class Refused(Exception):
    pass


def quantity(v, where):
    """A scenario quantity as a Decimal of units (cores, bytes)."""
    if isinstance(v, (int, float)):
        return Decimal(repr(v))
    s = str(v)
    for suf in sorted(SUFFIX, key=len, reverse=True):
        if suf and s.endswith(suf):
            return Decimal(s[: -len(suf)]) * SUFFIX[suf]
    return Decimal(s)


def kquantity(v, unit_bytes):
    """A scenario quantity as a Kubernetes quantity string."""
    if isinstance(v, str):
        return v
    if unit_bytes:
        return str(int(Decimal(repr(v)).to_integral_value(ROUND_CEILING)))
    return repr(v)


def refuse(where, what):
    raise Refused("%s: %s has no Kubernetes form in this replay" % (where, what))


def class_name(prio):
    if isinstance(prio, str):
        return prio
    return "priority-%d" % prio if prio >= 0 else "priority-minus-%d" % -prio


def split(name):
    return name.split("/", 1) if "/" in name else (NS, name)


def short(name):
    return name[len(NS) + 1:] if name.startswith(NS + "/") else name


def node_object(n, path):
    labels = dict(n.get("labels") or {})
    pool = n.get("pool") or "default"
    if pool != "default":
        labels[POOL_LABEL] = pool
    alloc = {"cpu": kquantity(n.get("cpu", 0), False), "memory": kquantity(n.get("memory", 0), True),
             "nvidia.com/gpu": str(n.get("gpu", 0)), "pods": "110"}
    spec = {}
    if n.get("unschedulable"):
        spec["unschedulable"] = True
    if n.get("taints"):
        spec["taints"] = [{k: t[k] for k in ("key", "value", "effect") if k in t} for t in n["taints"]]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n["name"], "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": labels},
            "spec": spec, "status": {"allocatable": alloc, "capacity": alloc}}


def kai_units(res, v, where):
    if v == -1:
        return -1
    q = quantity(v, where)
    if res == "gpu":
        return int(q) if q == int(q) else float(q)
    scaled = q * 1000 if res == "cpu" else q / Decimal(10) ** 6
    if scaled != int(scaled):
        refuse(where, "%s %s, not a whole %s" % (res, v, "millicore" if res == "cpu" else "megabyte (KAI's unit)"))
    return int(scaled)


def queue_object(q, path):
    for f in ("pools", "created_at"):
        if f in q and q[f] not in (None, {}):
            refuse(path + "." + f, "a queue's " + f)
    spec = {"priority": q.get("priority", 0), "resources": {}}
    if q.get("parent"):
        spec["parentQueue"] = q["parent"]
    for res in ("gpu", "cpu", "memory"):
        r = (q.get("resources") or {}).get(res) or {}
        where = "%s.resources.%s" % (path, res)
        spec["resources"][res] = {"quota": kai_units(res, r.get("quota", 0), where),
                                  "overQuotaWeight": r.get("over_quota_weight", 1),
                                  "limit": kai_units(res, r.get("limit", -1), where)}
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": q["name"]}, "spec": spec}


def pod_spec(w, scheduler):
    req = w.get("requests") or {}
    requests, annotations = {}, {}
    if "cpu" in req:
        requests["cpu"] = kquantity(req["cpu"], False)
    if "memory" in req:
        requests["memory"] = kquantity(req["memory"], True)
    gpu = req.get("gpu", 0)
    limits = {}
    if 0 < gpu < 1:
        annotations["gpu-fraction"] = repr(gpu)  # KAI's fractional GPU
    elif gpu:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(int(gpu))
    resources = {"requests": requests}
    if limits:
        resources["limits"] = limits
    spec = {"schedulerName": scheduler,
            "containers": [{"name": "main", "image": "registry.example/replay:1", "resources": resources}]}
    grace = w.get("termination_grace", 30)
    if grace != int(grace):
        refuse("workload %s" % w["name"], "a fractional termination_grace")
    spec["terminationGracePeriodSeconds"] = int(grace)
    if w.get("node_selector"):
        spec["nodeSelector"] = dict(w["node_selector"])
    if w.get("tolerations"):
        spec["tolerations"] = [dict(t) for t in w["tolerations"]]
    if not w.get("external"):
        spec["priorityClassName"] = class_name(w.get("priority", "train"))
    return spec, annotations


def pod_labels(w):
    labels = dict(w.get("labels") or {})
    labels["app"] = split(w["name"])[1]
    if not w.get("external"):
        labels["kai.scheduler/queue"] = w["queue"]
        if w.get("preemptibility"):
            labels["kai.scheduler/preemptibility"] = w["preemptibility"]
    if (w.get("pool") or "default") != "default":
        labels[POOL_LABEL] = w["pool"]
    return labels


def workload_objects(w, path, pools):
    ns, name = split(w["name"])
    for f in ("duration", "created_at"):
        if f in w and w[f] is not None:
            refuse(path + "." + f, "a workload's " + f)
    ctrl = w.get("controller", "none")
    pods = w.get("pods") or []
    for i, p in enumerate(pods):
        if p["state"] != "running":
            refuse("%s.pods[%d]" % (path, i), "a pre-existing %s pod" % p["state"])
    if ctrl == "daemonset" and (pods or len(pools) > 1):
        refuse(path, "a daemonset with pre-existing pods or in a scenario of several pools")
    spec, annotations = pod_spec(w, "default-scheduler" if w.get("external") else "understory")
    labels = pod_labels(w)
    out = []
    replicas = w.get("replicas", 1)
    if w.get("external"):
        for i, p in enumerate(pods):
            pns, pname = split(p.get("name") or "%s-%d" % (w["name"], i))
            s = dict(spec, nodeName=p["node"])
            out.append({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": pname, "namespace": pns, "labels": labels,
                                     "annotations": annotations}, "spec": s})
        if replicas > len(pods):
            refuse(path, "pending pods of an external workload")
        return out
    annotations = dict(annotations, **{"pod-group-name": name})
    min_member = w.get("min_member", replicas if ctrl in ("none", "job") else 1)
    pg = {"minMember": min_member, "queue": w["queue"], "priorityClassName": class_name(w.get("priority", "train"))}
    if w.get("preemptibility"):
        pg["preemptibility"] = w["preemptibility"]
    out.append({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": ns, "labels": {k: v for k, v in labels.items()
                                                                       if k.startswith("kai.scheduler/")}},
                "spec": pg})
    template = {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec}
    selector = {"matchLabels": {"app": name}}
    if ctrl == "daemonset":
        out.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": ns},
                    "spec": {"selector": selector, "template": template}})
        return out
    # the scenario's running pods first, bound: the ReplicaSet adopts them
    for i, p in enumerate(pods):
        pns, pname = split(p.get("name") or "%s-%d" % (w["name"], i))
        out.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pname, "namespace": pns, "labels": labels, "annotations": annotations},
                    "spec": dict(spec, nodeName=p["node"])})
    out.append({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": ns},
                "spec": {"replicas": replicas, "selector": selector, "template": template}})
    return out


def load(path):
    with open(path) as f:
        s = json.load(f)
    if s.get("timeline"):
        refuse("timeline", "a timeline (nodes and workloads changing while the scheduler runs)")
    for t in times(s):  # every stage, so that what one cannot map refuses them all
        objects(s, t)
    return s


def times(s):
    return sorted({w.get("submit_at", 0) for w in s.get("workloads") or []} | {0})


def objects(s, t):
    items = []
    if t == 0:
        items += [node_object(n, "nodes[%d]" % i) for i, n in enumerate(s.get("nodes") or [])]
        prios = {}
        for w in s.get("workloads") or []:
            if not w.get("external"):
                p = w.get("priority", "train")
                prios[class_name(p)] = CLASSES[p] if isinstance(p, str) else p
        for name in sorted(prios):
            items.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                          "metadata": {"name": name}, "value": prios[name], "preemptionPolicy": "Never"})
        items += [queue_object(q, "queues[%d]" % i) for i, q in enumerate(s.get("queues") or [])]
        namespaces = sorted({split(w["name"])[0] for w in s.get("workloads") or []} - {NS, "kube-system"})
        items += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces]
    pools = {n.get("pool") or "default" for n in s.get("nodes") or []}
    for i, w in enumerate(s.get("workloads") or []):
        if w.get("submit_at", 0) == t:
            items += workload_objects(w, "workloads[%d]" % i, pools)
    return {"apiVersion": "v1", "kind": "List", "items": items}


def pod_count(s, t):
    n = 0
    for w in s.get("workloads") or []:
        if w.get("submit_at", 0) != t:
            continue
        if w.get("controller") == "daemonset":
            sel = w.get("node_selector") or {}
            n += sum(1 for x in s.get("nodes") or [] if all((x.get("labels") or {}).get(k) == v for k, v in sel.items()))
        else:
            n += w.get("replicas", 1)
    return n


def node_classes(s):
    cls = {}
    for n in s.get("nodes") or []:
        key = {"pool": n.get("pool") or "default", "labels": n.get("labels") or {}, "taints": n.get("taints") or [],
               "unschedulable": bool(n.get("unschedulable")),
               "cpu": str(quantity(n.get("cpu", 0), "")), "memory": str(quantity(n.get("memory", 0), "")),
               "gpu": n.get("gpu", 0)}
        cls[n["name"]] = json.dumps(key, sort_keys=True)
    return cls


def state(s, bound, pending, evictions):
    """bound: (node, workload) pairs; pending: workload names."""
    cls = node_classes(s)
    per_node = {n: [] for n in cls}
    for node, wl in bound:
        per_node.setdefault(node, []).append(short(wl))
    classes = {}
    for n, wls in per_node.items():
        classes.setdefault(cls.get(n, "unknown node " + n), []).append(sorted(wls))
    pend = {}
    for wl in pending:
        pend[short(wl)] = pend.get(short(wl), 0) + 1
    return {"nodes": [sorted(v) for _, v in sorted(classes.items())], "pending": pend, "evictions": evictions}


def sim_state(sim, s):
    bound = [(p["node"], p["workload"]) for p in sim["final"]["pods"] if p["state"] == "running"]
    pending = [p["workload"] for p in sim["final"]["pods"] if p["state"] == "pending" and not p.get("external")]
    unsettled = [p["name"] for p in sim["final"]["pods"] if p["state"] in ("pipelined", "releasing")]
    if unsettled:
        raise Refused("the simulation has not settled: %s" % " ".join(unsettled))
    wl_of = {p["name"]: p["workload"] for p in sim["final"]["pods"]}
    ev = {}
    for c in sim["cycles"]:
        for d in c["decisions"]:
            if d["op"] == "evict":
                k = "%s %s" % (short(wl_of.get(d["pod"], d["pod"].rsplit("-", 1)[0])), d["action"])
                ev[k] = ev.get(k, 0) + 1
    return state(s, bound, pending, ev)


def kube_state(pods, events, s):
    bound, pending = [], []
    for p in pods["items"]:
        md = p["metadata"]
        if md.get("deletionTimestamp") or p.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        wl = (md.get("annotations") or {}).get("pod-group-name") or md["labels"]["app"]
        wl = "%s/%s" % (md["namespace"], wl)
        if p["spec"].get("nodeName"):
            bound.append((p["spec"]["nodeName"], wl))
        elif p["spec"].get("schedulerName") == "understory":
            pending.append(wl)
    ev = {}
    for e in events["items"]:
        if e.get("reportingController") != "understory" or e.get("reason") != "Evict":
            continue
        k = "%s %s" % (short("%s/%s" % (e["regarding"]["namespace"], e["regarding"]["name"])), e["action"])
        ev[k] = ev.get(k, 0) + int(e["metadata"]["annotations"]["num-evicted-pods"])
    return state(s, bound, pending, ev)


def main(argv):
    try:
        if len(argv) == 3 and argv[1] == "times":
            print("\n".join(str(t) for t in times(load(argv[2]))))
        elif len(argv) == 4 and argv[1] == "objects":
            print(json.dumps(objects(load(argv[2]), float(argv[3])), indent=1, sort_keys=True))
        elif len(argv) == 4 and argv[1] == "pods":
            print(pod_count(load(argv[2]), float(argv[3])))
        elif len(argv) == 4 and argv[1] == "sim-state":
            with open(argv[2]) as f:
                print(json.dumps(sim_state(json.load(f), load(argv[3])), indent=1, sort_keys=True))
        elif len(argv) == 5 and argv[1] == "kube-state":
            with open(argv[2]) as f, open(argv[3]) as g:
                print(json.dumps(kube_state(json.load(f), json.load(g), load(argv[4])), indent=1, sort_keys=True))
        else:
            print("usage: replay.py times FILE | objects FILE T | pods FILE T | sim-state SIM.json FILE | "
                  "kube-state PODS.json EVENTS.json FILE", file=sys.stderr)
            return 2
    except Refused as e:
        print("replay.py: %s: %s" % (argv[2], e), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
