/*
 * test_kube.c — the Kubernetes object mapping (kube/objects.c) as a
 * control plane calls it: objects from its own caches (no List, no paths),
 * results fed to the engine through the public JSON calls.  The mapping
 * never changes its input, names the object in every error, and what it
 * returns is accepted by us_engine_upsert_*_json as it is.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "check.h"
#include "objects.h"
#include "understory.h"

static const char *node_json =
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":{\"zone\":\"a\"}},"
    "\"spec\":{\"taints\":[{\"key\":\"nvidia.com/gpu\",\"effect\":\"NoSchedule\"}]},"
    "\"status\":{\"allocatable\":{\"cpu\":\"7500m\",\"memory\":\"31Gi\",\"nvidia.com/gpu\":\"4\"},"
    "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}";
static const char *queue_json =
    "{\"kind\":\"Queue\",\"metadata\":{\"name\":\"team\"},\"spec\":{\"resources\":{"
    "\"gpu\":{\"quota\":4,\"overQuotaWeight\":2,\"limit\":-1},"
    "\"cpu\":{\"quota\":1500},\"memory\":{\"quota\":2048,\"limit\":-1}}}}";
static const char *ns_json = "{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"t\",\"labels\":{\"kai.scheduler/queue\":\"team\"}}}";
static const char *pods_json[] = {
    /* ours, pending, tolerating the GPU taint */
    "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"train\",\"namespace\":\"t\"},\"spec\":{\"schedulerName\":\"understory\","
    "\"priority\":50,\"tolerations\":[{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\"}],"
    "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"2\",\"cpu\":\"1\"}}}]}}",
    /* another scheduler's, bound to n1 */
    "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"dns\",\"namespace\":\"kube-system\"},\"spec\":{\"nodeName\":\"n1\","
    "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"2\"}}}]}}",
};

static char *print(const cJSON *o) { return cJSON_PrintUnformatted(o); }

/* A mapping's objects into the engine through the public JSON calls, as
 * a control plane feeds them: nodes, queues, then each workload and its
 * pods (reported with upsert_pod, not in the workload). */
static void feed(us_engine *e, const cJSON *doc, double now) {
    us_error ue;
    const cJSON *o;
    cJSON_ArrayForEach(o, cJSON_GetObjectItem(doc, "nodes")) {
        char *s = print(o);
        CHECK(us_engine_upsert_node_json(e, s, &ue) == US_OK);
        free(s);
    }
    cJSON_ArrayForEach(o, cJSON_GetObjectItem(doc, "queues")) {
        char *s = print(o);
        CHECK(us_engine_upsert_queue_json(e, s, &ue) == US_OK);
        free(s);
    }
    cJSON_ArrayForEach(o, cJSON_GetObjectItem(doc, "workloads")) {
        cJSON *w = cJSON_Duplicate(o, true);
        cJSON *pl = cJSON_DetachItemFromObject(w, "pods");
        char *s = print(w);
        CHECK(us_engine_upsert_workload_json(e, s, now, &ue) == US_OK);
        if (ue.code) fprintf(stderr, "  %s\n", ue.message);
        const cJSON *p;
        cJSON_ArrayForEach(p, pl) {
            char *ps2 = NULL;
            cJSON *pp = cJSON_Duplicate(p, true);
            cJSON_AddStringToObject(pp, "workload", cJSON_GetObjectItem(w, "name")->valuestring);
            ps2 = print(pp);
            CHECK(us_engine_upsert_pod_json(e, ps2, &ue) == US_OK);
            free(ps2);
            cJSON_Delete(pp);
        }
        cJSON_Delete(pl);
        cJSON_Delete(w);
        free(s);
    }
}

