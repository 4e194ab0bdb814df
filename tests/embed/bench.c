/*
 * bench.c — what the embedding API's calls cost a control plane, at a size
 * and at twice that size (the ratio shows whether a call's cost grows with
 * the cluster).  `make bench-embed` builds and runs it:
 *
 *   build/release/bench/embed-bench [NODES]      (default 1000)
 *
 * Per size: NODES 8-GPU nodes upserted, then resent unchanged; 5 x NODES
 * small workloads upserted, then resent unchanged (a control plane
 * resyncing); a background burn-in of one pod per GPU; cycles in which
 * training evicts burn-in pods, which the control plane then reports gone
 * one by one, and reports its pipelined pods running.  Wall-clock times, so figures vary by machine; the ratios
 * are the point.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "understory.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void must(int rc, const us_error *err) {
    if (rc == US_OK) return;
    fprintf(stderr, "embed-bench: %s\n", err->message);
    exit(1);
}

typedef struct costs {
    double node_us, node_resend_us, upsert_us, resend_us, cycle_ms, gone_us, running_us;
} costs;

static costs run(int nodes) {
    us_engine *e;
    us_error err;
    costs c = {0};
    int ngone = 0, nrun = 0;
    char name[64];
    must(us_engine_create(NULL, &e, &err), &err);
    static const us_label zone[] = {{"topology.kubernetes.io/zone", "a"}, {"node-class", "gpu-8"}};
    for (int pass = 0; pass < 2; pass++) {
        double t = now_s();
        for (int i = 0; i < nodes; i++) {
            us_node_spec n = {0};
            snprintf(name, sizeof name, "n%d", i);
            n.name = name;
            n.capacity = (us_resources){8, 64000, 1LL << 39};
            n.labels = zone;
            n.nlabels = 2;
            must(us_engine_upsert_node(e, &n, &err), &err);
        }
        double us = (now_s() - t) * 1e6 / nodes;
        if (pass == 0) c.node_us = us;
        else c.node_resend_us = us;
    }
    us_queue_spec q;
    us_queue_spec_init(&q);
    q.name = "q";
    q.quota.gpu = 8.0 * nodes;
    must(us_engine_upsert_queue(e, &q, &err), &err);
    must(us_engine_upsert_queue_json(e, "{\"name\": \"bg\", \"resources\": {"
                                        "\"gpu\": {\"quota\": 0, \"over_quota_weight\": 0},"
                                        "\"cpu\": {\"quota\": 0, \"over_quota_weight\": 0},"
                                        "\"memory\": {\"quota\": 0, \"over_quota_weight\": 0}}}",
                                     &err), &err);
    int nw = 5 * nodes;
    for (int pass = 0; pass < 2; pass++) {
        double t = now_s();
        for (int i = 0; i < nw; i++) {
            us_workload_spec w;
            us_workload_spec_init(&w);
            snprintf(name, sizeof name, "w%d", i);
            w.name = name;
            w.queue = "q";
            w.controller = US_CONTROLLER_DEPLOYMENT;
            w.replicas = 1;
            w.requests.cpu = 100;
            must(us_engine_upsert_workload(e, &w, 0, &err), &err);
        }
        (void)us_engine_pod_count(e); /* the pods exist now */
        double us = (now_s() - t) * 1e6 / nw;
        if (pass == 0) c.upsert_us = us;
        else c.resend_us = us;
    }
    {
        char js[256];
        snprintf(js, sizeof js,
                 "{\"name\": \"burn\", \"queue\": \"bg\", \"controller\": \"deployment\", "
                 "\"replicas\": %d, \"labels\": {\"kai.scheduler/background\": \"true\"}, "
                 "\"requests\": {\"gpu\": 1}, \"termination_grace\": 5}", 8 * nodes);
        must(us_engine_upsert_workload_json(e, js, 0, &err), &err);
    }
    must(us_engine_run_cycle(e, 0, &err), &err);
    double tcycle = 0, tgone = 0, trun = 0;
    for (int k = 1; k <= 3; k++) {
        char js[128];
        snprintf(js, sizeof js, "{\"name\": \"train%d\", \"queue\": \"q\", \"replicas\": %d, "
                                "\"requests\": {\"gpu\": 8}}", k, nodes / 10);
        must(us_engine_upsert_workload_json(e, js, 10.0 * k, &err), &err);
        double t0 = now_s();
        must(us_engine_run_cycle(e, 10.0 * k, &err), &err);
        double t1 = now_s();
        tcycle += t1 - t0;
        for (size_t i = 0; i < us_engine_decision_count(e); i++) {
            us_decision_info d;
            us_engine_decision(e, i, &d);
            if (d.op != US_DECISION_EVICT) continue;
            must(us_engine_remove_pod(e, d.pod, &err), &err);
            ngone++;
        }
        double t2 = now_s();
        tgone += t2 - t1;
        for (size_t i = 0; i < us_engine_decision_count(e); i++) {
            us_decision_info d;
            us_engine_decision(e, i, &d);
            if (d.op != US_DECISION_PIPELINE) continue;
            us_pod_spec p = {.name = d.pod, .workload = NULL, .node = d.node};
            must(us_engine_upsert_pod(e, &p, &err), &err);
            nrun++;
        }
        trun += now_s() - t2;
    }
    c.cycle_ms = tcycle * 1e3 / 3;
    c.gone_us = ngone ? tgone * 1e6 / ngone : 0;
    c.running_us = nrun ? trun * 1e6 / nrun : 0;
    us_engine_destroy(e);
    return c;
}

int main(int argc, char **argv) {
    int nodes = argc > 1 ? atoi(argv[1]) : 1000;
    if (nodes < 10) nodes = 10;
    costs a = run(nodes), b = run(2 * nodes);
    printf("%-34s %12s %12s %8s\n", "per call", "1x", "2x", "2x/1x");
    printf("%-34s %10.1fus %10.1fus %8.2f\n", "upsert_node (new, two labels)", a.node_us, b.node_us, b.node_us / a.node_us);
    printf("%-34s %10.1fus %10.1fus %8.2f\n", "upsert_node (resent unchanged)", a.node_resend_us, b.node_resend_us, b.node_resend_us / a.node_resend_us);
    printf("%-34s %10.1fus %10.1fus %8.2f\n", "upsert_workload (new)", a.upsert_us, b.upsert_us, b.upsert_us / a.upsert_us);
    printf("%-34s %10.1fus %10.1fus %8.2f\n", "upsert_workload (resent unchanged)", a.resend_us, b.resend_us, b.resend_us / a.resend_us);
    printf("%-34s %10.1fus %10.1fus %8.2f\n", "remove_pod (an evicted pod gone)", a.gone_us, b.gone_us, b.gone_us / a.gone_us);
    printf("%-34s %10.1fus %10.1fus %8.2f\n", "upsert_pod (a pipelined pod bound)", a.running_us, b.running_us, b.running_us / a.running_us);
    printf("%-34s %10.2fms %10.2fms %8.2f\n", "run_cycle (training arrives)", a.cycle_ms, b.cycle_ms, b.cycle_ms / a.cycle_ms);
    printf("(1x: %d nodes, %d workloads, %d burn-in pods)\n", nodes, 5 * nodes, 8 * nodes);
    return 0;
}
