/*
 * test_orders.c — the indexes and batches that keep the API's calls and
 * the simulator's steps linear (issue 13) never change what they compute:
 *
 *   noise       a cluster built through the API one call at a time, and the
 *               same cluster built with, between those calls, nodes and
 *               workloads that come and go (tidy renumbers both arrays),
 *               resends, pods reported on them, and reads (which settle
 *               and fill caches): the same state, byte for byte, before
 *               and after each of three cycles, the same decisions; the
 *               state loads back as a scenario that writes identically;
 *               every read of a node says what the pods on it hold;
 *   reports     pod reports one after another (the pod index kept between
 *               them) answer and leave the state as the same reports each
 *               after another change (no index: scans);
 *   churn       a random stream of reports, scalings and removals (pods,
 *               the workload, a node that leaves and comes back) in a row (the
 *               pod index kept, what leaves only marked gone and tidied
 *               later) answers and decides as the same calls each after
 *               a change and a read (no index, tidied at once);
 *   durations   workloads whose durations run out in the same step complete
 *               in workload order, each change naming its pods.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "check.h"
#include "scenario.h"
#include "sim.h"
#include "statejson.h"
#include "understory.h"

/* ---- the cluster --------------------------------------------------------- */

enum { OP_QUEUE, OP_NODE, OP_WORKLOAD, OP_POD };

typedef struct op {
    int kind;
    const char *json;
} op;

#define BG_QUEUE                                                                            \
    "{\"name\": \"infra-bg\", \"resources\": {\"gpu\": {\"quota\": 0, \"over_quota_weight\": 0}," \
    " \"cpu\": {\"quota\": 0, \"over_quota_weight\": 0}, \"memory\": {\"quota\": 0, \"over_quota_weight\": 0}}}"
#define NODE(n, z) "{\"name\": \"" n "\", \"cpu\": 64, \"memory\": \"512Gi\", \"gpu\": 8, \"labels\": {\"zone\": \"" z "\"}}"

/* In call order; a workload comes before the nodes its DaemonSet reaches
 * and after others, so that both ways a node meets a DaemonSet occur. */
static const op cluster[] = {
    {OP_QUEUE, "{\"name\": \"research\"}"},
    {OP_QUEUE, "{\"name\": \"team-a\", \"parent\": \"research\", \"resources\": {\"gpu\": {\"quota\": 16}}}"},
    {OP_QUEUE, "{\"name\": \"team-b\", \"parent\": \"research\", \"resources\": {\"gpu\": {\"quota\": 8}}}"},
    {OP_QUEUE, BG_QUEUE},
    {OP_WORKLOAD, "{\"name\": \"node-check\", \"queue\": \"infra-bg\", \"controller\": \"daemonset\", "
                  "\"labels\": {\"kai.scheduler/background\": \"true\"}, \"node_selector\": {\"zone\": \"a\"}, "
                  "\"requests\": {\"cpu\": \"100m\"}}"},
    {OP_NODE, NODE("n0", "a")},
    {OP_NODE, NODE("n1", "b")},
    {OP_NODE, NODE("n2", "a")},
    {OP_NODE, NODE("n3", "a")},
    {OP_WORKLOAD, "{\"name\": \"burn\", \"queue\": \"infra-bg\", \"controller\": \"deployment\", \"replicas\": 12, "
                  "\"labels\": {\"kai.scheduler/background\": \"true\"}, \"requests\": {\"gpu\": 1}}"},
    {OP_NODE, NODE("n4", "b")},
    {OP_NODE, NODE("n5", "a")},
    {OP_WORKLOAD, "{\"name\": \"agent\", \"queue\": \"infra-bg\", \"controller\": \"daemonset\", "
                  "\"labels\": {\"kai.scheduler/background\": \"true\"}, \"requests\": {\"cpu\": \"50m\"}}"},
    {OP_NODE, NODE("n6", "b")},
    {OP_NODE, NODE("n7", "a")},
    {OP_POD, "{\"name\": \"burn-x1\", \"workload\": \"burn\", \"node\": \"n1\"}"},
    {OP_POD, "{\"name\": \"burn-x5\", \"workload\": \"burn\", \"node\": \"n5\"}"},
    {OP_POD, "{\"name\": \"node-check-n2\", \"node\": \"n2\"}"},
    {OP_POD, "{\"name\": \"agent-n6\", \"node\": \"n6\"}"},
    {OP_WORKLOAD, "{\"name\": \"train\", \"queue\": \"team-a\", \"controller\": \"job\", \"replicas\": 2, "
                  "\"min_member\": 2, \"requests\": {\"gpu\": 8}}"},
    {OP_WORKLOAD, "{\"name\": \"eval\", \"queue\": \"team-b\", \"replicas\": 3, \"requests\": {\"gpu\": 2}}"},
};
#define NOPS (sizeof cluster / sizeof *cluster)

/* What one pod of a workload requests, in milli-GPUs and millicores. */
static void request_of(const char *workload, int64_t *gpu, int64_t *cpu) {
    static const struct {
        const char *name;
        int64_t gpu, cpu;
    } t[] = {{"node-check", 0, 100}, {"burn", 1000, 0}, {"agent", 0, 50},
             {"train", 8000, 0},     {"eval", 2000, 0},   {"w", 1000, 0}, {"d", 0, 100}, {"s", 0, 200}};
    *gpu = *cpu = 0;
    if (workload[0] == 'y') *cpu = 100; /* the noise's workloads */
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (strcmp(t[i].name, workload) == 0) {
            *gpu = t[i].gpu;
            *cpu = t[i].cpu;
        }
}