TEST(objects_from_caches_feed_the_engine) {
    cJSON *node = cJSON_Parse(node_json), *queue = cJSON_Parse(queue_json), *ns = cJSON_Parse(ns_json);
    cJSON *pods[2] = {cJSON_Parse(pods_json[0]), cJSON_Parse(pods_json[1])};
    CHECK(node && queue && ns && pods[0] && pods[1]);
    char *before = print(pods[0]);
    const cJSON *nodes[] = {node}, *queues[] = {queue}, *nss[] = {ns}, *ps[] = {pods[0], pods[1]};
    kube_cluster c = {{nodes, NULL, 1}, {ps, NULL, 2}, {nss, NULL, 1}, {queues, NULL, 1}, {0}, {0}};
    cJSON *doc = NULL, *x = NULL;
    us_err err = {0};
    CHECK(kube_scenario(&c, NULL, &doc, &err) == 0);
    char *after = print(pods[0]);
    CHECK_STR(after, before); /* pure: the input is as it was */

    CHECK(kube_node(node, "n", &x, &err) == 0);
    char *n = print(x);
    CHECK_STR(n, "{\"name\":\"n1\",\"pool\":\"default\",\"cpu\":\"7500m\",\"memory\":\"33285996544\",\"gpu\":4,"
                 "\"labels\":{\"zone\":\"a\"},\"unschedulable\":false,"
                 "\"taints\":[{\"key\":\"nvidia.com/gpu\",\"effect\":\"NoSchedule\"}]}");
    cJSON_Delete(x);
    CHECK(kube_queue(queue, "q", 0, &x, &err) == 0);
    char *q = print(x);
    /* KAI units: millicores, and megabytes of 10^6 bytes */
    CHECK_STR(q, "{\"name\":\"team\",\"priority\":100,\"resources\":{"
                 "\"gpu\":{\"quota\":4,\"over_quota_weight\":2,\"limit\":-1},"
                 "\"cpu\":{\"quota\":\"1500m\"},\"memory\":{\"quota\":\"2048000000\",\"limit\":-1}}}");
    cJSON_Delete(x);

    /* the engine takes every object as it is */
    us_engine *e = NULL;
    us_error ue;
    CHECK(us_engine_create(NULL, &e, &ue) == US_OK);
    feed(e, doc, 0);
    /* the external pod holds 2 of 4 GPUs: train fits beside it */
    CHECK(us_engine_run_cycle(e, 0, &ue) == US_OK);
    us_decision_info d;
    CHECK(us_engine_decision_count(e) == 1);
    CHECK(us_engine_decision(e, 0, &d) == US_OK && d.op == US_DECISION_BIND && !strcmp(d.node, "n1"));
    us_engine_destroy(e);

    free(before);
    free(after);
    free(n);
    free(q);
    cJSON_Delete(doc);
    cJSON_Delete(node);
    cJSON_Delete(queue);
    cJSON_Delete(ns);
    cJSON_Delete(pods[0]);
    cJSON_Delete(pods[1]);
}

TEST(errors_name_the_object_without_a_list) {
    cJSON *p = cJSON_Parse("{\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\",\"namespace\":\"t\"},"
                           "\"spec\":{\"schedulerName\":\"understory\",\"containers\":[{\"name\":\"c\","
                           "\"resources\":{\"requests\":{\"memory\":\"12Q\"}}}]}}");
    const cJSON *ps[] = {p};
    kube_cluster c = {{0}, {ps, NULL, 1}, {0}, {0}, {0}, {0}};
    cJSON *doc = NULL;
    us_err err = {0};
    CHECK(kube_scenario(&c, NULL, &doc, &err) == -1);
    CHECK(doc == NULL);
    CHECK(err.code == US_EINVAL);
    CHECK_STR(err.msg, "pods[0].spec.containers[0].resources.requests[\"memory\"] (Pod \"t/x\"): \"12Q\" is not "
                       "a memory quantity");
    cJSON_Delete(p);
}

