#!/usr/bin/env python3
"""tests/kube/bench-objects.py — the objects of tests/kube/bench.sh, one
JSON object a line (bench.sh wraps them in Lists for kubectl create):
  setup --nodes N --queues Q --pods P   namespaces, queues, KWOK nodes
  burn --replicas R                     the background burn-in Deployment
  podgroups --pods P --queues Q         one PodGroup per AI pod
  pods --pods P                         the AI pods, one GPU each
Deterministic: the same arguments give the same objects."""
import argparse
import json
import sys

GPUS = 8


def emit(o):
    sys.stdout.write(json.dumps(o, separators=(",", ":")) + "\n")


def queue(name, gpu_quota, weight, parent=None):
    res = {r: {"quota": q, "overQuotaWeight": weight, "limit": -1}
           for r, q in (("gpu", gpu_quota), ("cpu", -1 if weight else 0), ("memory", -1 if weight else 0))}
    spec = {"priority": 0, "resources": res}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def setup(a):
    emit({"apiVersion": "v1", "kind": "Namespace",
          "metadata": {"name": "bench", "labels": {"kai.scheduler/queue": "bench-q0"}}})
    emit({"apiVersion": "v1", "kind": "Namespace",
          "metadata": {"name": "bench-bg", "labels": {"kai.scheduler/queue": "bench-bg"}}})
    total = a.nodes * GPUS
    emit(queue("bench", total, 1))
    for q in range(a.queues):
        emit(queue("bench-q%d" % q, total // a.queues, 1, "bench"))
    emit(queue("bench-bg", 0, 0))
    for n in range(a.nodes):
        name = "bench-n%04d" % n
        cap = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(GPUS), "pods": "110"}
        emit({"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                           "labels": {"type": "kwok", "kubernetes.io/hostname": name}},
              "status": {"allocatable": cap, "capacity": cap}})


def container(name):
    return [{"name": name, "image": "registry.example/%s:1" % name,
             "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]


def burn(a):
    labels = {"app": "gpu-burn", "kai.scheduler/background": "true"}
    emit({"apiVersion": "apps/v1", "kind": "Deployment",
          "metadata": {"name": "gpu-burn", "namespace": "bench-bg"},
          "spec": {"replicas": a.replicas, "selector": {"matchLabels": {"app": "gpu-burn"}},
                   "template": {"metadata": {"labels": labels},
                                "spec": {"schedulerName": "understory", "terminationGracePeriodSeconds": 1,
                                         "containers": container("burn")}}}})


def podgroups(a):
    for i in range(a.pods):
        emit({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
              "metadata": {"name": "job-%05d" % i, "namespace": "bench"},
              "spec": {"minMember": 1, "queue": "bench-q%d" % (i % a.queues)}})


def pods(a):
    for i in range(a.pods):
        emit({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "job-%05d-0" % i, "namespace": "bench",
                           "annotations": {"pod-group-name": "job-%05d" % i}},
              "spec": {"schedulerName": "understory", "terminationGracePeriodSeconds": 1,
                       "containers": container("train")}})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["setup", "burn", "podgroups", "pods"])
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--queues", type=int, default=4)
    p.add_argument("--pods", type=int, default=4000)
    p.add_argument("--replicas", type=int, default=500)
    a = p.parse_args()
    {"setup": setup, "burn": burn, "podgroups": podgroups, "pods": pods}[a.what](a)


if __name__ == "__main__":
    main()