static int apply(us_engine *e, const op *o, us_error *err) {
    switch (o->kind) {
    case OP_QUEUE: return us_engine_upsert_queue_json(e, o->json, err);
    case OP_NODE: return us_engine_upsert_node_json(e, o->json, err);
    case OP_WORKLOAD: return us_engine_upsert_workload_json(e, o->json, us_engine_time(e), err);
    default: return us_engine_upsert_pod_json(e, o->json, err);
    }
}

/* ---- noise ------------------------------------------------------------------ */

typedef struct noise {
    uint64_t rng;
    int made;             /* names given so far */
    char nodes[8][16];    /* decoy nodes in the cluster */
    int nnodes;
    char workloads[8][16];
    int nworkloads;
    size_t applied;       /* real calls made so far (resends pick among them) */
    bool ok;
} noise;

static unsigned roll(noise *z, unsigned n) {
    z->rng = z->rng * 6364136223846793005u + 1442695040888963407u;
    return (unsigned)(z->rng >> 33) % n;
}

static void must(noise *z, int rc, const us_error *err, const char *what) {
    if (rc == US_OK) return;
    fprintf(stderr, "  noise: %s: %s\n", what, err->message);
    z->ok = false;
}

/* Every node read says what the running and terminating pods on it hold. */
static bool reads_agree(us_engine *e) {
    size_t nn = us_engine_node_count(e), np = us_engine_pod_count(e);
    bool ok = true;
    for (size_t i = 0; i < nn; i++) {
        us_node_info ni;
        int64_t gpu = 0, cpu = 0;
        if (us_engine_node(e, i, &ni) != US_OK) {
            fprintf(stderr, "  node %zu of %zu: not read\n", i, nn);
            return false;
        }
        for (size_t k = 0; k < np; k++) {
            us_pod_info pi;
            int64_t g, c;
            us_engine_pod(e, k, &pi);
            if (!pi.node || strcmp(pi.node, ni.name) != 0 ||
                (pi.phase != US_PHASE_RUNNING && pi.phase != US_PHASE_RELEASING))
                continue;
            request_of(pi.workload, &g, &c);
            gpu += g;
            cpu += c;
        }
        if ((int64_t)(ni.used.gpu * 1000 + 0.5) != gpu || ni.used.cpu != cpu) {
            fprintf(stderr, "  node %s: read holds gpu %g cpu %lld, its pods %lld %lld\n", ni.name,
                    ni.used.gpu, (long long)ni.used.cpu, (long long)gpu, (long long)cpu);
            /* what was read, to tell which pod or node is off */
            for (size_t q = 0; q < nn; q++) {
                us_node_info x;
                us_engine_node(e, q, &x);
                fprintf(stderr, "   node %zu %s cpu %lld\n", q, x.name, (long long)x.used.cpu);
            }
            for (size_t k = 0; k < np; k++) {
                us_pod_info x;
                us_engine_pod(e, k, &x);
                fprintf(stderr, "   pod %s %s %s %s\n", x.name, x.workload, x.node ? x.node : "-", x.phase_name);
            }
            ok = false;
        }
    }
    return ok;
}

/* One call that leaves the real cluster as it was, or will once every
 * decoy is gone: a decoy node or workload comes or goes, a decoy pod runs
 * on a decoy node, a real object is sent again unchanged, or a read. */