/* matchFields metadata.name In one node is a pod's pin: a bound pod's is
 * written on it; a pending pod's is said to a control plane
 * (pending_pods), and refused in a scenario document for any pod but a
 * DaemonSet's, whose node the daemonset rule gives. */
TEST(node_affinity_on_metadata_name_is_a_pin) {
    static const char *const fmt =
        "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"w\",\"namespace\":\"t\",\"labels\":{\"kai.scheduler/queue\":\"q\"}%s},"
        "\"spec\":{\"schedulerName\":\"understory\",%s\"affinity\":{\"nodeAffinity\":{"
        "\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{\"matchFields\":[{"
        "\"key\":\"metadata.name\",\"operator\":\"%s\",\"values\":[\"n1\"]}]}]}}},"
        "\"containers\":[{\"name\":\"c\"}]}}";
    static const char *const ds = ",\"ownerReferences\":[{\"kind\":\"DaemonSet\",\"name\":\"d\",\"controller\":true}]";
    struct {
        const char *owner, *node, *op;
        int pending_pods;
        const char *want; /* the pod entry, or the error */
    } cases[] = {
        {"", "", "In", 1, "{\"name\":\"t/w\",\"pin\":\"n1\",\"state\":\"pending\"}"},
        {"", "\"nodeName\":\"n1\",", "In", 0, "{\"name\":\"t/w\",\"node\":\"n1\",\"pin\":\"n1\",\"state\":\"running\"}"},
        {ds, "", "In", 0, NULL},
        {"", "", "In", 0, "only a DaemonSet's pending pods are pinned to a node in a scenario"},
        {ds, "", "NotIn", 1, "matchFields[0] (Pod \"t/w\"): cannot be mapped: a pod is pinned to a node by one "
                             "matchFields metadata.name In with one node name"},
    };
    char text[2048];
    cJSON *node = cJSON_Parse(node_json);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(text, sizeof text, fmt, cases[i].owner, cases[i].node, cases[i].op);
        cJSON *p = cJSON_Parse(text), *doc = NULL;
        CHECK(p != NULL);
        const cJSON *ps[] = {p}, *ns[] = {node};
        kube_cluster c = {{ns, NULL, 1}, {ps, NULL, 1}, {0}, {0}, {0}, {0}};
        kube_opts o = {NULL, "t", 0, cases[i].pending_pods, 1};
        us_err err = {0};
        int rc = kube_scenario(&c, &o, &doc, &err);
        const cJSON *pods = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "workloads"), 0), "pods");
        if (!cases[i].want) {
            CHECK(rc == 0 && cJSON_GetArraySize(pods) == 0); /* pending: the simulator creates it */
        } else if (strchr(cases[i].want, '{')) {
            CHECK(rc == 0);
            char *got = print(cJSON_GetArrayItem(pods, 0));
            CHECK_STR(got, cases[i].want);
            free(got);
        } else {
            CHECK(rc == -1);
            CHECK_HAS(err.msg, cases[i].want);
        }
        cJSON_Delete(doc);
        cJSON_Delete(p);
    }
    cJSON_Delete(node);
}

/* Phase and node of the engine's pod named name: 1 when found. */
static int engine_pod(const us_engine *e, const char *name, us_pod_info *out) {
    for (size_t i = 0; i < us_engine_pod_count(e); i++)
        if (us_engine_pod(e, i, out) == US_OK && !strcmp(out->name, name)) return 1;
    return 0;
}

static int evictions(const us_engine *e) {
    us_decision_info d;
    int n = 0;
    for (size_t i = 0; i < us_engine_decision_count(e); i++)
        n += us_engine_decision(e, i, &d) == US_OK && d.op == US_DECISION_EVICT;
    return n;
}

/* A distributed job's workers finish a few seconds apart.  Its pods that
 * Succeeded count as the workload's `succeeded` (Failed ones as nothing),
 * and the workers still running are never stopped as a broken gang (KAI:
 * a PodGroup with a Succeeded pod is not stale), first with one worker of
 * three done, then, fed as serve feeds a change (the pod gone, then its
 * workload again), with two. */
