/*
 * objects.h — the Kubernetes object mapping: pure functions from the JSON
 * objects an API server serves (v1 Node, Pod and Namespace; KAI's
 * scheduling.run.ai/v2 Queue and v2alpha2 PodGroup; scheduling.k8s.io/v1
 * PriorityClass) to objects of the scenario format (docs/scenario.md;
 * docs/kubernetes-import.md says field by field what is read).
 *
 * Owns the reading of those objects and nothing else.  It must never talk
 * to a server, touch an engine or keep state between calls: `understory
 * import` feeds it a `kubectl get -o json` List, and a control plane feeds
 * it its caches and passes the results to us_engine_upsert_*_json.
 *
 * A field it cannot map is an error naming the object and the JSON path
 * (`items[3].spec.containers[0].resources.requests.cpu (Pod
 * "team-a/serve-1"): "x" is not a cpu quantity`), never a silent drop.
 * Every result is new cJSON the caller owns; on failure nothing is returned.
 * Output is deterministic: objects sorted by name, fields in a fixed order.
 */
#ifndef KUBE_OBJECTS_H
#define KUBE_OBJECTS_H

#include <stddef.h>

#include "error.h"

struct cJSON;

#define KUBE_DEFAULT_SCHEDULER "understory"

typedef struct kube_opts {
    /* spec.schedulerName of the pods the engine schedules; NULL:
     * KUBE_DEFAULT_SCHEDULER.  Other pods are external workloads. */
    const char *scheduler_name;
    const char *name;  /* the scenario's name; NULL: "imported" */
    /* The moment that is t=0, in seconds since the epoch: creation times
     * (metadata.creationTimestamp) become created_at relative to it.  0:
     * the newest creation time of a Queue, Pod or PodGroup in the input. */
    double epoch;
    /* Non-zero: unbound pods of ours are listed in their workload's pods
     * too, with state "pending" (a control plane reports them by their
     * real names, us_engine_upsert_pod; a scenario document must not have
     * them: the simulator creates its pending pods itself). */
    int pending_pods;
    /* Non-zero: the document's nodes are left empty (the nodes given are
     * only looked up for the pods that name them): a control plane feeds
     * its nodes to the engine apart and maps workloads often. */
    int workloads_only;
} kube_opts;

/* The objects of a cluster, by kind, each an object of the API (not
 * copied: they must outlive the call).  paths[i] names objs[i] in
 * messages ("items[3]"); NULL: the kind and index ("pods[3]"). */
typedef struct kube_objs {
    const struct cJSON **objs;
    const char **paths;
    size_t n;
} kube_objs;

typedef struct kube_cluster {
    kube_objs nodes, pods, namespaces, queues, podgroups, priorityclasses;
} kube_cluster;

/* One Node as a scenario node object. */
int kube_node(const struct cJSON *node, const char *path, struct cJSON **out, us_err *err);

/* One Queue as a scenario queue object; its created_at relative to epoch
 * (see kube_opts). */
int kube_queue(const struct cJSON *queue, const char *path, double epoch, struct cJSON **out, us_err *err);

/* The whole cluster as a scenario document: nodes, queues and the
 * workloads its pods form (PodGroups, top owners, lone pods; pods of
 * other schedulers as external workloads). */
int kube_scenario(const kube_cluster *c, const kube_opts *o, struct cJSON **out, us_err *err);

/* The name of the workload pod belongs to ("namespace/name": its
 * PodGroup, else its top owner, else the pod itself; another scheduler's
 * pod is a workload of its own), as kube_scenario groups it, read from the
 * pod alone; a control plane indexes its caches by it.  New string the
 * caller frees; NULL when the pod has no name or namespace, an owner it
 * cannot read, or memory runs out (kube_scenario then says why). */
char *kube_pod_workload(const struct cJSON *pod, const kube_opts *o);

/* The items of a List (kind "List" or "<Kind>List", as kubectl get -o json
 * prints) sorted into *c; the arrays are malloc'd (kube_cluster_free), the
 * objects stay list's.  Items of other kinds are an error naming them. */
int kube_cluster_from_list(const struct cJSON *list, kube_cluster *c, us_err *err);
void kube_cluster_free(kube_cluster *c);

#endif