static void one_noise(us_engine *e, noise *z) {
    us_error err;
    char json[256], name[16];
    switch (roll(z, 7)) {
    case 0: /* a decoy node; DaemonSets give it pods */
        if (z->nnodes == 8) break;
        snprintf(name, sizeof name, "x%d", z->made++);
        snprintf(json, sizeof json, NODE("%s", "a"), name);
        must(z, us_engine_upsert_node_json(e, json, &err), &err, json);
        strcpy(z->nodes[z->nnodes++], name);
        break;
    case 1: /* a decoy node goes (tidy renumbers the nodes after it) */
        if (!z->nnodes) break;
        {
            unsigned k = roll(z, (unsigned)z->nnodes);
            must(z, us_engine_remove_node(e, z->nodes[k], &err), &err, "remove decoy node");
            memmove(z->nodes[k], z->nodes[k + 1], (size_t)(z->nnodes - (int)k - 1) * sizeof z->nodes[0]);
            z->nnodes--;
        }
        break;
    case 2: /* a decoy workload, in a queue with room to spare */
        if (z->nworkloads == 8 || z->applied < 4) break; /* team-b exists */
        snprintf(name, sizeof name, "y%d", z->made++);
        snprintf(json, sizeof json, "{\"name\": \"%s\", \"queue\": \"team-b\", \"replicas\": 2, "
                 "\"termination_grace\": 0, \"requests\": {\"cpu\": \"100m\"}}", name);
        must(z, us_engine_upsert_workload_json(e, json, us_engine_time(e), &err), &err, json);
        strcpy(z->workloads[z->nworkloads++], name);
        break;
    case 3: /* a decoy workload goes (tidy renumbers the workloads after it) */
        if (!z->nworkloads) break;
        {
            unsigned k = roll(z, (unsigned)z->nworkloads);
            must(z, us_engine_remove_workload(e, z->workloads[k], us_engine_time(e), &err), &err, "remove decoy workload");
            memmove(z->workloads[k], z->workloads[k + 1],
                    (size_t)(z->nworkloads - (int)k - 1) * sizeof z->workloads[0]);
            z->nworkloads--;
        }
        break;
    case 4: /* a decoy workload's pod runs on a decoy node */
        if (!z->nworkloads || !z->nnodes) break;
        {
            const char *w = z->workloads[roll(z, (unsigned)z->nworkloads)];
            snprintf(json, sizeof json, "{\"name\": \"%s-r%d\", \"workload\": \"%s\", \"node\": \"%s\"}", w,
                     z->made++, w, z->nodes[roll(z, (unsigned)z->nnodes)]);
            /* refused when the workload has no pending pod left: fine */
            (void)us_engine_upsert_pod_json(e, json, &err);
        }
        break;
    case 5: /* a real object sent again, unchanged */
        if (!z->applied) break;
        {
            const op *o = &cluster[roll(z, (unsigned)z->applied)];
            if (o->kind != OP_POD) must(z, apply(e, o, &err), &err, o->json);
        }
        break;
    default: /* reads: settle, fill the caches */
        if (!reads_agree(e)) z->ok = false;
        break;
    }
}

static void noise_burst(us_engine *e, noise *z) {
    for (unsigned k = roll(z, 4); k > 0; k--) one_noise(e, z);
}

/* Every decoy gone, in an order of the noise's choosing. */
static void noise_clear(us_engine *e, noise *z) {
    us_error err;
    while (z->nnodes || z->nworkloads) {
        if (z->nworkloads && (!z->nnodes || roll(z, 2))) {
            must(z, us_engine_remove_workload(e, z->workloads[--z->nworkloads], us_engine_time(e), &err), &err, "clear workload");
        } else {
            must(z, us_engine_remove_node(e, z->nodes[--z->nnodes], &err), &err, "clear node");
        }
        /* more noise between removals (decoys it adds are removed too),
         * and reads: the caches follow */
        if (roll(z, 2)) one_noise(e, z);
        if (roll(z, 2) && !reads_agree(e)) z->ok = false;
    }
}

/* ---- comparing ------------------------------------------------------------- */

static char *state_of(us_engine *e) {
    char *s = NULL;
    us_error err;
    if (us_engine_state_json(e, &s, NULL, &err) != US_OK) return NULL;
    return s;
}

/* The state written, loaded back as a scenario, writes the same. */
static bool loads_back(const char *text) {
    us_scenario sc;
    us_err err = {0};
    cJSON *doc = NULL;
    char *out = NULL;
    bool same;
    memset(&sc, 0, sizeof sc);
    if (us_scenario_load_string(&sc, text, strlen(text), NULL, &err) < 0) {
        fprintf(stderr, "  the state does not load back: %s\n", err.msg);
        return false;
    }
    if (us_statejson_write(&sc.state, 0, "engine state", &doc) == 0) out = cJSON_Print(doc);
    same = out && strcmp(out, text) == 0;
    if (!same) fprintf(stderr, "  the state loaded back writes differently:\n--- first\n%s\n--- second\n%s\n", text, out ? out : "(null)");
    cJSON_Delete(doc);
    free(out);
    us_scenario_free(&sc);
    return same;
}

/* The last cycle's decisions, one line each. */
static char *decisions_of(us_engine *e) {
    size_t n = us_engine_decision_count(e), len = 0, cap = 256;
    char *s = malloc(cap);
    s[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        us_decision_info d;
        char line[512];
        us_engine_decision(e, i, &d);
        int k = snprintf(line, sizeof line, "%s %s %s %s %s\n", d.op_name, d.action ? d.action : "-", d.pod,
                         d.workload ? d.workload : "-", d.node ? d.node : "-");
        while (len + (size_t)k + 1 > cap) s = realloc(s, cap *= 2);
        memcpy(s + len, line, (size_t)k + 1);
        len += (size_t)k;
    }
    return s;
}

static bool same_text(const char *what, const char *a, const char *b) {
    if (a && b && strcmp(a, b) == 0) return true;
    fprintf(stderr, "  %s differ:\n--- plain\n%s\n--- with noise\n%s\n", what, a ? a : "(null)", b ? b : "(null)");
    return false;
}

/* The pods the last cycle bound, reported running where it put them (as
 * a control plane does once the binding lands). */
static bool report_bound(us_engine *e) {
    us_error err;
    size_t n = us_engine_decision_count(e);
    for (size_t i = 0; i < n; i++) {
        us_decision_info d;
        us_engine_decision(e, i, &d);
        if (d.op != US_DECISION_BIND) continue;
        us_pod_spec p = {d.pod, d.workload, d.node, NULL, 0};
        if (us_engine_upsert_pod(e, &p, &err) != US_OK) {
            fprintf(stderr, "  report %s on %s: %s\n", d.pod, d.node, err.message);
            return false;
        }
    }
    return true;
}