TEST(a_gang_whose_workers_succeed_keeps_the_rest_running) {
    static const char *const pod_fmt =
        "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"w%d\",\"namespace\":\"t\","
        "\"annotations\":{\"pod-group-name\":\"pg\"}},"
        "\"spec\":{\"schedulerName\":\"understory\",\"nodeName\":\"n1\",\"priority\":50,"
        "\"tolerations\":[{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\"}],"
        "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"1\"}}}]},"
        "\"status\":{\"phase\":\"%s\"}}";
    const char *phases[2][4] = {{"Running", "Succeeded", "Running", "Failed"},
                                {"Running", "Succeeded", "Succeeded", "Failed"}};
    const char *want[2] = {"\"replicas\":2,\"min_member\":3,\"succeeded\":1,",
                           "\"replicas\":1,\"min_member\":3,\"succeeded\":2,"};
    cJSON *node = cJSON_Parse(node_json), *queue = cJSON_Parse(queue_json), *ns = cJSON_Parse(ns_json);
    cJSON *pg = cJSON_Parse("{\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"pg\",\"namespace\":\"t\"},"
                            "\"spec\":{\"minMember\":3}}");
    CHECK(node && queue && ns && pg);
    us_engine *e = NULL;
    us_error ue;
    us_pod_info pi;
    CHECK(us_engine_create(NULL, &e, &ue) == US_OK);
    for (int step = 0; step < 2; step++) {
        char text[1024];
        cJSON *pods[4];
        const cJSON *ps[4], *nodes[] = {node}, *queues[] = {queue}, *nss[] = {ns}, *pgs[] = {pg};
        for (int i = 0; i < 4; i++) {
            snprintf(text, sizeof text, pod_fmt, i, phases[step][i]);
            ps[i] = pods[i] = cJSON_Parse(text);
            CHECK(pods[i] != NULL);
        }
        kube_cluster c = {{nodes, NULL, 1}, {ps, NULL, 4}, {nss, NULL, 1}, {queues, NULL, 1}, {pgs, NULL, 1}, {0}};
        cJSON *doc = NULL;
        us_err err = {0};
        CHECK(kube_scenario(&c, NULL, &doc, &err) == 0);
        char *got = print(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "workloads"), 0));
        CHECK_HAS(got, want[step]);
        /* serve's order: the pod that finished leaves (its controller's
         * replacement is made pending), then the workload with its count
         * takes the replacement back */
        if (step == 1) CHECK(us_engine_remove_pod(e, "t/w2", &ue) == US_OK);
        feed(e, doc, 10.0 * step);
        CHECK(us_engine_run_cycle(e, 10.0 * step, &ue) == US_OK);
        CHECK(evictions(e) == 0);
        CHECK(engine_pod(e, "t/w0", &pi) && pi.phase == US_PHASE_RUNNING && !strcmp(pi.node, "n1"));
        if (step == 0) CHECK(engine_pod(e, "t/w2", &pi) && pi.phase == US_PHASE_RUNNING);
        else CHECK(!engine_pod(e, "t/w2", &pi)); /* the replacement went with the count */
        CHECK(us_engine_pod_count(e) == (size_t)(2 - step));
        free(got);
        cJSON_Delete(doc);
        for (int i = 0; i < 4; i++) cJSON_Delete(pods[i]);
    }
    us_engine_destroy(e);
    cJSON_Delete(node);
    cJSON_Delete(queue);
    cJSON_Delete(ns);
    cJSON_Delete(pg);
}

int main(void) {
    RUN(objects_from_caches_feed_the_engine);
    RUN(errors_name_the_object_without_a_list);
    RUN(node_affinity_on_metadata_name_is_a_pin);
    RUN(a_gang_whose_workers_succeed_keeps_the_rest_running);
    return check_report();
}
