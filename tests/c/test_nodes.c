/*
 * test_nodes.c — Kubernetes Nodes into the engine (serve/nodes.h), on a
 * real engine: a node whose allocatable drops below what its pods hold is
 * taken all the same, its cordon with it, raised to what its pods hold so
 * that nothing is placed in room it no longer has, and takes the capacity
 * it reports once its pods leave room for it.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nodes.h"
#include "understory.h"

static us_engine *engine(void) {
    us_engine_options o;
    us_engine *e = NULL;
    us_error err;
    us_engine_options_init(&o);
    o.check_invariants = 1;
    if (us_engine_create(&o, &e, &err) != US_OK) fprintf(stderr, "create: %s\n", err.message);
    return e;
}

/* An engine with queue q (64 GPUs of quota), and a node feed into it. */
static bool started(us_engine **e, sv_nodes **n) {
    us_queue_spec q;
    us_queue_spec_init(&q);
    q.name = "q";
    q.quota.gpu = 64;
    *e = engine();
    *n = *e ? sv_nodes_new(*e) : NULL;
    CHECK(*e && *n && us_engine_upsert_queue(*e, &q, NULL) == US_OK);
    if (*e && *n) return true;
    sv_nodes_free(*n);
    us_engine_destroy(*e);
    return false;
}

/* A Kubernetes Node as the informer gives it: Ready, allocatable gpu
 * devices, cpu (a quantity), 256Gi of memory. */
static cJSON *k8s_node(const char *name, int gpu, const char *cpu, int cordoned) {
    char text[1024];
    snprintf(text, sizeof text,
             "{\"metadata\": {\"name\": \"%s\", \"labels\": {\"type\": \"gpu\"}},"
             " \"spec\": {\"unschedulable\": %s},"
             " \"status\": {\"allocatable\": {\"cpu\": \"%s\", \"memory\": \"256Gi\", \"nvidia.com/gpu\": \"%d\"},"
             " \"conditions\": [{\"type\": \"Ready\", \"status\": \"True\"}]}}",
             name, cordoned ? "true" : "false", cpu, gpu);
    return cJSON_Parse(text);
}

static void report(sv_nodes *n, const char *name, int gpu, const char *cpu, int cordoned) {
    cJSON *o = k8s_node(name, gpu, cpu, cordoned);
    CHECK(o != NULL);
    if (o) sv_nodes_event(n, SV_MODIFIED, o);
    cJSON_Delete(o);
}

/* Deployment w of queue q: replicas pods of 1 GPU and 1 core each, no
 * grace (a pod scaled away leaves at the next cycle). */
static int workload(us_engine *e, const char *name, int replicas, double now) {
    us_workload_spec w;
    us_workload_spec_init(&w);
    w.name = name;
    w.queue = "q";
    w.controller = US_CONTROLLER_DEPLOYMENT; /* no gang: each pod alone */
    w.replicas = replicas;
    w.termination_grace = 0;
    w.requests = (us_resources){1, 1000, 1LL << 30};
    us_error err;
    int rc = us_engine_upsert_workload(e, &w, now, &err);
    if (rc != US_OK) printf("  workload %s, %d replicas: %s\n", name, replicas, err.message);
    return rc;
}

/* Every releasing pod reported gone, as serve reports a deleted pod
 * before it retries the nodes and runs the cycle. */
static void gone_releasing(us_engine *e) {
    us_error err;
    for (size_t i = us_engine_pod_count(e); i-- > 0;) {
        us_pod_info p;
        if (us_engine_pod(e, i, &p) == US_OK && p.phase == US_PHASE_RELEASING) {
            char name[64];
            snprintf(name, sizeof name, "%s", p.name);
            CHECK(us_engine_remove_pod(e, name, &err) == US_OK);
        }
    }
}

static us_node_info node_info(const us_engine *e, const char *name) {
    us_node_info x;
    memset(&x, 0, sizeof x);
    CHECK(us_engine_node_named(e, name, &x) == US_OK);
    return x;
}

/* A node's GPUs drop from 8 to 6 under 8 running pods, and it is cordoned
 * in the same breath: the cordon is taken at once, the GPUs it lost are
 * not offered (the node is taken with 8, then 7 as a pod leaves), and the
 * 6 are taken once 5 pods remain.  Pods leave as serve sees them go:
 * reported gone before the retry and the cycle. */