static bool run_both(us_engine *plain, us_engine *noisy, noise *z, uint64_t seed) {
    us_error err;
    bool ok = true;
    for (size_t i = 0; i < NOPS && ok; i++) {
        noise_burst(noisy, z);
        if (apply(plain, &cluster[i], &err) != US_OK || apply(noisy, &cluster[i], &err) != US_OK) {
            fprintf(stderr, "  seed %llu: %s: %s\n", (unsigned long long)seed, cluster[i].json, err.message);
            return false;
        }
        z->applied = i + 1;
        noise_burst(noisy, z);
    }
    for (int c = 0; c < 3 && ok && z->ok; c++) {
        noise_clear(noisy, z);
        char *a = state_of(plain), *b = state_of(noisy);
        ok = same_text("states before the cycle", a, b) && loads_back(a);
        free(a);
        free(b);
        if (!ok) break;
        if (us_engine_run_cycle(plain, 10.0 * c, &err) != US_OK || us_engine_run_cycle(noisy, 10.0 * c, &err) != US_OK) {
            fprintf(stderr, "  cycle: %s\n", err.message);
            return false;
        }
        a = decisions_of(plain);
        b = decisions_of(noisy);
        ok = same_text("decisions", a, b);
        if (ok && c == 0 && !a[0]) {
            fprintf(stderr, "  the first cycle decided nothing\n");
            ok = false;
        }
        free(a);
        free(b);
        if (!ok) break;
        noise_burst(noisy, z);
        ok = report_bound(plain) && report_bound(noisy);
        noise_burst(noisy, z);
        ok = ok && reads_agree(plain);
    }
    noise_clear(noisy, z);
    if (ok && z->ok) {
        char *a = state_of(plain), *b = state_of(noisy);
        ok = same_text("final states", a, b) && reads_agree(noisy);
        free(a);
        free(b);
    }
    return ok && z->ok;
}

TEST(same_cluster_with_noise_between_calls) {
    int failed = 0;
    for (uint64_t seed = 1; seed <= 40 && failed < 3; seed++) {
        us_engine *plain = NULL, *noisy = NULL;
        us_error err;
        noise z;
        memset(&z, 0, sizeof z);
        z.rng = seed;
        z.ok = true;
        CHECK(us_engine_create(NULL, &plain, &err) == US_OK && us_engine_create(NULL, &noisy, &err) == US_OK);
        if (plain && noisy && !run_both(plain, noisy, &z, seed)) {
            fprintf(stderr, "  seed %llu: the noisy engine differs\n", (unsigned long long)seed);
            failed++;
        }
        us_engine_destroy(plain);
        us_engine_destroy(noisy);
    }
    CHECK(failed == 0);
}

/* ---- pod reports in a row ---------------------------------------------------- */

static const char *const reports[] = {
    "{\"name\": \"w-a0\", \"workload\": \"w\", \"node\": \"n0\"}",
    "{\"name\": \"w-a1\", \"workload\": \"w\", \"node\": \"n0\"}",
    "{\"name\": \"w-a2\", \"workload\": \"w\", \"node\": \"n0\"}",
    "{\"name\": \"w-a3\", \"workload\": \"w\", \"node\": \"n0\"}",
    "{\"name\": \"w-a4\", \"workload\": \"w\", \"node\": \"n0\"}",
    "{\"name\": \"w-a5\", \"workload\": \"w\", \"node\": \"n0\"}",
    "{\"name\": \"w-a6\", \"workload\": \"w\", \"node\": \"n0\"}",
    "{\"name\": \"w-a7\", \"workload\": \"w\", \"node\": \"n0\"}",
    "{\"name\": \"w-a8\", \"workload\": \"w\", \"node\": \"n0\"}",   /* n0 is full */
    "{\"name\": \"d-n0\", \"node\": \"n0\"}",                          /* its DaemonSet pod */
    "{\"name\": \"w-p\", \"workload\": \"w\"}",                         /* pending: takes a place's name */
    "{\"name\": \"w-p\", \"node\": \"n1\"}",
    "{\"name\": \"w-a0\", \"node\": \"n1\"}",                          /* moves: room on n0 */
    "{\"name\": \"w-a8\", \"workload\": \"w\", \"node\": \"n0\"}",
    "{\"name\": \"w-q\", \"workload\": \"w\", \"pin\": \"n1\"}",
    "{\"name\": \"w-q\", \"workload\": \"w\", \"node\": \"n0\"}",   /* n0 full again */
    "{\"name\": \"w-q\", \"workload\": \"w\", \"node\": \"n1\", \"pin\": \"n1\"}",
    "{\"name\": \"w-t\", \"workload\": \"w\", \"node\": \"n1\", \"state\": \"releasing\"}",
    "{\"name\": \"w-b0\", \"workload\": \"w\", \"node\": \"n1\"}",
    "{\"name\": \"w-b1\", \"workload\": \"w\", \"node\": \"n1\"}",
    "{\"name\": \"w-b2\", \"workload\": \"w\", \"node\": \"n1\"}",
    "{\"name\": \"w-b3\", \"workload\": \"w\", \"node\": \"n1\"}",
    "{\"name\": \"d-n1\", \"node\": \"n1\"}",
    "{\"name\": \"w-b4\", \"workload\": \"w\", \"node\": \"n1\"}",   /* n1 full: w-t terminates there */
    "{\"name\": \"w-b5\", \"workload\": \"w\"}",
    "{\"name\": \"w-b6\", \"workload\": \"w\"}",                        /* no place left */
};

static us_engine *reports_engine(void) {
    us_engine *e = NULL;
    us_error err;
    if (us_engine_create(NULL, &e, &err) != US_OK) return NULL;
    if (us_engine_upsert_queue_json(e, "{\"name\": \"q\"}", &err) != US_OK ||
        us_engine_upsert_node_json(e, NODE("n0", "a"), &err) != US_OK ||
        us_engine_upsert_node_json(e, NODE("n1", "a"), &err) != US_OK ||
        us_engine_upsert_workload_json(e, "{\"name\": \"d\", \"queue\": \"q\", \"controller\": \"daemonset\", "
                                          "\"requests\": {\"cpu\": \"100m\"}}", 0, &err) != US_OK ||
        us_engine_upsert_workload_json(e, "{\"name\": \"w\", \"queue\": \"q\", \"replicas\": 16, "
                                          "\"requests\": {\"gpu\": 1}}", 0, &err) != US_OK) {
        us_engine_destroy(e);
        return NULL;
    }
    return e;
}

TEST(pod_reports_in_a_row_agree_with_reports_apart) {
    us_engine *row = reports_engine(), *apart = reports_engine();
    CHECK(row && apart);
    if (!row || !apart) goto out;
    for (size_t i = 0; i < sizeof reports / sizeof *reports; i++) {
        us_error ea, eb;
        /* a change between reports: the index is built anew (or not) */
        CHECK(us_engine_load_policies(apart, NULL, &eb) == US_OK);
        int ra = us_engine_upsert_pod_json(row, reports[i], &ea);
        int rb = us_engine_upsert_pod_json(apart, reports[i], &eb);
        if (ra != rb || (ra != US_OK && strcmp(ea.message, eb.message) != 0)) {
            fprintf(stderr, "  %s: in a row %d (%s), apart %d (%s)\n", reports[i], ra, ra ? ea.message : "",
                    rb, rb ? eb.message : "");
            CHECK(0);
        }
        if (!reads_agree(row)) CHECK(0);
    }
    char *a = state_of(row), *b = state_of(apart);
    CHECK(same_text("states", a, b));
    CHECK(strstr(a, "\"w-a8\"") && strstr(a, "\"w-q\"") && strstr(a, "\"d-n1\""));
    free(a);
    free(b);
out:
    us_engine_destroy(row);
    us_engine_destroy(apart);
}

/* A control plane's pod stream, random: pods reported running, pending,
 * pinned or terminating, and removed, in any order.  In a row the pod
 * index is kept across reports and removals (each removal only marks its
 * pod gone, tidied much later); apart, a change and a read between calls
 * drop the index and tidy at once.  Every call must answer the same, and
 * the states must be the same after each cycle and at the end. */
enum { CHURN_REPORT, CHURN_REMOVE, CHURN_END_WORKLOAD, CHURN_NODE, CHURN_SCALE, CHURN_RELABEL };

/* The next call of the stream in json (a pod's JSON, a pod's name, or how
 * the workload ends), its kind in *kind. */
static const char *churn_op(noise *z, char *json, size_t len, int *kind) {
    static const char *const nodes[] = {"n0", "n1", "n2"};
    char name[16];
    unsigned r = roll(z, 50), k = r / 4, who = roll(z, 14);
    const char *node = nodes[roll(z, 3)];
    *kind = CHURN_REPORT;
    if (who < 12) snprintf(name, sizeof name, "w-%c%u", "ab"[roll(z, 2)], who);
    else snprintf(name, sizeof name, "d-%s", node);
    if (r >= 48) {
        /* a node sent again in the other zone: the zone-a DaemonSet follows */
        *kind = CHURN_RELABEL;
        snprintf(json, len, NODE("%s", "%s"), node, who % 2 ? "a" : "b");
    } else if (r >= 44) {
        /* the workload scaled: pods added or stopped */
        *kind = CHURN_SCALE;
        snprintf(json, len, "{\"name\": \"w\", \"queue\": \"q\", \"replicas\": %u, \"requests\": {\"gpu\": 1}}",
                 6 + roll(z, 20));
    } else if (r >= 42) {
        /* a node leaves (its pods lost) and comes back */
        *kind = CHURN_NODE;
        snprintf(json, len, "%s", node);
    } else if (r >= 40) {
        /* deleted or completed, then sent again (its pods recreated) */
        *kind = CHURN_END_WORKLOAD;
        snprintf(json, len, "%s", who % 2 ? "delete" : "complete");
    } else if (k < 2) {
        *kind = CHURN_REMOVE;
        snprintf(json, len, "%s", name);
    } else if (k < 4) {
        snprintf(json, len, "{\"name\": \"%s\", \"workload\": \"%s\", \"node\": \"%s\", "
                 "\"state\": \"releasing\"}", name, who < 12 ? "w" : "d", node);
    } else if (k < 5) {
        snprintf(json, len, "{\"name\": \"%s\", \"workload\": \"%s\"}", name, who < 12 ? "w" : "d");
    } else if (k < 6) {
        snprintf(json, len, "{\"name\": \"%s\", \"workload\": \"%s\", \"pin\": \"%s\"}", name,
                 who < 12 ? "w" : "d", node);
    } else {
        snprintf(json, len, "{\"name\": \"%s\", \"workload\": \"%s\", \"node\": \"%s\"}", name,
                 who < 12 ? "w" : "d", node);
    }
    return json;
}