TEST(a_node_below_its_pods_is_taken_raised_then_as_reported) {
    us_engine *e;
    sv_nodes *n;
    us_error err;
    if (!started(&e, &n)) return;
    report(n, "n1", 8, "32", 0);
    CHECK(workload(e, "w", 8, 0) == US_OK);
    CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
    us_node_info x = node_info(e, "n1");
    CHECK(x.used.gpu == 8 && x.capacity.gpu == 8 && !x.unschedulable);
    report(n, "n1", 6, "32", 1);
    x = node_info(e, "n1");
    CHECK(x.unschedulable && x.capacity.gpu == 8 && x.capacity.cpu == 32000 && sv_nodes_short(n) == 1);
    /* uncordoned, still short: a new pod finds no room there */
    report(n, "n1", 6, "32", 0);
    CHECK(workload(e, "v", 1, 2) == US_OK);
    sv_nodes_retry(n);
    CHECK(us_engine_run_cycle(e, 2, &err) == US_OK);
    x = node_info(e, "n1");
    CHECK(!x.unschedulable && x.used.gpu == 8 && x.capacity.gpu == 8);
    /* one pod leaves: 7 remain, still more than 6; no room for v */
    CHECK(workload(e, "w", 7, 3) == US_OK);
    gone_releasing(e);
    sv_nodes_retry(n);
    CHECK(us_engine_run_cycle(e, 3, &err) == US_OK);
    x = node_info(e, "n1");
    CHECK(x.capacity.gpu == 7 && x.used.gpu == 7 && sv_nodes_short(n) == 1);
    /* two more leave: 5 remain, the node takes its 6 and v the sixth */
    CHECK(workload(e, "w", 5, 4) == US_OK);
    gone_releasing(e);
    sv_nodes_retry(n);
    x = node_info(e, "n1");
    CHECK(x.capacity.gpu == 6 && sv_nodes_short(n) == 0);
    CHECK(us_engine_run_cycle(e, 4, &err) == US_OK);
    x = node_info(e, "n1");
    CHECK(x.used.gpu == 6 && x.capacity.gpu == 6);
    sv_nodes_free(n);
    us_engine_destroy(e);
}

/* Fractional pods hold whole devices between them: three halves hold
 * two devices (1.5 GPUs, rounded up), and two halves on two devices
 * (their partners gone) hold 2 devices for 1 GPU.  A node reporting 1 is
 * taken with 2, not 1 (refused) nor the 4 it had (room it lacks): a
 * whole-GPU pod finds none, and the node takes its 1 once a half leaves. */
TEST(fractional_pods_keep_the_devices_they_hold) {
    us_engine *e;
    sv_nodes *n;
    us_error err;
    if (!started(&e, &n)) return;
    report(n, "n1", 4, "32", 0);
    static const char *const halves[] = {"h1", "h2", "h3", "h4"};
    for (int i = 0; i < 4; i++) {
        us_workload_spec w;
        us_workload_spec_init(&w);
        w.name = halves[i];
        w.queue = "q";
        w.termination_grace = 0;
        w.requests = (us_resources){0.5, 100, 1LL << 30};
        CHECK(us_engine_upsert_workload(e, &w, i, &err) == US_OK);
        CHECK(us_engine_run_cycle(e, i, &err) == US_OK); /* one at a time: packed two a device */
    }
    us_node_info x = node_info(e, "n1");
    CHECK(x.used.gpu == 2);
    /* h4 leaves: 1.5 GPUs held on two devices; the node reports 1 */
    CHECK(us_engine_remove_workload(e, "h4", 4, &err) == US_OK);
    gone_releasing(e);
    report(n, "n1", 1, "32", 0);
    x = node_info(e, "n1");
    CHECK(x.used.gpu == 1.5 && x.capacity.gpu == 2 && sv_nodes_short(n) == 1);
    report(n, "n1", 4, "32", 0); /* the device comes back */
    x = node_info(e, "n1");
    CHECK(x.capacity.gpu == 4 && sv_nodes_short(n) == 0);
    /* h2 leaves: h1 and h3 hold half of a device each, 1 GPU on two; the
     * node reports 1 again */
    CHECK(us_engine_remove_workload(e, "h2", 5, &err) == US_OK);
    gone_releasing(e);
    report(n, "n1", 1, "32", 0);
    x = node_info(e, "n1");
    CHECK(x.used.gpu == 1 && x.capacity.gpu == 2 && sv_nodes_short(n) == 1);
    CHECK(workload(e, "whole", 1, 6) == US_OK);
    sv_nodes_retry(n);
    CHECK(us_engine_run_cycle(e, 6, &err) == US_OK);
    x = node_info(e, "n1");
    CHECK(x.used.gpu == 1 && x.capacity.gpu == 2);
    /* h3 is deleted and gone (as serve reports it, before the retry) */
    CHECK(us_engine_remove_workload(e, "h3", 7, &err) == US_OK);
    gone_releasing(e);
    sv_nodes_retry(n);
    x = node_info(e, "n1");
    CHECK(x.capacity.gpu == 1 && sv_nodes_short(n) == 0);
    CHECK(us_engine_run_cycle(e, 7, &err) == US_OK);
    x = node_info(e, "n1");
    CHECK(x.used.gpu == 0.5); /* whole finds no device free */
    sv_nodes_free(n);
    us_engine_destroy(e);
}