typedef struct churn_counts {
    size_t taken, removed, refused, terminating, ended, nodes, scaled, relabelled, named_reads;
} churn_counts;

#define CHURN_W "{\"name\": \"w\", \"queue\": \"q\", \"replicas\": 16, \"requests\": {\"gpu\": 1}}"

/* One call of the stream on e. */
static int churn_call(us_engine *e, int kind, const char *json, double now, us_error *err) {
    char node[128];
    if (kind == CHURN_REMOVE) return us_engine_remove_pod(e, json, err);
    if (kind == CHURN_SCALE) return us_engine_upsert_workload_json(e, json, now, err);
    if (kind == CHURN_RELABEL) return us_engine_upsert_node_json(e, json, err);
    if (kind == CHURN_NODE) {
        int rc = us_engine_remove_node(e, json, err);
        snprintf(node, sizeof node, NODE("%s", "a"), json);
        return rc != US_OK ? rc : us_engine_upsert_node_json(e, node, err);
    }
    if (kind == CHURN_REPORT) return us_engine_upsert_pod_json(e, json, err);
    int rc = strcmp(json, "delete") == 0 ? us_engine_remove_workload(e, "w", now, err)
                                         : us_engine_complete_workload(e, "w", now, err);
    return rc != US_OK ? rc : us_engine_upsert_workload_json(e, CHURN_W, now, err);
}

/* The first upto calls of seed's stream on both engines (a cycle after
 * every 40th); 0 when every call answered alike, else -1 (said).  The
 * states are the caller's to free. */
static int churn_run(int seed, int upto, churn_counts *c, char **sa, char **sb) {
    us_engine *row = reports_engine(), *apart = reports_engine();
    us_error ea, eb;
    noise z = {.rng = (uint64_t)seed * 0x9e3779b97f4a7c15u, .ok = true};
    int rc = 0;
    *sa = *sb = NULL;
    if (!row || !apart) rc = -1;
    /* a DaemonSet of zone a beside reports_engine's, so that nodes changing
     * zone gain and lose its pods */
    static const char zoned[] = "{\"name\": \"s\", \"queue\": \"q\", \"controller\": \"daemonset\", "
                                "\"node_selector\": {\"zone\": \"a\"}, \"requests\": {\"cpu\": \"200m\"}}";
    if (rc == 0 && (us_engine_upsert_node_json(row, NODE("n2", "a"), &ea) != US_OK ||
                    us_engine_upsert_node_json(apart, NODE("n2", "a"), &eb) != US_OK ||
                    us_engine_upsert_workload_json(row, zoned, 0, &ea) != US_OK ||
                    us_engine_upsert_workload_json(apart, zoned, 0, &eb) != US_OK))
        rc = -1;
    for (int i = 0; i < upto && rc == 0; i++) {
        char json[256];
        int kind;
        churn_op(&z, json, sizeof json, &kind);
        /* apart: the index dropped and everything tidied before each call */
        if (us_engine_load_policies(apart, NULL, &eb) != US_OK) {
            fprintf(stderr, "  seed %d call %d: no policy: %s\n", seed, i, eb.message);
            rc = -1;
        }
        (void)us_engine_pod_count(apart);
        int ra = churn_call(row, kind, json, i, &ea), rb = churn_call(apart, kind, json, i, &eb);
        if (ra != rb || (ra != US_OK && strcmp(ea.message, eb.message) != 0)) {
            fprintf(stderr, "  seed %d call %d %s: in a row %d (%s), apart %d (%s)\n", seed, i, json, ra,
                    ra ? ea.message : "", rb, rb ? eb.message : "");
            rc = -1;
        }
        c->taken += ra == US_OK && kind == CHURN_REPORT;
        c->removed += ra == US_OK && kind == CHURN_REMOVE;
        c->ended += ra == US_OK && kind == CHURN_END_WORKLOAD;
        c->nodes += ra == US_OK && kind == CHURN_NODE;
        c->scaled += ra == US_OK && kind == CHURN_SCALE;
        c->relabelled += ra == US_OK && kind == CHURN_RELABEL;
        /* now and then a node read back by name (from the pod index in a
         * row; from every pod's sum apart) says the same */
        if (i % 7 == 3) {
            static const char *const names[] = {"n0", "n1", "n2"};
            us_node_info na, nb;
            const char *nn = names[i % 3];
            int ga = us_engine_node_named(row, nn, &na), gb = us_engine_node_named(apart, nn, &nb);
            if (ga != gb || (ga == US_OK && (na.used.gpu != nb.used.gpu || na.used.cpu != nb.used.cpu ||
                                             na.used.memory != nb.used.memory || na.capacity.cpu != nb.capacity.cpu))) {
                fprintf(stderr, "  seed %d call %d: node %s read by name: %d %g/%lld, apart %d %g/%lld\n", seed, i,
                        nn, ga, na.used.gpu, (long long)na.used.cpu, gb, nb.used.gpu, (long long)nb.used.cpu);
                rc = -1;
            }
            c->named_reads += ga == US_OK;
        }
        c->refused += ra != US_OK;
        c->terminating += ra == US_OK && strstr(json, "releasing") != NULL;
        /* a cycle now and then: what the pods left behind is decided alike */
        if (i % 40 == 39 && (us_engine_run_cycle(row, i + 0.5, &ea) != US_OK ||
                             us_engine_run_cycle(apart, i + 0.5, &eb) != US_OK)) {
            fprintf(stderr, "  seed %d: a cycle after call %d failed: %s | %s\n", seed, i, ea.message,
                    eb.message);
            rc = -1;
        }
    }
    if (rc == 0 && !reads_agree(row)) rc = -1;
    *sa = row ? state_of(row) : NULL;
    *sb = apart ? state_of(apart) : NULL;
    us_engine_destroy(row);
    us_engine_destroy(apart);
    return rc;
}

TEST(pod_churn_in_a_row_agrees_with_calls_apart) {
    int failed = 0, calls = 120;
    churn_counts c = {0}, ignored;
    for (int seed = 1; seed <= 200 && !failed; seed++) {
        char *a, *b;
        failed = churn_run(seed, calls, &c, &a, &b) < 0 || !a || !b || strcmp(a, b) != 0 || !loads_back(a);
        free(a);
        free(b);
        if (!failed) continue;
        /* the first call after which the states part (reads between calls
         * would tidy the row engine, so each length is run anew) */
        for (int upto = 1; upto <= calls; upto++) {
            int rc = churn_run(seed, upto, &ignored, &a, &b);
            bool differ = rc < 0 || !a || !b || strcmp(a, b) != 0;
            if (differ) {
                fprintf(stderr, "  seed %d: the states part after call %d\n", seed, upto - 1);
                same_text("states", a, b);
            }
            free(a);
            free(b);
            if (differ) break;
        }
    }
    CHECK(failed == 0);
    /* the stream was a real one: reports taken, pods removed and terminating, some refused */
    CHECK(c.taken > 1000 && c.removed > 300 && c.terminating > 300 && c.refused > 100 && c.ended > 200 &&
          c.nodes > 200 && c.scaled > 200 && c.relabelled > 200 && c.named_reads > 2000);
}

/* A report refused for want of room leaves the pod as it was, its pin
 * included (fuzz_api found a running pod left pinned to the node it was
 * refused on: a state that does not load back). */
TEST(refused_pod_report_changes_nothing) {
    us_engine *e = reports_engine();
    us_error err;
    char *before = NULL, *after = NULL;
    CHECK(e != NULL);
    if (!e) return;
    for (int i = 0; i < 8; i++) {
        char json[128];
        snprintf(json, sizeof json, "{\"name\": \"w-%c%d\", \"workload\": \"w\", \"node\": \"n%d\"}",
                 i < 4 ? 'a' : 'b', i, i < 4 ? 0 : 1);
        CHECK(us_engine_upsert_pod_json(e, json, &err) == US_OK);
    }
    for (int i = 0; i < 4; i++) {
        char json[128];
        snprintf(json, sizeof json, "{\"name\": \"w-c%d\", \"workload\": \"w\", \"node\": \"n1\"}", i);
        CHECK(us_engine_upsert_pod_json(e, json, &err) == US_OK); /* n1 is full */
    }
    before = state_of(e);
    CHECK(us_engine_upsert_pod_json(e, "{\"name\": \"w-a0\", \"node\": \"n1\", \"pin\": \"n1\"}", &err) == US_EINVAL);
    CHECK_HAS(err.message, "not enough gpu");
    after = state_of(e);
    CHECK(same_text("states", before, after) && loads_back(after));
    free(before);
    free(after);
    us_engine_destroy(e);
}

/* ---- durations ------------------------------------------------------------- */

TEST(durations_ending_together_complete_in_workload_order) {
    static const char doc[] =
        "{\"name\": \"durations\", \"cycle_interval\": 10, \"horizon\": 20,"
        " \"nodes\": [{\"name\": \"n0\", \"cpu\": 64, \"memory\": \"512Gi\", \"gpu\": 8}],"
        " \"queues\": [{\"name\": \"q\"}],"
        " \"workloads\": ["
        "  {\"name\": \"w-a\", \"queue\": \"q\", \"replicas\": 2, \"duration\": 10, \"requests\": {\"gpu\": 1}},"
        "  {\"name\": \"w-b\", \"queue\": \"q\", \"duration\": 20, \"requests\": {\"gpu\": 1}},"
        "  {\"name\": \"w-c\", \"queue\": \"q\", \"replicas\": 3, \"duration\": 10, \"requests\": {\"gpu\": 1}},"
        "  {\"name\": \"w-d\", \"queue\": \"q\", \"requests\": {\"gpu\": 1}}]}";
    us_scenario sc;
    us_sim_result res;
    us_err err = {0};
    CHECK(us_scenario_load_string(&sc, doc, sizeof doc - 1, NULL, &err) == 0);
    CHECK(us_sim_run(&sc, NULL, NULL, &res, &err) == 0);
    CHECK(res.ncycles == 3);
    if (res.ncycles == 3) {
        const us_sim_cycle *c = &res.cycles[1];
        static const char *const want[][4] = {{"w-a", "w-a-0", "w-a-1", NULL}, {"w-c", "w-c-0", "w-c-1", "w-c-2"}};
        CHECK(c->nchanges == 2);
        for (size_t k = 0; k < 2 && k < c->nchanges; k++) {
            const us_change *ch = &c->changes[k];
            CHECK(ch->action == US_CH_COMPLETE && ch->by_duration);
            CHECK_STR(ch->object, want[k][0]);
            CHECK(ch->npods == (want[k][3] ? 3u : 2u));
            for (size_t i = 0; i < ch->npods && i < 3; i++) CHECK_STR(ch->pods[i], want[k][i + 1]);
        }
        c = &res.cycles[2];
        CHECK(c->nchanges == 1 && c->nchanges && strcmp(c->changes[0].object, "w-b") == 0);
        us_sim_result_free(&res);
    }
    us_scenario_free(&sc);
}