/* Any sequence of node updates (GPUs 0-8, 2 to 32 cores, cordoned or not)
 * and of scaling (1-10 pods of 1 GPU and 1 core), with the retry and a
 * cycle after each as serve runs them: the node's cordon is always as
 * reported; each resource is what it reports, or what its pods hold when
 * that is more (the node counted short then); and a cycle never places a
 * pod in room the node does not report. */
TEST(node_updates_under_any_pods_keep_what_the_node_reports) {
    static const char *const cpus[] = {"2", "4", "6", "32"};
    static const int64_t millis[] = {2000, 4000, 6000, 32000};
    for (unsigned seed = 1; seed <= 20; seed++) {
        us_engine *e;
        sv_nodes *n;
        us_error err;
        if (!started(&e, &n)) return;
        unsigned r = seed * 2654435761u;
        int gpu = 8, c = 3, cordoned = 0, shorts = 0, takes = 0, replicas = 4;
        report(n, "n1", gpu, cpus[c], cordoned);
        CHECK(workload(e, "w", replicas, 0) == US_OK);
        for (int step = 1; step <= 60; step++) {
            r = r * 1103515245u + 12345u;
            unsigned what = (r >> 16) % 3;
            double now = step;
            if (what == 0) {
                gpu = (int)((r >> 8) % 9);
                c = (int)((r >> 4) % 4);
                cordoned = (int)((r >> 12) & 1);
                report(n, "n1", gpu, cpus[c], cordoned);
            } else {
                replicas = 1 + (int)((r >> 8) % 10);
                CHECK(workload(e, "w", replicas, now) == US_OK);
                gone_releasing(e); /* the pods scaled away, deleted */
            }
            sv_nodes_retry(n);
            us_node_info x = node_info(e, "n1");
            double hold_gpu = fmax(gpu, ceil(x.used.gpu));
            int64_t hold_cpu = millis[c] > x.used.cpu ? millis[c] : x.used.cpu;
            CHECK(x.unschedulable == cordoned);
            CHECK(x.capacity.gpu == hold_gpu && x.capacity.cpu == hold_cpu);
            bool is_short = x.used.gpu > gpu || x.used.cpu > millis[c];
            CHECK(sv_nodes_short(n) == (is_short ? 1u : 0u));
            shorts += is_short;
            takes += !is_short;
            double used_gpu = x.used.gpu;
            int64_t used_cpu = x.used.cpu;
            CHECK(us_engine_run_cycle(e, now + 0.5, &err) == US_OK);
            x = node_info(e, "n1");
            /* nothing placed beyond what the node reports (no pod left
             * during the cycle: its room was not the engine's to give) */
            CHECK(x.used.gpu <= fmax(gpu, used_gpu) && x.used.cpu <= (millis[c] > used_cpu ? millis[c] : used_cpu));
            if (!cordoned && x.used.gpu < gpu && x.used.cpu + 1000 <= millis[c]) {
                /* room left for a pod: every replica wanted runs */
                int running = 0;
                us_pod_info p;
                for (size_t i = 0; i < us_engine_pod_count(e); i++)
                    running += us_engine_pod(e, i, &p) == US_OK && p.phase == US_PHASE_RUNNING;
                CHECK(running == replicas);
            }
            if (check_cur_failed) {
                printf("  seed %u step %d: reported gpu %d cpu %s cordoned %d\n", seed, step, gpu, cpus[c], cordoned);
                break;
            }
        }
        /* the sequence reached both cases */
        CHECK(shorts > 0 && takes > 0);
        sv_nodes_free(n);
        us_engine_destroy(e);
        if (check_cur_failed) return; /* the first sequence that fails is the one to read */
    }
}

int main(void) {
    RUN(a_node_below_its_pods_is_taken_raised_then_as_reported);
    RUN(fractional_pods_keep_the_devices_they_hold);
    RUN(node_updates_under_any_pods_keep_what_the_node_reports);
    return check_report();
}