/* ---- a queue tree built one queue at a time ------------------------------
 * A new queue derives only its own depth and leaf flag and its parent's;
 * a queue sent again unchanged derives nothing.  Random trees built that
 * way, with queues moved, changed, sent again and removed, must keep what
 * the invariant checker recomputes from the parents (queue-tree), cycle
 * after cycle, with workloads in the leaves. */
TEST(queue_tree_built_queue_by_queue_derives_as_a_whole) {
    size_t added = 0, resent = 0, moved = 0, removed = 0, refused = 0, cycles = 0;
    for (int seed = 1; seed <= 60; seed++) {
        us_engine_options o;
        us_engine *e = NULL;
        us_error err;
        noise z = {.rng = (uint64_t)seed * 0x9e3779b97f4a7c15u, .ok = true};
        us_engine_options_init(&o);
        o.check_invariants = 1;
        CHECK(us_engine_create(&o, &e, &err) == US_OK);
        if (!e) break;
        CHECK(us_engine_upsert_node_json(e, NODE("n0", "a"), &err) == US_OK);
        for (int i = 0; i < 200; i++) {
            char json[256], name[16], parent[16];
            unsigned k = roll(&z, 10);
            snprintf(name, sizeof name, "q%u", roll(&z, 24));
            snprintf(parent, sizeof parent, "q%u", roll(&z, 24));
            int rc;
            if (k < 6) {
                /* new, or sent again (the same, or changed: parent, quota) */
                if (roll(&z, 3) == 0)
                    snprintf(json, sizeof json, "{\"name\": \"%s\", \"resources\": {\"gpu\": {\"quota\": %u}}}", name,
                             roll(&z, 3));
                else
                    snprintf(json, sizeof json, "{\"name\": \"%s\", \"parent\": \"%s\", \"resources\": {\"gpu\": "
                             "{\"quota\": %u}}}", name, parent, roll(&z, 3));
                size_t before = us_engine_queue_count(e);
                rc = us_engine_upsert_queue_json(e, json, &err);
                added += rc == US_OK && us_engine_queue_count(e) > before;
                resent += rc == US_OK && us_engine_queue_count(e) == before;
                moved += rc == US_OK && us_engine_queue_count(e) == before && strstr(json, "parent");
                /* the same again: nothing changes */
                if (rc == US_OK) CHECK(us_engine_upsert_queue_json(e, json, &err) == US_OK);
            } else if (k < 8) {
                rc = us_engine_remove_queue(e, name, &err);
                removed += rc == US_OK;
            } else {
                /* a workload in it (refused unless it is a leaf) and a cycle */
                char w[32];
                snprintf(w, sizeof w, "w%d", i);
                snprintf(json, sizeof json, "{\"name\": \"%s\", \"queue\": \"%s\", \"requests\": {\"gpu\": 1}}", w, name);
                rc = us_engine_upsert_workload_json(e, json, i, &err);
                if (us_engine_run_cycle(e, i, &err) != US_OK) {
                    fprintf(stderr, "  seed %d op %d: %s\n", seed, i, err.message);
                    CHECK(0);
                    break;
                }
                cycles++;
            }
            refused += rc != US_OK;
        }
        us_engine_destroy(e);
    }
    /* trees were built, changed and cut down, some calls refused (unknown
     * parents, cycles, parents holding workloads, queues in use) */
    fprintf(stderr, "  queues: %zu added, %zu sent again (%zu with a parent), %zu removed, %zu refused, %zu cycles\n",
            added, resent, moved, removed, refused, cycles);
    CHECK(added > 1000 && resent > 500 && moved > 200 && removed > 100 && refused > 500 && cycles > 1000);
}

int main(void) {
    RUN(same_cluster_with_noise_between_calls);
    RUN(pod_reports_in_a_row_agree_with_reports_apart);
    RUN(pod_churn_in_a_row_agrees_with_calls_apart);
    RUN(refused_pod_report_changes_nothing);
    RUN(durations_ending_together_complete_in_workload_order);
    RUN(queue_tree_built_queue_by_queue_derives_as_a_whole);
    return check_report();
}
