/*
 * bench.c — the cycle benchmark (make bench; docs/benchmarks.md).
 *
 * Generates a synthetic cluster deterministically from a seed, writes it as
 * a scenario document, loads it the way the CLI does, submits everything and
 * times full scheduling cycles, phase by phase; then changes 1% of the pods
 * (completes running AI deployments and submits new ones, half and half)
 * and times the cycle that follows, the incremental cycle.  Then the
 * command line's path on the same document, written to a file: load it,
 * simulate its one cycle, write the output document, each timed, with the
 * peak memory of the whole.  Each measurement runs in a child process so
 * that its peak memory is its own.
 * The same input is run with the default Lua policies and with the same
 * policies compiled in C, side by side, so the figures that matter are
 * ratios.  Each of those runs twice more on the same input: with cycles
 * that reuse what the last one left (incremental, the default) and with
 * cycles that recompute everything (--full-cycles), for the +1% cycle of
 * each.  Cycles are timed in CPU seconds of the thread (us_cycle_profile).
 *
 *   understory-bench [--nodes N[,N...]] [--seed S] [--policies DIR]
 *                    [--shape plain|real|plain,real]
 *                                     (node labels: a zone only, or as real
 *                                     nodes carry them: a unique hostname,
 *                                     an instance type and a zone; default
 *                                     both)
 *                    [--cycles K]     (K cycles, 10 s apart; default 2)
 *                    [--repeat R]     (best of R runs each; default 3)
 *                    [--write FILE]   (write the scenario for N nodes, no run)
 *                    [--scale N]      (size of the paths that must stay
 *                                      linear; default 1000000, 0: skip)
 *                    [--perf-fifo CTL,ACK] (perf record's control FIFOs:
 *                                      record only the C run's +1% cycle)
 *                    [--perf-cycle lua|c,first|change|quiet|api] (which run's cycle
 *                                      --perf-fifo records; default c,change;
 *                                      api: the C API rows' last round)
 *
 * The cluster, for N nodes of 8 GPUs (128 cores, 1 TiB):
 *   - 50 leaf queues in a three-level tree (2 orgs x 5 departments x 5 teams)
 *     and a background queue with quota 0;
 *   - running AI pods on about 70% of the GPUs: 35% of the nodes hold one
 *     pod of a 4-pod 8-GPU gang, the rest 4 or 5 single-GPU pods of 20-pod
 *     deployments; one CPU-only AI pod (a data loader) on every node;
 *   - three background DaemonSets (a pod on every node) and background
 *     single-GPU burn-in pods in the gaps (2 on every node with room);
 *   - a backlog of pending AI work: N*4/5 single-GPU pods in 50-pod
 *     deployments and N/40 gangs of eight 8-GPU pods, over the 50 queues;
 *   - N/400 + 1 deployments of 20 single-GPU pods held back (submit_at far
 *     ahead) for the 1% change.
 * At 10,000 nodes that is about 105,000 pods, 10,000 of them pending AI.
 */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apiprofile.h"
#include "cache.h"
#include "cycle.h"
#include "cyclecache.h"
#include "jsonsplit.h"
#include "lifecycle.h"
#include "output.h"
#include "policy.h"
#include "scenario.h"
#include "sim.h"
#include "understory.h"
#include "queues.h"
#include "workloads.h"

/* ---- a growing text buffer ---------------------------------------------- */

typedef struct buf {
    char *s;
    size_t n, cap;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) abort();
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        b->cap = b->cap ? b->cap * 2 : 1 << 20;
        b->s = realloc(b->s, b->cap);
        if (!b->s) {
            fprintf(stderr, "understory-bench: out of memory\n");
            exit(1);
        }
    }
}

/* ---- the generator -------------------------------------------------------- */

static uint64_t rng;
static uint64_t next(void) { /* splitmix64 */
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#define NLEAF 50

static const char *leaf(int i, char *out, size_t len) {
    snprintf(out, len, "team-%d-%d-%d", i / 25, (i / 5) % 5, i % 5);
    return out;
}

/* Pre-existing pods of one workload: a list of node indices. */
typedef struct podlist {
    int *nodes;
    int n;
} podlist;

/* real: label every node as a cloud provider does, with a unique hostname
 * and an instance type besides the zone.  Nothing selects on them, so both
 * shapes must decide the same; only what they cost may differ. */
static void generate(buf *b, int nodes, uint64_t seed, bool real) {
    rng = seed;
    char q[64];
    put(b, "{\"name\": \"bench %d nodes\", \"cycle_interval\": 10, \"horizon\": 0,\n", nodes);

    put(b, "\"nodes\": [\n");
    for (int i = 0; i < nodes; i++) {
        put(b, "%s{\"name\": \"node-%05d\", \"cpu\": 128, \"memory\": \"1Ti\", \"gpu\": 8, "
               "\"labels\": {\"zone\": \"z%d\"", i ? "," : "", i, i % 4);
        if (real)
            put(b, ", \"kubernetes.io/hostname\": \"ip-10-%d-%d-%d.ec2.internal\", "
                   "\"node.kubernetes.io/instance-type\": \"%s\"",
                i >> 16, (i >> 8) & 255, i & 255, i % 3 ? "p4d.24xlarge" : "p5.48xlarge");
        put(b, "}}\n");
    }
    put(b, "],\n");

    /* queues: quotas add up to 70% of the GPUs */
    long long gpus = 8LL * nodes;
    double leaf_quota = (double)gpus * 0.7 / NLEAF;
    put(b, "\"queues\": [\n");
    for (int o = 0; o < 2; o++) {
        put(b, "%s{\"name\": \"org-%d\", \"resources\": {\"gpu\": {\"quota\": %.0f}}}\n", o ? "," : "",
            o, leaf_quota * 25);
        for (int d = 0; d < 5; d++) {
            put(b, ",{\"name\": \"dept-%d-%d\", \"parent\": \"org-%d\", \"resources\": {\"gpu\": "
                   "{\"quota\": %.0f, \"over_quota_weight\": %d}}}\n", o, d, o, leaf_quota * 5, 1 + d % 2);
            for (int t = 0; t < 5; t++)
                put(b, ",{\"name\": \"team-%d-%d-%d\", \"parent\": \"dept-%d-%d\", \"priority\": %d, "
                       "\"resources\": {\"gpu\": {\"quota\": %.0f, \"over_quota_weight\": %d}}}\n",
                    o, d, t, o, d, t == 0 ? 1 : 0, leaf_quota, 1 + t % 3);
        }
    }
    put(b, ",{\"name\": \"infra-bg\", \"resources\": {"
           "\"gpu\": {\"quota\": 0, \"over_quota_weight\": 0},"
           "\"cpu\": {\"quota\": 0, \"over_quota_weight\": 0},"
           "\"memory\": {\"quota\": 0, \"over_quota_weight\": 0}}}\n]");

    /* running AI work, node by node */
    int *gang_nodes = malloc(sizeof(int) * (size_t)nodes);
    int *single_nodes = malloc(sizeof(int) * (size_t)nodes * 5);
    int *free_gpus = malloc(sizeof(int) * (size_t)nodes);
    if (!gang_nodes || !single_nodes || !free_gpus) abort();
    int ngang = 0, nsingle = 0;
    for (int i = 0; i < nodes; i++) {
        if (i % 20 < 7) {
            gang_nodes[ngang++] = i;
            free_gpus[i] = 0;
        } else {
            int k = 4 + (i % 3 == 0);
            for (int j = 0; j < k; j++) single_nodes[nsingle++] = i;
            free_gpus[i] = 8 - k;
        }
    }
    put(b, ",\n\"workloads\": [\n");
    int nw = 0;
    /* gangs of four 8-GPU pods */
    for (int g = 0; g * 4 < ngang; g++) {
        int n = ngang - g * 4 < 4 ? ngang - g * 4 : 4;
        put(b, "%s{\"name\": \"run-gang-%d\", \"queue\": \"%s\", \"replicas\": %d, \"min_member\": %d, "
               "\"requests\": {\"gpu\": 8, \"cpu\": 64, \"memory\": \"512Gi\"}, \"pods\": [",
            nw++ ? "," : "", g, leaf(g % NLEAF, q, sizeof q), n, n);
        for (int j = 0; j < n; j++)
            put(b, "%s{\"node\": \"node-%05d\", \"state\": \"running\"}", j ? "," : "", gang_nodes[g * 4 + j]);
        put(b, "]}\n");
    }
    /* deployments of 20 single-GPU pods */
    for (int d = 0; d * 20 < nsingle; d++) {
        int n = nsingle - d * 20 < 20 ? nsingle - d * 20 : 20;
        put(b, ",{\"name\": \"run-svc-%d\", \"queue\": \"%s\", \"controller\": \"deployment\", "
               "\"replicas\": %d, \"requests\": {\"gpu\": 1, \"cpu\": 8, \"memory\": \"64Gi\"}, \"pods\": [",
            d, leaf((d * 7) % NLEAF, q, sizeof q), n);
        for (int j = 0; j < n; j++)
            put(b, "%s{\"node\": \"node-%05d\", \"state\": \"running\"}", j ? "," : "", single_nodes[d * 20 + j]);
        put(b, "]}\n");
    }
    /* a CPU-only data loader on every node, in deployments of 100 */
    for (int d = 0; d * 100 < nodes; d++) {
        int n = nodes - d * 100 < 100 ? nodes - d * 100 : 100;
        put(b, ",{\"name\": \"loader-%d\", \"queue\": \"%s\", \"controller\": \"deployment\", "
               "\"replicas\": %d, \"requests\": {\"cpu\": 4, \"memory\": \"16Gi\"}, \"pods\": [",
            d, leaf((d * 11) % NLEAF, q, sizeof q), n);
        for (int j = 0; j < n; j++)
            put(b, "%s{\"node\": \"node-%05d\", \"state\": \"running\"}", j ? "," : "", d * 100 + j);
        put(b, "]}\n");
    }
    /* background: three daemonsets, running everywhere */
    static const char *daemons[] = {"node-exporter", "health-check", "dcgm-exporter"};
    for (int k = 0; k < 3; k++) {
        put(b, ",{\"name\": \"%s\", \"queue\": \"infra-bg\", \"controller\": \"daemonset\", "
               "\"labels\": {\"kai.scheduler/background\": \"true\"}, \"termination_grace\": 5, "
               "\"requests\": {\"cpu\": \"%dm\", \"memory\": \"%dMi\"}, \"pods\": [",
            daemons[k], 100 * (k + 1), 128 * (k + 1));
        for (int i = 0; i < nodes; i++)
            put(b, "%s{\"node\": \"node-%05d\", \"state\": \"running\"}", i ? "," : "", i);
        put(b, "]}\n");
    }
    /* background burn-in: 2 single-GPU pods on every node with room */
    int nburn = 0;
    for (int i = 0; i < nodes; i++)
        if (free_gpus[i] >= 2) nburn += 2;
    put(b, ",{\"name\": \"gpu-burn\", \"queue\": \"infra-bg\", \"controller\": \"deployment\", "
           "\"replicas\": %d, \"labels\": {\"kai.scheduler/background\": \"true\"}, "
           "\"termination_grace\": 5, \"requests\": {\"gpu\": 1, \"cpu\": 1, \"memory\": \"4Gi\"}, \"pods\": [",
        nburn);
    int first = 1;
    for (int i = 0; i < nodes; i++)
        for (int j = 0; free_gpus[i] >= 2 && j < 2; j++) {
            put(b, "%s{\"node\": \"node-%05d\", \"state\": \"running\"}", first ? "" : ",", i);
            first = 0;
        }
    put(b, "]}\n");

    /* pending AI backlog */
    int singles = nodes * 4 / 5, gangs = nodes / 40;
    for (int d = 0; d * 50 < singles; d++) {
        int n = singles - d * 50 < 50 ? singles - d * 50 : 50;
        put(b, ",{\"name\": \"new-svc-%d\", \"queue\": \"%s\", \"controller\": \"deployment\", "
               "\"replicas\": %d, \"priority\": %d, \"requests\": {\"gpu\": 1, \"cpu\": 8, \"memory\": \"64Gi\"}}\n",
            d, leaf((int)(next() % NLEAF), q, sizeof q), n, next() % 4 == 0 ? 75 : 50);
    }
    for (int g = 0; g < gangs; g++)
        put(b, ",{\"name\": \"new-gang-%d\", \"queue\": \"%s\", \"replicas\": 8, \"min_member\": 8, "
               "\"requests\": {\"gpu\": 8, \"cpu\": 64, \"memory\": \"512Gi\"}}\n",
            g, leaf((int)(next() % NLEAF), q, sizeof q));
    /* held back for the 1% change (measure submits them) */
    for (int d = 0; d < nodes / 400 + 1; d++)
        put(b, ",{\"name\": \"inc-svc-%d\", \"queue\": \"%s\", \"controller\": \"deployment\", "
               "\"replicas\": 20, \"submit_at\": 1e9, \"requests\": {\"gpu\": 1, \"cpu\": 8, "
               "\"memory\": \"64Gi\"}}\n", d, leaf((d * 13) % NLEAF, q, sizeof q));
    put(b, "]}\n");
    free(gang_nodes);
    free(single_nodes);
    free(free_gpus);
}

/* ---- one measurement (in a child process) --------------------------------- */

#define MAXCYC 4

typedef struct result {
    double load, submit, cycle;
    us_cycle_profile prof;
    double next[MAXCYC];            /* the cycles after the first */
    us_cycle_profile next_prof[MAXCYC];
    int nnext;
    double inc;                     /* the cycle after 1% of the pods changed, incremental */
    us_cycle_profile inc_prof;
    double inc_full;                /* the same cycle recomputing everything (--full-cycles),
                                       in a run of its own where every cycle did */
    us_cycle_profile inc_full_prof;
    double quiet;                   /* the cycle after that, one second later, with nothing
                                       changed but what the +1% cycle decided */
    us_cycle_profile quiet_prof;
    double quiet_full;              /* the same in the run recomputing everything */
    us_cycle_profile quiet_full_prof;
    size_t changed;                 /* pods completed + pods submitted for it */
    size_t pods, pending_ai;
    long peak_kib;
    int ok;
} result;

static double now(void) { return us_cycle_clock(); }
/* Cycles are timed in CPU seconds of this thread, as their phases are
 * (us_cycle_profile): what the work costs, not how busy the machine is. */
static double cpu(void) { return us_cycle_cpu_clock(); }

static int ncycles = 2;
static int repeats = 3;

static bool has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* Change 1% of the pods at time t: complete running AI deployments and
 * submit held-back ones, half of it each.  Returns the pods changed, or 0
 * when the state refused (out of memory). */
/* The set-up is not what is timed, but it must not be quadratic either:
 * the completions are one pass over the pods (us_life_complete_many), and
 * the submissions one more (us_life_submit_due, the held-back workloads
 * made due now; their creation time stays the one they were loaded with,
 * as when each was submitted by us_life_submit). */
static size_t change_one_percent(us_state *st, double t) {
    /* of the pods in the cluster: those gone wait in the array for a compaction */
    size_t target = (st->npods - st->ngone) / 200, done = 0, added = 0, n = 0;
    int *ws = malloc((st->nworkloads + 1) * sizeof *ws);
    if (!ws) return 0;
    for (size_t w = 0; w < st->nworkloads && done < target; w++)
        if (has_prefix(st->workloads[w].name, "run-svc-") && st->workloads[w].state == US_WL_ACTIVE) {
            ws[n++] = (int)w;
            done += (size_t)st->workloads[w].replicas;
        }
    int rc = us_life_complete_many(st, ws, n, t);
    free(ws);
    if (rc < 0) return 0;
    for (size_t w = 0; w < st->nworkloads && added < target; w++)
        if (has_prefix(st->workloads[w].name, "inc-svc-")) {
            us_workload *wl = &st->workloads[w];
            if (isnan(wl->created_at)) wl->created_at = wl->submit_at;
            wl->submit_at = t;
            added += (size_t)wl->replicas;
        }
    bool any = false;
    if (us_life_submit_due(st, t, &any) < 0 || !any) return 0;
    return done + added;
}

static long hwm_kib(void);

/* --perf-fifo CTL,ACK: `perf record --control fifo:CTL,ACK -D -1` records
 * only while the incremental cycle of the built-in C run runs (the one
 * cycle a profile of "what a quiet cycle costs" wants, without the load
 * and the first cycles).  Each command waits for perf's ack. */
static const char *perf_ctl_fifo, *perf_ack_fifo;
/* --perf-cycle: which run (Lua policies or built-in C) and which of its
 * cycles (the first, or the one after the 1% change) is recorded; or
 * (perf_api) the last round's cycle of that run's C API rows, incremental */
enum { PERF_FIRST, PERF_CHANGE, PERF_QUIET };
static bool perf_lua, perf_api;
static int perf_at = PERF_CHANGE;

static void perf_ctl(const char *what) {
    if (!perf_ctl_fifo) return;
    int fd = open(perf_ctl_fifo, O_WRONLY);
    if (fd < 0) return;
    char m[16];
    int n = snprintf(m, sizeof m, "%s\n", what);
    bool sent = write(fd, m, (size_t)n) == n;
    close(fd);
    if (!sent || (fd = open(perf_ack_fifo, O_RDONLY)) < 0) return;
    char ack[16];
    if (read(fd, ack, sizeof ack) < 0) fprintf(stderr, "understory-bench: no ack from perf\n");
    close(fd);
}

/* full: every cycle recomputes everything (no cycle cache, as
 * --full-cycles); else each cycle reuses what the last one left. */
static void measure(int nodes, uint64_t seed, bool real, const char *policies, bool full, result *r) {
    memset(r, 0, sizeof *r);
    buf b = {0};
    generate(&b, nodes, seed, real);
    us_err err = {0};
    us_scenario sc;
    double t0 = now();
    if (us_scenario_load_string(&sc, b.s, b.n, NULL, &err) < 0) {
        fprintf(stderr, "understory-bench: generated scenario does not load: %s\n", err.msg);
        return;
    }
    r->load = now() - t0;
    free(b.s);
    us_policy *pol = NULL;
    if (policies && !(pol = us_policy_load(policies, NULL, &err))) {
        fprintf(stderr, "understory-bench: %s\n", err.msg);
        us_scenario_free(&sc);
        return;
    }
    us_state *st = &sc.state;
    t0 = now();
    bool any = false;
    if (us_life_submit_due(st, 0, &any) < 0) abort();
    r->submit = now() - t0;
    r->pods = st->npods - st->ngone;
    for (size_t i = 0; i < st->npods; i++)
        if (!st->pods[i].gone && st->pods[i].state == US_POD_PENDING &&
            !st->workloads[st->pods[i].workload].background)
            r->pending_ai++;

    us_cycle_opts o;
    us_cycle_opts_default(&o);
    o.profile = &r->prof;
    /* what each cycle leaves for the next: the first one finds it empty */
    us_cycle_cache *cache = full ? NULL : us_cycle_cache_new();
    if (!full && !cache) abort();
    o.cache = cache;
    us_cycle_log log;
    us_cycle_log_init(&log);
    if (pol) us_policy_seed(pol, 1);
    bool profiled = !full && !perf_api && (pol != NULL) == perf_lua && perf_at == PERF_FIRST;
    if (profiled) perf_ctl("enable");
    t0 = cpu();
    int rc = us_cycle_run(st, pol, 0, &o, &log, NULL, NULL, &err);
    r->cycle = cpu() - t0;
    if (profiled) perf_ctl("disable");
    if (rc < 0) fprintf(stderr, "understory-bench: cycle failed: %s\n", err.msg);
    r->ok = rc == 0;
    us_cycle_log_free(&log);
    /* the steady state that follows: evicted background pods pending,
     * pipelined AI pods binding as grace periods end */
    for (int k = 1; k < ncycles && k <= MAXCYC && r->ok; k++) {
        us_cycle_log_init(&log);
        o.profile = &r->next_prof[k - 1];
        if (pol) us_policy_seed(pol, (uint64_t)k + 1);
        t0 = cpu();
        r->ok = us_cycle_run(st, pol, 10.0 * k, &o, &log, NULL, NULL, &err) == 0;
        r->next[k - 1] = cpu() - t0;
        r->nnext = k;
        us_cycle_log_free(&log);
    }
    /* the incremental cycle: 1% of the pods changed since the last one */
    if (r->ok) {
        double t = 10.0 * ncycles;
        r->changed = change_one_percent(st, t);
        r->ok = r->changed > 0;
        us_cycle_log_init(&log);
        o.profile = &r->inc_prof;
        if (pol) us_policy_seed(pol, (uint64_t)ncycles + 1);
        profiled = !full && !perf_api && (pol != NULL) == perf_lua && perf_at == PERF_CHANGE;
        if (profiled) perf_ctl("enable");
        t0 = cpu();
        r->ok = r->ok && us_cycle_run(st, pol, t, &o, &log, NULL, NULL, &err) == 0;
        r->inc = cpu() - t0;
        if (profiled) perf_ctl("disable");
        us_cycle_log_free(&log);
    }
    /* the quiet cycle: a second after the cycle that follows +1% (which
     * places the background pods +1% evicted, recreated), nothing changed
     * from outside: what a cycle costs at this size whatever changed.  Five
     * of them, a second apart, placing nothing (each reads again only the
     * pods that changed by themselves: a termination grace ended, say):
     * the fastest is reported (a few milliseconds, steadier so) */
    for (int q = 1; q <= 6 && r->ok; q++) {
        us_cycle_profile prof;
        us_cycle_log_init(&log);
        memset(&prof, 0, sizeof prof);
        o.profile = &prof;
        if (pol) us_policy_seed(pol, (uint64_t)(ncycles + 1 + q));
        profiled = q == 2 && !full && !perf_api && (pol != NULL) == perf_lua && perf_at == PERF_QUIET;
        if (profiled) perf_ctl("enable");
        t0 = cpu();
        r->ok = us_cycle_run(st, pol, 10.0 * ncycles + q, &o, &log, NULL, NULL, &err) == 0;
        double took = cpu() - t0;
        if (profiled) perf_ctl("disable");
        us_cycle_log_free(&log);
        if (q >= 2 && (q == 2 || took < r->quiet)) {
            r->quiet = took;
            r->quiet_prof = prof;
        }
    }
    us_policy_free(pol);
    us_scenario_free(&sc);
    us_cycle_cache_free(cache);
    r->peak_kib = hwm_kib();
}

/* One measurement of a size: its arguments, and the function that fills
 * its result (measure, measure_api). */
typedef struct job {
    int nodes;
    uint64_t seed;
    bool real, full;
    const char *policies;
    void (*run)(const struct job *j, void *out);
} job;

/* Run j in a child process, so that its peak memory is its own, and read
 * back its result (size bytes into out).  0; -1 when the child failed. */
static int in_child(const job *j, void *out, size_t size) {
    int fd[2];
    if (pipe(fd) < 0) return -1;
    fflush(stdout); /* the child must not print what the parent buffered */
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fd[0]);
        void *mine = calloc(1, size);
        if (!mine) _exit(1);
        j->run(j, mine);
        ssize_t k = write(fd[1], mine, size);
        _exit(k == (ssize_t)size ? 0 : 1);
    }
    close(fd[1]);
    ssize_t k = read(fd[0], out, size);
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    return k == (ssize_t)size && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void run_measure(const job *j, void *out) {
    measure(j->nodes, j->seed, j->real, j->policies, j->full, out);
}

static int run_child(int nodes, uint64_t seed, bool real, const char *policies, bool full, result *r) {
    job j = {nodes, seed, real, full, policies, run_measure};
    return in_child(&j, r, sizeof *r) == 0 && r->ok ? 0 : -1;
}

/* ---- the same cluster through the C API (in a child process) --------------
 * What a control plane embedding the engine sees: the generated cluster
 * fed through the public calls (nodes, queues, workloads, and each running
 * pod reported on its node), the same cycles, then three rounds of churn,
 * 60 s apart, each carrying out the last cycle's decisions as a control
 * plane reports them (evicted pods gone, bound pods running), then
 * removing running AI deployments (0.5% of the pods) and submitting as
 * many new pods in new deployments.  The pods of a removed
 * deployment terminate for its grace period and leave, and the engine's
 * tidying then drops the deployment and renumbers the workloads after it:
 * the third round's cycle is the steady state of a cluster where work
 * finishes all the time.  Times are CPU seconds of the thread: the
 * change's calls (with the read that settles them) and the cycle. */

#define API_ROUNDS 3

static void print_cycle(const char *label, double t, const us_cycle_profile *p);

typedef struct api_result {
    double load;                    /* wall seconds to feed the cluster through the API */
    double cycle;                   /* the first cycle */
    double calls[API_ROUNDS];       /* each round's calls */
    double inc[API_ROUNDS];         /* the cycle after each round */
    us_cycle_profile inc_prof;      /* the last round's cycle */
    size_t changed;                 /* pods removed + submitted in a round */
    long peak_kib;
    int ok;
} api_result;

static bool api_call(int rc, const us_error *err, const char *what) {
    if (rc != US_OK) fprintf(stderr, "understory-bench: API: %s: %s\n", what, err->message);
    return rc == US_OK;
}

/* One element of the document as a NUL-terminated string. */
static char *span_text(const char *doc, us_jspan sp) { return strndup(doc + sp.off, sp.len); }

/* A workload of the document: upserted at t=0 with its pods reported on
 * their nodes, named as the engine names them; held back (submit_at) are
 * skipped: the rounds submit their own. */
static bool api_workload(us_engine *e, const char *text) {
    us_error err;
    cJSON *w = cJSON_Parse(text), *pods = w ? cJSON_DetachItemFromObjectCaseSensitive(w, "pods") : NULL;
    bool ok = w != NULL;
    if (ok && !cJSON_GetObjectItemCaseSensitive(w, "submit_at")) {
        char *plain = cJSON_PrintUnformatted(w);
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(w, "name"));
        const char *ctrl = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(w, "controller"));
        bool daemon = ctrl && strcmp(ctrl, "daemonset") == 0;
        ok = plain && name && api_call(us_engine_upsert_workload_json(e, plain, 0, &err), &err, name);
        free(plain);
        int i = 0;
        const cJSON *pd;
        cJSON_ArrayForEach(pd, pods) {
            if (!ok) break;
            char pname[256];
            const char *node = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pd, "node"));
            if (daemon) snprintf(pname, sizeof pname, "%s-%s", name, node);
            else snprintf(pname, sizeof pname, "%s-%d", name, i);
            us_pod_spec ps = {.name = pname, .workload = name, .node = node};
            ok = api_call(us_engine_upsert_pod(e, &ps, &err), &err, pname);
            i++;
        }
    }
    cJSON_Delete(pods);
    cJSON_Delete(w);
    return ok;
}

static bool api_load(us_engine *e, const buf *b) {
    static const char *const split[] = {"nodes", "queues", "workloads", NULL};
    us_jdoc d;
    if (us_jsplit(b->s, b->n, split, &d) != 1) return false;
    bool ok = true;
    /* nodes, then queues, then workloads, whatever the document's order */
    for (int pass = 0; pass < 3 && ok; pass++)
        for (size_t m = 0; m < d.n && ok; m++) {
            const us_jmember *mb = &d.members[m];
            if (!mb->split || strncmp(b->s + mb->key.off + 1, split[pass], strlen(split[pass])) != 0 ||
                mb->key.len != strlen(split[pass]) + 2)
                continue;
            for (size_t k = 0; k < mb->nitems && ok; k++) {
                char *text = span_text(b->s, mb->items[k]);
                us_error err;
                ok = text != NULL;
                if (ok && pass == 0) ok = api_call(us_engine_upsert_node_json(e, text, &err), &err, "node");
                if (ok && pass == 1) ok = api_call(us_engine_upsert_queue_json(e, text, &err), &err, "queue");
                if (ok && pass == 2) ok = api_workload(e, text);
                free(text);
            }
        }
    us_jdoc_free(&d);
    return ok;
}

/* The last cycle's decisions carried out, as a control plane reports
 * them: each evicted pod gone (terminated), then each pod bound running
 * on its node (pipelined pods wait for their room: the engine binds them
 * when it frees). */
static bool api_carry_out(us_engine *e) {
    us_error err;
    bool ok = true;
    size_t n = us_engine_decision_count(e);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n && ok; i++) {
            us_decision_info d;
            if (us_engine_decision(e, i, &d) != US_OK) return false;
            if (pass == 0 && d.op == US_DECISION_EVICT)
                ok = api_call(us_engine_remove_pod(e, d.pod, &err), &err, d.pod);
            if (pass == 1 && d.op == US_DECISION_BIND) {
                us_pod_spec ps = {.name = d.pod, .workload = d.workload, .node = d.node};
                ok = api_call(us_engine_upsert_pod(e, &ps, &err), &err, d.pod);
            }
        }
    return ok;
}

/* Round k at time t: the last cycle's decisions carried out, running
 * deployments removed (run-svc-*, from *next_svc on) and new ones
 * submitted, target pods each. */
static bool api_round(us_engine *e, int k, double t, size_t target, int *next_svc) {
    us_error err;
    char name[64], q[32], js[512];
    bool ok = api_carry_out(e);
    for (size_t done = 0; done < target && ok; done += 20) {
        snprintf(name, sizeof name, "run-svc-%d", (*next_svc)++);
        ok = api_call(us_engine_remove_workload(e, name, t, &err), &err, name);
    }
    for (size_t added = 0, i = 0; added < target && ok; added += 20, i++) {
        snprintf(js, sizeof js, "{\"name\": \"api-svc-%d-%zu\", \"queue\": \"%s\", \"controller\": "
                 "\"deployment\", \"replicas\": 20, \"requests\": {\"gpu\": 1, \"cpu\": 8, \"memory\": "
                 "\"64Gi\"}}", k, i, leaf((int)(i * 7 + (size_t)k) % NLEAF, q, sizeof q));
        ok = api_call(us_engine_upsert_workload_json(e, js, t, &err), &err, "api-svc");
    }
    (void)us_engine_workload_count(e);  /* a read: the handle settles and tidies */
    return ok;
}

static void measure_api(int nodes, uint64_t seed, bool real, const char *policies, bool full,
                        api_result *r) {
    memset(r, 0, sizeof *r);
    buf b = {0};
    generate(&b, nodes, seed, real);
    us_engine_options o;
    us_engine_options_init(&o);
    o.full_cycles = full;
    us_engine *e = NULL;
    us_error err;
    if (!api_call(us_engine_create(&o, &e, &err), &err, "create")) return;
    double t0 = now();
    bool ok = (!policies || api_call(us_engine_load_policies(e, policies, &err), &err, policies)) &&
              api_load(e, &b);
    free(b.s);
    (void)us_engine_pod_count(e);
    r->load = now() - t0;
    size_t target = us_engine_pod_count(e) / 200;
    t0 = cpu();
    ok = ok && api_call(us_engine_run_cycle(e, 0, &err), &err, "cycle");
    r->cycle = cpu() - t0;
    for (int k = 1; k < ncycles && ok; k++)
        ok = api_call(us_engine_run_cycle(e, 10.0 * k, &err), &err, "cycle");
    int next_svc = 0;
    for (int k = 0; k < API_ROUNDS && ok; k++) {
        double t = 10.0 * ncycles + 60.0 * k;
        t0 = cpu();
        ok = api_round(e, k, t, target, &next_svc);
        r->calls[k] = cpu() - t0;
        bool profiled = perf_api && !full && (policies != NULL) == perf_lua && k == API_ROUNDS - 1;
        if (profiled) perf_ctl("enable");
        t0 = cpu();
        ok = ok && api_call(us_engine_run_cycle(e, t, &err), &err, "cycle");
        r->inc[k] = cpu() - t0;
        if (profiled) perf_ctl("disable");
    }
    r->changed = 2 * ((target + 19) / 20 * 20);
    r->inc_prof = *us_engine_profile(e);
    us_engine_destroy(e);
    r->ok = ok;
    r->peak_kib = hwm_kib();
}

static void run_measure_api(const job *j, void *out) {
    measure_api(j->nodes, j->seed, j->real, j->policies, j->full, out);
}

static int api_child(int nodes, uint64_t seed, bool real, const char *policies, bool full,
                     api_result *r) {
    if (perf_api && (policies != NULL) == perf_lua && !full) {
        /* in this process: perf resolves no symbol of a child forked
         * while it was not recording (its peak memory is then not its own) */
        measure_api(nodes, seed, real, policies, full, r);
        return r->ok ? 0 : -1;
    }
    job j = {nodes, seed, real, full, policies, run_measure_api};
    return in_child(&j, r, sizeof *r) == 0 && r->ok ? 0 : -1;
}

/* The API rows of one policy set (NULL: built-in C), incremental and
 * --full-cycles side by side, best of the repeats for the last round's
 * cycle; its time, or -1. */
static double api_rows(const char *label, int nodes, uint64_t seed, bool real, const char *policies) {
    api_result best = {0}, best_full = {0};
    for (int k = 0; k < repeats; k++) {
        api_result r, f;
        if (api_child(nodes, seed, real, policies, false, &r) < 0 ||
            api_child(nodes, seed, real, policies, true, &f) < 0) {
            printf("  %s: FAILED\n", label);
            return -1;
        }
        if (k == 0 || r.inc[API_ROUNDS - 1] < best.inc[API_ROUNDS - 1]) best = r;
        if (k == 0 || f.inc[API_ROUNDS - 1] < best_full.inc[API_ROUNDS - 1]) best_full = f;
    }
    printf("  %s: the cluster fed through the C API in %.1f s (wall), peak %.0f MiB; first cycle "
           "%.3f s\n", label, best.load, best.peak_kib / 1024.0, best.cycle);
    for (int k = 0; k < API_ROUNDS; k++)
        printf("  %s round %d: %zu pods churned (decisions carried out, deployments removed, new "
               "ones submitted): calls "
               "%.3f s, cycle %.3f s (full cycles %.3f s)\n", label, k + 1, best.changed,
               best.calls[k], best.inc[k], best_full.inc[k]);
    char name[32];
    snprintf(name, sizeof name, "%s #%d", label, API_ROUNDS);
    print_cycle(name, best.inc[API_ROUNDS - 1], &best.inc_prof);
    printf("            pods counted again %llu\n", best.inc_prof.pods_counted);
    return best.inc[API_ROUNDS - 1];
}

static int run_api(int nodes, uint64_t seed, bool real, const char *policies) {
    double lua = api_rows("api lua", nodes, seed, real, policies);
    double c = lua < 0 ? -1 : api_rows("api c", nodes, seed, real, NULL);
    if (c < 0) return -1;
    printf("  api lua / c: %.2fx (round %d's cycle)\n", c > 0 ? lua / c : 0, API_ROUNDS);
    return 0;
}

/* ---- the command line's path (in a child process) -------------------------
 * What `understory simulate FILE --json` does with the document, each step
 * timed on its own: load the file, simulate its one cycle, write the output
 * document (to /dev/null: the formatting, not the disk).  The peak memory
 * is the child's own high-water mark (VmHWM), read after the load and at
 * the end; CPU seconds are reported beside wall seconds because this
 * machine is shared. */

typedef struct io_result {
    double load, load_cpu, sim, write, write_cpu;
    long load_hwm_kib, hwm_kib;
    size_t pods;
    int ok;
} io_result;

static double cpu_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

/* VmHWM of this process in KiB, or -1. */
static long hwm_kib(void) {
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) v = strtol(line + 6, NULL, 10);
    fclose(f);
    return v;
}

static void measure_io(const char *path, const char *policies, io_result *r) {
    memset(r, 0, sizeof *r);
    us_err err = {0};
    us_scenario sc;
    us_policy *pol = NULL;
    us_sim_result res;
    us_sim_opts o;
    double t0 = now(), c0 = cpu_now();
    if (us_scenario_load_file(&sc, path, &err) < 0) {
        fprintf(stderr, "understory-bench: %s: %s\n", path, err.msg);
        return;
    }
    r->load = now() - t0;
    r->load_cpu = cpu_now() - c0;
    r->load_hwm_kib = hwm_kib();
    if (policies && !(pol = us_policy_load(policies, NULL, &err))) {
        fprintf(stderr, "understory-bench: %s\n", err.msg);
        us_scenario_free(&sc);
        return;
    }
    us_sim_opts_default(&o);
    /* no wall-clock budget: the document written is the same however busy
     * the machine is, so write times compare */
    o.cycle.cycle_budget = 0;
    t0 = now();
    if (us_sim_run(&sc, pol, &o, &res, &err) < 0) {
        fprintf(stderr, "understory-bench: simulate: %s\n", err.msg);
        us_policy_free(pol);
        us_scenario_free(&sc);
        return;
    }
    r->sim = now() - t0;
    r->pods = sc.state.npods - sc.state.ngone;
    FILE *f = fopen("/dev/null", "w");
    if (f) {
        t0 = now();
        c0 = cpu_now();
        r->ok = us_output_json(f, &res, &sc.state, &err) == 0;
        r->write = now() - t0;
        r->write_cpu = cpu_now() - c0;
        if (fclose(f) != 0) r->ok = 0;
        if (!r->ok) fprintf(stderr, "understory-bench: output: %s\n", err.msg);
    }
    us_sim_result_free(&res);
    us_policy_free(pol);
    us_scenario_free(&sc);
    r->hwm_kib = hwm_kib();
}

/* The best of `repeats` children (by load time; the peak is the same every
 * run), each loading path. */
static int best_io(const char *path, const char *policies, io_result *best) {
    for (int k = 0; k < repeats; k++) {
        io_result r;
        int fd[2];
        if (pipe(fd) < 0) return -1;
        pid_t pid = fork();
        if (pid < 0) return -1;
        if (pid == 0) {
            close(fd[0]);
            measure_io(path, policies, &r);
            ssize_t n = write(fd[1], &r, sizeof r);
            _exit(n == (ssize_t)sizeof r ? 0 : 1);
        }
        close(fd[1]);
        ssize_t n = read(fd[0], &r, sizeof r);
        close(fd[0]);
        int status;
        waitpid(pid, &status, 0);
        if (n != (ssize_t)sizeof r || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !r.ok) return -1;
        if (k == 0) *best = r;
        if (r.load < best->load) {
            best->load = r.load;
            best->load_cpu = r.load_cpu;
        }
        if (r.write < best->write) {
            best->write = r.write;
            best->write_cpu = r.write_cpu;
        }
        if (r.sim < best->sim) best->sim = r.sim;
        if (r.hwm_kib > best->hwm_kib) best->hwm_kib = r.hwm_kib;
        if (r.load_hwm_kib > best->load_hwm_kib) best->load_hwm_kib = r.load_hwm_kib;
    }
    return 0;
}

/* Write the scenario for nodes to a file of its own; the parent frees the
 * text before any child starts, so no child inherits its pages. */
static int write_scenario(const char *path, int nodes, uint64_t seed, bool real) {
    buf b = {0};
    generate(&b, nodes, seed, real);
    FILE *f = fopen(path, "w");
    int rc = f && fwrite(b.s, 1, b.n, f) == b.n ? 0 : -1;
    if (f && fclose(f) != 0) rc = -1;
    free(b.s);
    return rc;
}

static int run_io(int nodes, uint64_t seed, bool real, const char *policies) {
    char path[256];
    const char *dir = getenv("TMPDIR");
    struct stat sb;
    io_result r = {0};
    snprintf(path, sizeof path, "%s/understory-bench-%d.json", dir && *dir ? dir : "/tmp", (int)getpid());
    if (write_scenario(path, nodes, seed, real) < 0 || stat(path, &sb) < 0) {
        fprintf(stderr, "understory-bench: cannot write %s: %s\n", path, strerror(errno));
        unlink(path);
        return -1;
    }
    int rc = best_io(path, policies, &r);
    unlink(path);
    if (rc < 0) {
        printf("  simulate --json: FAILED\n");
        return -1;
    }
    printf("  simulate --json (%.0f MB document, %zu pods): load %.3f s (cpu %.3f s), one cycle %.3f s, "
           "write %.3f s (cpu %.3f s) | peak memory %.0f MiB (%.0f MiB after the load)\n",
           (double)sb.st_size / 1e6, r.pods, r.load, r.load_cpu, r.sim, r.write, r.write_cpu,
           r.hwm_kib / 1024.0, r.load_hwm_kib / 1024.0);
    return 0;
}

/* A timed cycle and its profile: *best becomes (t, prof) when t is faster, or
 * when it is the first run's (first). */
typedef struct timed {
    double t;
    us_cycle_profile prof;
} timed;

static void keep_fastest(timed *best, double t, const us_cycle_profile *prof, bool first) {
    if (first || t < best->t) *best = (timed){t, *prof};
}

/* The fastest of `repeats` runs: on a shared machine the minimum is the
 * figure least disturbed by others.  The first cycle, the one after the
 * 1% change and the quiet one are each the fastest of their own.  Each run
 * is two children on the same input: cycles that reuse what the last one
 * left (incremental), and cycles that recompute everything (full); the
 * +1% and quiet cycles of each are reported. */
static int best_of(int nodes, uint64_t seed, bool real, const char *policies, result *best) {
    timed inc = {0}, inc_full = {0}, quiet = {0}, quiet_full = {0};
    for (int k = 0; k < repeats; k++) {
        result r, f;
        if (run_child(nodes, seed, real, policies, false, &r) < 0 ||
            run_child(nodes, seed, real, policies, true, &f) < 0)
            return -1;
        if (k == 0 || r.cycle < best->cycle) *best = r;
        keep_fastest(&inc, r.inc, &r.inc_prof, k == 0);
        keep_fastest(&inc_full, f.inc, &f.inc_prof, k == 0);
        keep_fastest(&quiet, r.quiet, &r.quiet_prof, k == 0);
        keep_fastest(&quiet_full, f.quiet, &f.quiet_prof, k == 0);
    }
    best->inc = inc.t;
    best->inc_prof = inc.prof;
    best->inc_full = inc_full.t;
    best->inc_full_prof = inc_full.prof;
    best->quiet = quiet.t;
    best->quiet_prof = quiet.prof;
    best->quiet_full = quiet_full.t;
    best->quiet_full_prof = quiet_full.prof;
    return 0;
}

static void print_cycle(const char *label, double t, const us_cycle_profile *p) {
    printf("  %-9s %7.3f s | snapshot+evict %6.3f  fairshare %6.3f  allocate %6.3f  "
           "reclaim+preempt %6.3f  re-offer %6.3f  commit %6.3f\n",
           label, t, p->snapshot, p->fairshare, p->allocate, p->victims, p->reoffer,
           p->commit);
    printf("            lua calls %7llu, %6.3f s in policies | placed %6d pods (%.0f/s) | "
           "node classes kept %llu of %llu, scores kept %llu, views kept %llu, pods read %llu, "
           "fits asked %llu, views copied %llu\n",
           p->policy_calls, p->policy_seconds, p->placed, t > 0 ? p->placed / t : 0,
           p->nodes_class_kept, p->nodes_classed, p->scores_kept, p->nodes_view_kept, p->pods_read,
           p->nodes_fit_asked, p->nodes_view_copied);
}

static void print_row(const char *label, const result *r) {
    char name[32];
    snprintf(name, sizeof name, "%s #1", label);
    print_cycle(name, r->cycle, &r->prof);
    for (int k = 0; k < r->nnext; k++) {
        snprintf(name, sizeof name, "%s #%d", label, k + 2);
        print_cycle(name, r->next[k], &r->next_prof[k]);
    }
    snprintf(name, sizeof name, "%s +1%%", label);
    print_cycle(name, r->inc, &r->inc_prof);
    snprintf(name, sizeof name, "%s +1%% full", label);
    print_cycle(name, r->inc_full, &r->inc_full_prof);
    printf("            (+1%%: the cycle after %zu pods changed: deployments completed and submitted;\n"
           "             incremental, then the same cycle recomputing everything: %.2fx)\n",
           r->changed, r->inc > 0 ? r->inc_full / r->inc : 0);
    snprintf(name, sizeof name, "%s quiet", label);
    print_cycle(name, r->quiet, &r->quiet_prof);
    snprintf(name, sizeof name, "%s quiet full", label);
    print_cycle(name, r->quiet_full, &r->quiet_full_prof);
    printf("            (quiet: the cycles after +1%%'s next, a second apart, nothing changed since but\n"
           "             what the engine decided, fastest of 5: %.2fx the +1%% cycle; recomputing everything: %.2fx)\n",
           r->inc > 0 ? r->quiet / r->inc : 0, r->quiet > 0 ? r->quiet_full / r->quiet : 0);
    printf("            peak memory %.0f MiB | scenario load %.3f s, submit %.3f s\n",
           r->peak_kib / 1024.0, r->load, r->submit);
}

/* ---- paths that must stay linear ----------------------------------------
 * Valid input that a quadratic path would never finish: n/250 nodes
 * upserted one at a time through the API next to DaemonSets, the pods of
 * n/250 nodes reported running one at a time, n/100
 * workloads upserted one at a time with a read after each, n/100
 * workloads completing in the same simulated step, the pods of n/250 nodes
 * replaced one at a time, n/100 finished jobs removed one at a time, n/250
 * nodes with their pods removed one at a time, n/100 workloads and their
 * pods synced again one at a time, n/250 nodes added and then relabelled
 * one at a time, each followed by its pod's report (each timed at that
 * size and twice it), one cycle of n/250 distinct pending jobs that all
 * fail (pod classes, failed victim searches), one cycle of n/250
 * preemptions of one pod each, the readable account of those, one cycle
 * whose tie-break chooses among n/250 identical nodes, one cycle of n/250
 * one-pod jobs each in a team queue of its own (each at that size
 * and twice it); a workload scaled from n replicas to 1, a scenario with a
 * queue chain n/10 deep, and a chain of n/250 queues upserted one at a
 * time through the API. */

static us_engine *scale_engine(void) {
    us_engine *e = NULL;
    us_error err;
    us_node_spec nd = {0};
    us_queue_spec q;
    if (us_engine_create(NULL, &e, &err) != US_OK) return NULL;
    nd.name = "n1";
    nd.capacity = (us_resources){8, 64000, 1LL << 40};
    us_queue_spec_init(&q);
    q.name = "q";
    if (us_engine_upsert_node(e, &nd, &err) != US_OK || us_engine_upsert_queue(e, &q, &err) != US_OK) {
        us_engine_destroy(e);
        return NULL;
    }
    return e;
}

static double bench_scale_down(int n) {
    us_engine *e = scale_engine();
    us_workload_spec w;
    us_error err;
    double t;
    if (!e) return -1;
    us_workload_spec_init(&w);
    w.name = "w";
    w.queue = "q";
    w.replicas = n;
    w.min_member = 1;
    w.requests = (us_resources){1, 100, 1 << 20};
    if (us_engine_upsert_workload(e, &w, 0, &err) != US_OK || us_engine_run_cycle(e, 0, &err) != US_OK) {
        us_engine_destroy(e);
        return -1;
    }
    w.replicas = 1;
    t = now();
    int rc = us_engine_upsert_workload(e, &w, 1, &err);
    t = now() - t;
    if (rc != US_OK || us_engine_pod_count(e) > 8) t = -1;
    us_engine_destroy(e);
    return t;
}

static double bench_chain_load(int n) {
    buf b = {0};
    us_scenario sc;
    us_err err = {0};
    double t;
    put(&b, "{\"name\": \"chain\", \"queues\": [{\"name\": \"q0\"}");
    for (int i = 1; i < n; i++) put(&b, ", {\"name\": \"q%d\", \"parent\": \"q%d\"}", i, i - 1);
    put(&b, "]}");
    t = now();
    int rc = us_scenario_load_string(&sc, b.s, b.n, NULL, &err);
    t = now() - t;
    free(b.s);
    if (rc < 0) return -1;
    if (sc.state.nqueues != (size_t)n || sc.state.queues[n - 1].depth != n - 1) t = -1;
    us_scenario_free(&sc);
    return t;
}

static double bench_chain_upserts(int n) {
    us_engine *e = NULL;
    us_error err;
    char name[32], parent[32];
    double t;
    if (us_engine_create(NULL, &e, &err) != US_OK) return -1;
    t = now();
    for (int i = 0; i < n; i++) {
        us_queue_spec q;
        us_queue_spec_init(&q);
        snprintf(name, sizeof name, "q%d", i);
        snprintf(parent, sizeof parent, "q%d", i - 1);
        q.name = name;
        q.parent = i ? parent : NULL;
        if (us_engine_upsert_queue(e, &q, &err) != US_OK) {
            us_engine_destroy(e);
            return -1;
        }
    }
    t = now() - t;
    us_engine_destroy(e);
    return t;
}

/* n nodes upserted one at a time into an engine that runs three
 * DaemonSets (each new node gets their pods), then each node read back
 * (us_engine_node: what it holds). */
static double bench_node_upserts(int n) {
    us_engine *e = NULL;
    us_error err;
    us_queue_spec q;
    char name[32];
    double t = -1;
    int ok = 0;
    if (us_engine_create(NULL, &e, &err) != US_OK) return -1;
    us_queue_spec_init(&q);
    q.name = "q";
    if (us_engine_upsert_queue(e, &q, &err) != US_OK) goto out;
    for (int d = 0; d < 3; d++) {
        us_workload_spec w;
        us_workload_spec_init(&w);
        snprintf(name, sizeof name, "ds%d", d);
        w.name = name;
        w.queue = "q";
        w.controller = US_CONTROLLER_DAEMONSET;
        w.requests = (us_resources){0, 100, 1 << 20};
        if (us_engine_upsert_workload(e, &w, 0, &err) != US_OK) goto out;
    }
    (void)us_engine_pod_count(e); /* the DaemonSets are submitted */
    t = now();
    for (int i = 0; i < n; i++) {
        us_node_spec nd = {0};
        snprintf(name, sizeof name, "node-%d", i);
        nd.name = name;
        nd.capacity = (us_resources){8, 128000, 1LL << 40};
        if (us_engine_upsert_node(e, &nd, &err) != US_OK) goto out;
    }
    for (size_t i = 0; i < us_engine_node_count(e); i++) {
        us_node_info info;
        if (us_engine_node(e, i, &info) != US_OK) goto out;
        ok += info.used.cpu == 0;
    }
    t = now() - t;
    ok = ok == n && us_engine_pod_count(e) == 3 * (size_t)n;
out:
    us_engine_destroy(e);
    return ok ? t : -1;
}

/* A cluster growing and changing node by node next to a DaemonSet and a
 * running Deployment: n nodes added one at a time, each followed by its
 * DaemonSet pod's report (a cluster scaling up), then each node sent again
 * with a new label and its pod reported again (a label rolled out node by
 * node).  Both are timed. */
static double bench_node_growth(int n) {
    us_engine *e = NULL;
    us_error err;
    us_queue_spec q;
    us_workload_spec w;
    char node[32], pod[48];
    double t = -1;
    int ok = 0;
    us_label role[] = {{"role", "trained"}};
    if (us_engine_create(NULL, &e, &err) != US_OK) return -1;
    us_queue_spec_init(&q);
    q.name = "q";
    if (us_engine_upsert_queue(e, &q, &err) != US_OK) goto out;
    us_workload_spec_init(&w);
    w.name = "agent";
    w.queue = "q";
    w.controller = US_CONTROLLER_DAEMONSET;
    w.requests = (us_resources){0, 100, 1 << 20};
    if (us_engine_upsert_workload(e, &w, 0, &err) != US_OK) goto out;
    us_workload_spec_init(&w);
    w.name = "serve";
    w.queue = "q";
    w.replicas = 4 * n;
    w.requests = (us_resources){1, 1000, 1 << 30};
    if (us_engine_upsert_workload(e, &w, 0, &err) != US_OK) goto out;
    t = now();
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            us_node_spec nd = {0};
            us_pod_spec d = {pod, "agent", node, NULL, 0};
            snprintf(node, sizeof node, "node-%d", i);
            snprintf(pod, sizeof pod, "agent-%x", i);
            nd.name = node;
            nd.capacity = (us_resources){8, 128000, 1LL << 40};
            if (pass == 1) {
                nd.labels = role;
                nd.nlabels = 1;
            }
            if (us_engine_upsert_node(e, &nd, &err) != US_OK || us_engine_upsert_pod(e, &d, &err) != US_OK)
                goto out;
        }
    t = now() - t;
    /* each node runs its DaemonSet pod; the Deployment's 4n wait, pending */
    ok = us_engine_node_count(e) == (size_t)n && us_engine_pod_count(e) == 5 * (size_t)n;
    for (size_t i = 0; ok && i < us_engine_pod_count(e); i++) {
        us_pod_info pi;
        ok = us_engine_pod(e, i, &pi) == US_OK &&
             pi.phase == (!strcmp(pi.workload, "agent") ? US_PHASE_RUNNING : US_PHASE_PENDING);
    }
out:
    if (!ok) fprintf(stderr, "understory-bench: node growth: %s\n", err.message);
    us_engine_destroy(e);
    return ok ? t : -1;
}

/* n nodes next to a DaemonSet ("agent", a pod on each) and an n-pod
 * Deployment ("serve"), on queue "q"; NULL when the engine refused. */
static us_engine *daemon_cluster(int n) {
    us_engine *e = NULL;
    us_error err;
    us_queue_spec q;
    us_workload_spec w;
    char name[32];
    if (us_engine_create(NULL, &e, &err) != US_OK) return NULL;
    us_queue_spec_init(&q);
    q.name = "q";
    if (us_engine_upsert_queue(e, &q, &err) != US_OK) goto fail;
    us_workload_spec_init(&w);
    w.name = "agent";
    w.queue = "q";
    w.controller = US_CONTROLLER_DAEMONSET;
    w.requests = (us_resources){0, 100, 1 << 20};
    if (us_engine_upsert_workload(e, &w, 0, &err) != US_OK) goto fail;
    us_workload_spec_init(&w);
    w.name = "serve";
    w.queue = "q";
    w.controller = US_CONTROLLER_DEPLOYMENT;
    w.replicas = n;
    w.requests = (us_resources){1, 1000, 1 << 30};
    if (us_engine_upsert_workload(e, &w, 0, &err) != US_OK) goto fail;
    for (int i = 0; i < n; i++) {
        us_node_spec nd = {0};
        snprintf(name, sizeof name, "node-%d", i);
        nd.name = name;
        nd.capacity = (us_resources){8, 128000, 1LL << 40};
        if (us_engine_upsert_node(e, &nd, &err) != US_OK) goto fail;
    }
    return e;
fail:
    us_engine_destroy(e);
    return NULL;
}

/* Node i's two pods of daemon_cluster reported running on it. */
static bool report_node_pods(us_engine *e, int i) {
    us_error err;
    char node[32], pod[48];
    us_pod_spec p = {pod, "serve", node, NULL, 0}, d = {pod, NULL, node, NULL, 0};
    snprintf(node, sizeof node, "node-%d", i);
    snprintf(pod, sizeof pod, "serve-%x", i);
    if (us_engine_upsert_pod(e, &p, &err) != US_OK) return false;
    snprintf(pod, sizeof pod, "agent-%s", node);
    return us_engine_upsert_pod(e, &d, &err) == US_OK;
}

/* daemon_cluster's 2n pods reported running one at a time (a control
 * plane starting up): the reports are timed. */
static double bench_pod_reports(int n) {
    us_engine *e = daemon_cluster(n);
    double t;
    int ok = e != NULL;
    t = now();
    for (int i = 0; ok && i < n; i++) ok = report_node_pods(e, i);
    t = now() - t;
    ok = ok && us_engine_pod_count(e) == 2 * (size_t)n;
    for (size_t i = 0; ok && i < us_engine_pod_count(e); i++) {
        us_pod_info pi;
        ok = us_engine_pod(e, i, &pi) == US_OK && pi.phase == US_PHASE_RUNNING;
    }
    us_engine_destroy(e);
    return ok ? t : -1;
}

/* n nodes each running a pod of one Deployment, then every pod replaced
 * the way a control plane reports a rolling restart, one pod at a time:
 * the old pod reported terminating, then gone, and its replacement
 * reported running on the same node.  The churn is timed; each removal is
 * followed by a report, so tidying after every removal would be a pass
 * over every pod per pod. */
static double bench_pod_churn(int n) {
    us_engine *e = NULL;
    us_error err;
    us_queue_spec q;
    us_workload_spec w;
    char node[32], pod[48];
    double t = -1;
    int ok = 0;
    if (us_engine_create(NULL, &e, &err) != US_OK) return -1;
    us_queue_spec_init(&q);
    q.name = "q";
    if (us_engine_upsert_queue(e, &q, &err) != US_OK) goto out;
    us_workload_spec_init(&w);
    w.name = "serve";
    w.queue = "q";
    w.controller = US_CONTROLLER_DEPLOYMENT;
    w.replicas = n;
    w.termination_grace = 30;
    w.requests = (us_resources){1, 1000, 1 << 30};
    if (us_engine_upsert_workload(e, &w, 0, &err) != US_OK) goto out;
    for (int i = 0; i < n; i++) {
        us_node_spec nd = {0};
        us_pod_spec p = {pod, "serve", node, NULL, 0};
        snprintf(node, sizeof node, "node-%d", i);
        snprintf(pod, sizeof pod, "serve-a%x", i);
        nd.name = node;
        nd.capacity = (us_resources){8, 128000, 1LL << 40};
        if (us_engine_upsert_node(e, &nd, &err) != US_OK || us_engine_upsert_pod(e, &p, &err) != US_OK)
            goto out;
    }
    t = now();
    for (int i = 0; i < n; i++) {
        us_pod_spec old = {pod, "serve", node, NULL, 1}, fresh = {pod, "serve", node, NULL, 0};
        snprintf(node, sizeof node, "node-%d", i);
        snprintf(pod, sizeof pod, "serve-a%x", i);
        if (us_engine_upsert_pod(e, &old, &err) != US_OK || us_engine_remove_pod(e, pod, &err) != US_OK)
            goto out;
        snprintf(pod, sizeof pod, "serve-b%x", i);
        if (us_engine_upsert_pod(e, &fresh, &err) != US_OK) goto out;
    }
    t = now() - t;
    ok = us_engine_pod_count(e) == (size_t)n;
    for (size_t i = 0; ok && i < us_engine_pod_count(e); i++) {
        us_pod_info pi;
        ok = us_engine_pod(e, i, &pi) == US_OK && pi.phase == US_PHASE_RUNNING && pi.name[6] == 'b';
    }
out:
    if (!ok) fprintf(stderr, "understory-bench: pod churn: %s\n", err.message);
    us_engine_destroy(e);
    return ok ? t : -1;
}

/* An engine with queue "q" and the n/8 nodes ("node-<i>", cpus cores
 * each) that n one-pod jobs run on, eight to a node; NULL when refused. */
static us_engine *jobs_cluster(int n, double cpus) {
    us_engine *e = NULL;
    us_error err;
    us_queue_spec q;
    char node[32];
    if (us_engine_create(NULL, &e, &err) != US_OK) return NULL;
    us_queue_spec_init(&q);
    q.name = "q";
    if (us_engine_upsert_queue(e, &q, &err) != US_OK) goto fail;
    for (int i = 0; i < (n + 7) / 8; i++) {
        us_node_spec nd = {0};
        snprintf(node, sizeof node, "node-%d", i);
        nd.name = node;
        nd.capacity = (us_resources){cpus, 128000, 1LL << 40};
        if (us_engine_upsert_node(e, &nd, &err) != US_OK) goto fail;
    }
    return e;
fail:
    us_engine_destroy(e);
    return NULL;
}

/* n one-pod workloads running on n/8 nodes, then each removed the way a
 * control plane removes a finished job: its pod reported gone, then the
 * workload.  The removals are timed. */
static double bench_workload_removals(int n) {
    us_engine *e = jobs_cluster(n, 8);
    us_error err = {0};
    char name[32], pod[48], node[32];
    double t = -1;
    int ok = 0;
    if (!e) return -1;
    for (int i = 0; i < n; i++) {
        us_workload_spec w;
        us_workload_spec_init(&w);
        snprintf(name, sizeof name, "job-%d", i);
        w.name = name;
        w.queue = "q";
        w.requests = (us_resources){1, 1000, 1 << 30};
        if (us_engine_upsert_workload(e, &w, 0, &err) != US_OK) goto out;
    }
    for (int i = 0; i < n; i++) {
        us_pod_spec p = {pod, name, node, NULL, 0};
        snprintf(name, sizeof name, "job-%d", i);
        snprintf(pod, sizeof pod, "job-%d-x", i);
        snprintf(node, sizeof node, "node-%d", i / 8);
        if (us_engine_upsert_pod(e, &p, &err) != US_OK) goto out;
    }
    t = now();
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "job-%d", i);
        snprintf(pod, sizeof pod, "job-%d-x", i);
        if (us_engine_remove_pod(e, pod, &err) != US_OK || us_engine_remove_workload(e, name, 1, &err) != US_OK)
            goto out;
    }
    t = now() - t;
    ok = us_engine_pod_count(e) == 0 && us_engine_workload_count(e) == 0;
out:
    if (!ok) fprintf(stderr, "understory-bench: workload removals: %s\n", err.message);
    us_engine_destroy(e);
    return ok ? t : -1;
}

/* daemon_cluster with every pod reported, then the nodes removed one at a
 * time (a cluster scaling down): the removals are timed. */
static double bench_node_removals(int n) {
    us_engine *e = daemon_cluster(n);
    us_error err = {0};
    char node[32];
    double t;
    int ok = e != NULL;
    for (int i = 0; ok && i < n; i++) ok = report_node_pods(e, i);
    t = now();
    for (int i = 0; ok && i < n; i++) {
        snprintf(node, sizeof node, "node-%d", i);
        ok = us_engine_remove_node(e, node, &err) == US_OK;
    }
    t = now() - t;
    /* the Deployment's pods wait, pending; the DaemonSet's went with their nodes */
    ok = ok && us_engine_node_count(e) == 0 && us_engine_pod_count(e) == (size_t)n;
    for (size_t i = 0; ok && i < us_engine_pod_count(e); i++) {
        us_pod_info pi;
        ok = us_engine_pod(e, i, &pi) == US_OK && pi.phase == US_PHASE_PENDING && !strcmp(pi.workload, "serve");
    }
    if (!ok) fprintf(stderr, "understory-bench: node removals: %s\n", err.message);
    us_engine_destroy(e);
    return ok ? t : -1;
}

/* n one-pod workloads running on n/8 nodes, all reported; then each
 * synced again as a control plane does after its watches restart: the
 * workload sent (a resend, or scaled to two pods and back), then its pod
 * reported where it runs.  The resync is timed. */
static double bench_workload_resync(int n) {
    us_engine *e = jobs_cluster(n, 16);
    us_error err = {0};
    us_workload_spec w;
    char name[32], pod[48], node[32];
    double t = -1;
    int ok = 0;
    if (!e) return -1;
    us_workload_spec_init(&w);
    w.name = name;
    w.queue = "q";
    w.requests = (us_resources){1, 1000, 1 << 30};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) t = now();
        for (int i = 0; i < n; i++) {
            us_pod_spec p = {pod, name, node, NULL, 0};
            snprintf(name, sizeof name, "job-%d", i);
            snprintf(pod, sizeof pod, "job-%d-x", i);
            snprintf(node, sizeof node, "node-%d", i / 8);
            w.replicas = pass == 1 && i % 2 ? 2 : 1;
            if (us_engine_upsert_workload(e, &w, 0, &err) != US_OK || us_engine_upsert_pod(e, &p, &err) != US_OK)
                goto out;
            w.replicas = 1;
            if (pass == 1 && i % 2 && us_engine_upsert_workload(e, &w, 0, &err) != US_OK) goto out;
        }
    }
    t = now() - t;
    ok = us_engine_pod_count(e) == (size_t)n;
    for (size_t i = 0; ok && i < us_engine_pod_count(e); i++) {
        us_pod_info pi;
        ok = us_engine_pod(e, i, &pi) == US_OK && pi.phase == US_PHASE_RUNNING;
    }
out:
    if (!ok) fprintf(stderr, "understory-bench: workload resync: %s\n", err.message);
    us_engine_destroy(e);
    return ok ? t : -1;
}

/* n one-pod workloads upserted one at a time through the API, each
 * followed by a read (the pod count), so that each is settled apart. */
static double bench_workload_upserts(int n) {
    us_engine *e = NULL;
    us_error err;
    us_queue_spec q;
    char name[32];
    double t = -1;
    int ok = 0;
    if (us_engine_create(NULL, &e, &err) != US_OK) return -1;
    us_queue_spec_init(&q);
    q.name = "q";
    if (us_engine_upsert_queue(e, &q, &err) != US_OK) goto out;
    t = now();
    for (int i = 0; i < n; i++) {
        us_workload_spec w;
        us_workload_spec_init(&w);
        snprintf(name, sizeof name, "w%d", i);
        w.name = name;
        w.queue = "q";
        w.requests = (us_resources){0, 100, 1 << 20};
        if (us_engine_upsert_workload(e, &w, 0, &err) != US_OK || us_engine_pod_count(e) != (size_t)i + 1)
            goto out;
    }
    t = now() - t;
    ok = 1;
out:
    us_engine_destroy(e);
    return ok ? t : -1;
}

/* A simulation in which n one-pod workloads of a given duration start in
 * the first cycle and all complete in the second. */
static double bench_sim_timeouts(int n) {
    buf b = {0};
    us_scenario sc;
    us_sim_result res;
    us_sim_opts o;
    us_err err = {0};
    double t;
    int nodes = (n + 7) / 8;
    put(&b, "{\"name\": \"timeouts\", \"cycle_interval\": 10, \"horizon\": 10, \"nodes\": [");
    for (int i = 0; i < nodes; i++)
        put(&b, "%s{\"name\": \"n%d\", \"cpu\": 128, \"memory\": \"1Ti\", \"gpu\": 8}", i ? ", " : "", i);
    put(&b, "], \"queues\": [{\"name\": \"q\"}], \"workloads\": [");
    for (int i = 0; i < n; i++)
        put(&b, "%s{\"name\": \"w%d\", \"queue\": \"q\", \"duration\": 10, "
               "\"requests\": {\"gpu\": 1, \"cpu\": 1, \"memory\": \"1Gi\"}}", i ? ", " : "", i);
    put(&b, "]}");
    int rc = us_scenario_load_string(&sc, b.s, b.n, NULL, &err);
    free(b.s);
    if (rc < 0) return -1;
    us_sim_opts_default(&o);
    o.cycle.cycle_budget = 0;
    t = now();
    rc = us_sim_run(&sc, NULL, &o, &res, &err);
    t = now() - t;
    if (rc < 0) {
        us_scenario_free(&sc);
        return -1;
    }
    /* the second cycle completes every workload */
    if (res.ncycles != 2 || res.cycles[1].nchanges != (size_t)n) t = -1;
    us_sim_result_free(&res);
    us_scenario_free(&sc);
    return t;
}

/* serve's cache of every pod (serve/cache.c, unordered as serve makes it):
 * n pod keys added in a random order (a watch sees new pods' generated
 * names in no order), each looked up, then removed in another order.
 * Timed. */
static double bench_pod_cache(int n) {
    sv_cache c = {0};
    sv_cache_unordered(&c);
    char (*keys)[40] = malloc((size_t)n * sizeof *keys);
    int *order = malloc((size_t)n * sizeof *order);
    if (!keys || !order) abort();
    uint64_t x = 99;
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        snprintf(keys[i], sizeof keys[i], "ns-%d/train-%08llx-%d", i % 50, (unsigned long long)(x >> 24), i);
        order[i] = i;
    }
    double t0 = cpu(), t = 0;
    for (int i = 0; i < n && t >= 0; i++)
        if (sv_cache_put(&c, keys[i], cJSON_CreateTrue(), 0) < 0 || !sv_cache_lookup(&c, keys[i])) t = -1;
    for (int i = n - 1; i > 0; i--) {  /* removed in a shuffled order */
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int j = (int)((x >> 33) % (uint64_t)(i + 1)), k = order[i];
        order[i] = order[j];
        order[j] = k;
    }
    for (int i = 0; i < n; i++) sv_cache_drop(&c, keys[order[i]]);
    if (t == 0) t = c.n == 0 ? cpu() - t0 : -1;
    sv_cache_clear(&c);
    free(keys);
    free(order);
    return t;
}

/* serve's index of a workload's pods (serve/workloads.c): the n pods of
 * one Job come, as a watch delivers them, then go one by one in another
 * order (a large Job finishing, a DaemonSet rolled).  Timed; each pod's
 * removal once searched the workload's list of pods. */
static double bench_workload_index(int n) {
    us_engine *e = NULL;
    us_error err;
    if (us_engine_create(NULL, &e, &err) != US_OK) return -1;
    sv_workloads *w = sv_workloads_new(e, "understory", 1);
    cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"\",\"namespace\":\"t\",\"ownerReferences\":"
                             "[{\"kind\":\"Job\",\"name\":\"big\",\"controller\":true}]},"
                             "\"spec\":{\"schedulerName\":\"understory\",\"containers\":[]}}");
    int *order = malloc((size_t)n * sizeof *order);
    double t = -1;
    if (!w || !pod || !order) goto out;
    cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "name");
    char buf[32];
    for (int i = 0; i < n; i++) order[i] = i;
    uint64_t x = 7;
    for (int i = n - 1; i > 0; i--) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int j = (int)((x >> 33) % (uint64_t)(i + 1)), k = order[i];
        order[i] = order[j];
        order[j] = k;
    }
    double t0 = cpu();
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            snprintf(buf, sizeof buf, "big-%d", pass ? order[i] : i);
            if (!cJSON_SetValuestring(name, buf) ||
                sv_workloads_event(w, SV_PODS, pass ? SV_DELETED : SV_ADDED, pod) < 0)
                goto out;
        }
    t = cpu() - t0;
    /* every pod gone: the workload maps to nothing, and nothing is left */
    snprintf(buf, sizeof buf, "t/big-%d", n / 2);
    if (sv_workloads_get(w, SV_PODS, buf) || sv_workloads_sync(w, 2) < 0 || us_engine_workload_count(e) != 0 ||
        sv_workloads_mapped(w) != 1)
        t = -1;
out:
    free(order);
    cJSON_Delete(pod);
    sv_workloads_free(w);
    us_engine_destroy(e);
    return t;
}

/* serve's Queue objects (serve/queues.c): a chain of n queues listed
 * deepest first, as an informer lists them when names sort children
 * before parents; each waits until the root comes last, then all go in.
 * Timed; each queue's parent was looked for by a scan of the engine's
 * queues, and each one put rescanned the waiting list. */
static double bench_queue_chain(int n) {
    us_engine *e = NULL;
    us_error err;
    if (us_engine_create(NULL, &e, &err) != US_OK) return -1;
    sv_queues *q = sv_queues_new(e);
    double t = -1;
    char text[160];
    if (!q) goto out;
    /* its lines ("queue ...: ...", "... waits for its parent") are not the point */
    fflush(stdout);
    fflush(stderr);
    int out = dup(1), errfd = dup(2), null = open("/dev/null", O_WRONLY);
    if (out < 0 || errfd < 0 || null < 0) {
        if (out >= 0) close(out);
        if (errfd >= 0) close(errfd);
        if (null >= 0) close(null);
        goto out;
    }
    dup2(null, 1);
    dup2(null, 2);
    double t0 = cpu();
    for (int i = n - 1; i >= 0; i--) {
        if (i) snprintf(text, sizeof text, "{\"metadata\":{\"name\":\"c%d\"},\"spec\":{\"parentQueue\":\"c%d\"}}", i, i - 1);
        else snprintf(text, sizeof text, "{\"metadata\":{\"name\":\"c0\"},\"spec\":{}}");
        cJSON *o = cJSON_Parse(text);
        if (o) sv_queues_event(q, SV_ADDED, o);
        cJSON_Delete(o);
    }
    t = cpu() - t0;
    fflush(stdout);
    fflush(stderr);
    dup2(out, 1);
    dup2(errfd, 2);
    close(out);
    close(errfd);
    close(null);
    if (sv_queues_waiting(q) != 0 || us_engine_queue_count(e) != (size_t)n) t = -1;
out:
    sv_queues_free(q);
    us_engine_destroy(e);
    return t;
}

/* The entries of a node list: n0, n1... of 8 GPUs, 128 cores and 1Ti each. */
static void put_gpu_nodes(buf *b, int nodes) {
    for (int i = 0; i < nodes; i++)
        put(b, "%s{\"name\": \"n%d\", \"gpu\": 8, \"cpu\": 128, \"memory\": \"1Ti\"}", i ? ", " : "", i);
}

/* One simulated cycle of the scenario text (no cycle budget: the cost is
 * what is measured), timed; res filled.  -1 when it does not run. */
static double sim_once(buf *b, us_scenario *sc, us_sim_result *res) {
    us_sim_opts o;
    us_err err = {0};
    int rc = us_scenario_load_string(sc, b->s, b->n, NULL, &err);
    free(b->s);
    if (rc < 0) return -1;
    us_sim_opts_default(&o);
    o.cycle.cycle_budget = 0;
    double t = now();
    rc = us_sim_run(sc, NULL, &o, res, &err);
    t = now() - t;
    if (rc < 0) {
        us_scenario_free(sc);
        return -1;
    }
    return t;
}

static size_t count_op(const us_sim_result *res, us_op op) {
    size_t k = 0;
    for (size_t i = 0; i < res->cycles[0].log.ndecisions; i++) k += res->cycles[0].log.decisions[i].op == op;
    return k;
}

/* A full node of non-preemptible work and n pending jobs in its queue,
 * each asking a different CPU: n distinct pod classes and n failed victim
 * searches, none like another. */
static double bench_distinct_failures(int n) {
    buf b = {0};
    us_scenario sc;
    us_sim_result res;
    put(&b, "{\"name\": \"failures\", \"horizon\": 0, \"nodes\": [{\"name\": \"n0\", \"gpu\": 8, "
            "\"cpu\": 100000, \"memory\": \"1Ti\"}], \"queues\": [{\"name\": \"q\", \"resources\": "
            "{\"gpu\": {\"quota\": 8}}}], \"workloads\": [{\"name\": \"hog\", \"queue\": \"q\", "
            "\"priority\": 200, \"preemptibility\": \"non-preemptible\", \"replicas\": 8, "
            "\"requests\": {\"gpu\": 1}, \"pods\": [");
    for (int i = 0; i < 8; i++) put(&b, "%s{\"node\": \"n0\", \"state\": \"running\"}", i ? ", " : "");
    put(&b, "]}");
    for (int i = 0; i < n; i++)
        put(&b, ", {\"name\": \"j%d\", \"queue\": \"q\", \"priority\": 50, "
               "\"requests\": {\"gpu\": 1, \"cpu\": \"%dm\"}}", i, i + 1);
    put(&b, "]}");
    double t = sim_once(&b, &sc, &res);
    if (t < 0) return -1;
    if (res.ncycles != 1 || res.cycles[0].log.ndecisions != 0) t = -1;  /* nothing placed, nothing taken */
    us_sim_result_free(&res);
    us_scenario_free(&sc);
    return t;
}

/* n low-priority pods fill n/8 nodes; an elastic job of higher priority in
 * the same queue wants n pods: n preemptions, one victim search each.
 * With account set, the time is printing the readable account instead. */
static double preemptions(int n, bool account) {
    buf b = {0};
    us_scenario sc;
    us_sim_result res;
    int nodes = (n + 7) / 8;
    put(&b, "{\"name\": \"preempt\", \"horizon\": 0, \"nodes\": [");
    put_gpu_nodes(&b, nodes);
    put(&b, "], \"queues\": [{\"name\": \"q\", \"resources\": {\"gpu\": {\"quota\": %d}}}], "
            "\"workloads\": [{\"name\": \"low\", \"queue\": \"q\", \"priority\": 50, "
            "\"controller\": \"deployment\", \"replicas\": %d, \"requests\": {\"gpu\": 1}, \"pods\": [",
        8 * nodes, 8 * nodes);
    for (int i = 0; i < 8 * nodes; i++)
        put(&b, "%s{\"node\": \"n%d\", \"state\": \"running\"}", i ? ", " : "", i / 8);
    put(&b, "]}, {\"name\": \"high\", \"queue\": \"q\", \"priority\": 200, \"controller\": "
            "\"deployment\", \"replicas\": %d, \"requests\": {\"gpu\": 1}}]}", n);
    double t = sim_once(&b, &sc, &res);
    if (t < 0) return -1;
    if (res.ncycles != 1 || count_op(&res, US_OP_EVICT) != (size_t)n) t = -1;
    if (t >= 0 && account) {
        FILE *f = fopen("/dev/null", "w");
        us_err err = {0};
        t = now();
        if (!f || us_output_account(f, &res, &sc.state, false, &err) < 0) t = -1;
        else t = now() - t;
        if (f) fclose(f);
    }
    us_sim_result_free(&res);
    us_scenario_free(&sc);
    return t;
}

static double bench_preemptions(int n) { return preemptions(n, false); }
static double bench_preemption_account(int n) { return preemptions(n, true); }

/* n/8 gangs of eight one-GPU pods (min_member 8), each filling a node,
 * and an elastic job of higher priority in the same queue wanting n pods:
 * each victim search takes a whole gang (it cannot lose one pod), n/8
 * gangs evicted whole; each such eviction scanned every pod of the cluster
 * and every pod placed so far. */
static double bench_gang_preemptions(int n) {
    buf b = {0};
    us_scenario sc;
    us_sim_result res;
    int gangs = (n + 7) / 8;
    put(&b, "{\"name\": \"gangs\", \"horizon\": 0, \"nodes\": [");
    put_gpu_nodes(&b, gangs);
    put(&b, "], \"queues\": [{\"name\": \"q\", \"resources\": {\"gpu\": {\"quota\": %d}}}], "
            "\"workloads\": [", 8 * gangs);
    for (int g = 0; g < gangs; g++) {
        put(&b, "%s{\"name\": \"g%d\", \"queue\": \"q\", \"priority\": 50, \"replicas\": 8, "
                "\"min_member\": 8, \"requests\": {\"gpu\": 1}, \"pods\": [", g ? ", " : "", g);
        for (int i = 0; i < 8; i++) put(&b, "%s{\"node\": \"n%d\", \"state\": \"running\"}", i ? ", " : "", g);
        put(&b, "]}");
    }
    put(&b, ", {\"name\": \"high\", \"queue\": \"q\", \"priority\": 200, \"controller\": "
            "\"deployment\", \"replicas\": %d, \"requests\": {\"gpu\": 1}}]}", 8 * gangs);
    double t = sim_once(&b, &sc, &res);
    if (t < 0) return -1;
    if (res.ncycles != 1 || count_op(&res, US_OP_EVICT) != (size_t)(8 * gangs)) t = -1;
    us_sim_result_free(&res);
    us_scenario_free(&sc);
    return t;
}

/* n identical nodes, a background agent on each and a background
 * deployment on every other one, and n/2 jobs of 8 GPUs placed in one
 * cycle: the tie-break chooses among n identical nodes for each. */
static double bench_wide_tie_break(int n) {
    buf b = {0};
    us_scenario sc;
    us_sim_result res;
    put(&b, "{\"name\": \"ties\", \"horizon\": 0, \"nodes\": [");
    put_gpu_nodes(&b, n);
    put(&b, "], \"queues\": [{\"name\": \"q\", \"resources\": {\"gpu\": {\"quota\": %d}}}, "
            "{\"name\": \"bg\", \"resources\": {\"gpu\": {\"quota\": 0, \"over_quota_weight\": 0}, "
            "\"cpu\": {\"quota\": 0, \"over_quota_weight\": 0}, \"memory\": {\"quota\": 0, "
            "\"over_quota_weight\": 0}}}], \"workloads\": [{\"name\": \"agent\", \"queue\": \"bg\", "
            "\"labels\": {\"kai.scheduler/background\": \"true\"}, \"controller\": \"daemonset\", "
            "\"requests\": {\"cpu\": 1}, \"pods\": [",
        8 * n);
    for (int i = 0; i < n; i++) put(&b, "%s{\"node\": \"n%d\", \"state\": \"running\"}", i ? ", " : "", i);
    put(&b, "]}, {\"name\": \"burn\", \"queue\": \"bg\", \"labels\": {\"kai.scheduler/background\": "
            "\"true\"}, \"controller\": \"deployment\", \"replicas\": %d, \"requests\": {\"gpu\": 1}, "
            "\"pods\": [", n / 2);
    for (int i = 0; i < n / 2; i++)
        put(&b, "%s{\"node\": \"n%d\", \"state\": \"running\"}", i ? ", " : "", 2 * i);
    put(&b, "]}");
    for (int i = 0; i < n / 2; i++)
        put(&b, ", {\"name\": \"j%d\", \"queue\": \"q\", \"requests\": {\"gpu\": 8}}", i);
    put(&b, "]}");
    double t = sim_once(&b, &sc, &res);
    if (t < 0) return -1;
    /* every job placed, and no burn-in pod evicted: the tie-break put the
     * jobs on the nodes without one */
    if (res.ncycles != 1 || count_op(&res, US_OP_BIND) != (size_t)(n / 2) || count_op(&res, US_OP_EVICT) != 0)
        t = -1;
    us_sim_result_free(&res);
    us_scenario_free(&sc);
    return t;
}

/* n teams under one department, a one-pod job pending in each: every
 * round of the cycle serves the team first in queue order. */
static double bench_team_queues(int n) {
    buf b = {0};
    us_scenario sc;
    us_sim_result res;
    int nodes = (n + 7) / 8;
    put(&b, "{\"name\": \"teams\", \"horizon\": 0, \"nodes\": [");
    put_gpu_nodes(&b, nodes);
    put(&b, "], \"queues\": [{\"name\": \"org\", \"resources\": {\"gpu\": {\"quota\": %d}}}", n);
    for (int i = 0; i < n; i++)
        put(&b, ", {\"name\": \"t%d\", \"parent\": \"org\", \"resources\": {\"gpu\": {\"quota\": 1}}}", i);
    put(&b, "], \"workloads\": [");
    for (int i = 0; i < n; i++)
        put(&b, "%s{\"name\": \"j%d\", \"queue\": \"t%d\", \"requests\": {\"gpu\": 1}}", i ? ", " : "", i, i);
    put(&b, "]}");
    double t = sim_once(&b, &sc, &res);
    if (t < 0) return -1;
    if (res.ncycles != 1 || count_op(&res, US_OP_BIND) != (size_t)n) t = -1;
    us_sim_result_free(&res);
    us_scenario_free(&sc);
    return t;
}

static int run_scale_cases(int n) {
    double t;
    int failed = 0;
    printf("\npaths that must stay linear (%d)\n", n);
    char what[96];
    /* at m and at 2m: the second time twice the first is linear */
    static double (*const cases[])(int) = {bench_node_upserts, bench_pod_reports, bench_workload_upserts,
                                           bench_sim_timeouts, bench_pod_churn, bench_workload_removals,
                                           bench_node_removals, bench_workload_resync, bench_node_growth,
                                           bench_pod_cache, bench_workload_index, bench_queue_chain,
                                           bench_distinct_failures, bench_preemptions,
                                           bench_preemption_account, bench_wide_tie_break,
                                           bench_team_queues, bench_gang_preemptions};
    for (int k = 0; k < 18; k++) {
        int m = k == 9 || k == 10 ? n / 10
                : k < 2 || k == 4 || k == 6 || k == 8 || k == 11 || k >= 12 ? n / 250
                                                                           : n / 100;
        double t1 = cases[k](m), t2 = cases[k](2 * m);
        if (k == 0) snprintf(what, sizeof what, "%d nodes upserted one at a time, 3 DaemonSets", m);
        else if (k == 1) snprintf(what, sizeof what, "%d nodes' 2 pods each reported one by one", m);
        else if (k == 2) snprintf(what, sizeof what, "%d workloads upserted one by one, each read", m);
        else if (k == 3) snprintf(what, sizeof what, "%d workloads completing in one simulated step", m);
        else if (k == 4) snprintf(what, sizeof what, "%d pods replaced one by one (rolling restart)", m);
        else if (k == 5) snprintf(what, sizeof what, "%d finished jobs removed one by one", m);
        else if (k == 6) snprintf(what, sizeof what, "%d nodes removed one by one, 2 pods each", m);
        else if (k == 7) snprintf(what, sizeof what, "%d workloads resynced, each then its pod", m);
        else if (k == 8) snprintf(what, sizeof what, "%d nodes added, then relabelled, each + pod", m);
        else if (k == 9) snprintf(what, sizeof what, "serve: %d pods cached in any order, removed", m);
        else if (k == 10) snprintf(what, sizeof what, "serve: a Job's %d pods indexed, then gone", m);
        else if (k == 11) snprintf(what, sizeof what, "serve: a chain of %d queues, deepest first", m);
        else if (k == 12) snprintf(what, sizeof what, "a cycle of %d distinct jobs that all fail", m);
        else if (k == 13) snprintf(what, sizeof what, "a cycle of %d preemptions, a search each", m);
        else if (k == 14) snprintf(what, sizeof what, "the readable account of %d preemptions", m);
        else if (k == 15) snprintf(what, sizeof what, "tie-break among %d identical nodes", m);
        else if (k == 16) snprintf(what, sizeof what, "a cycle of %d jobs, each in a queue of its own", m);
        else snprintf(what, sizeof what, "a cycle of %d gangs of 8 preempted whole", m / 8);
        printf("  %-48s %8.3f s, twice as many %8.3f s (%.2fx)%s\n", what, t1, t2,
               t1 > 0 ? t2 / t1 : 0, t1 < 0 || t2 < 0 ? "  FAILED" : "");
        failed |= t1 < 0 || t2 < 0;
    }
    for (int k = 0; k < 3; k++) {
        if (k == 0) {
            t = bench_scale_down(n);
            snprintf(what, sizeof what, "scale-down, %d replicas to 1", n);
        } else if (k == 1) {
            t = bench_chain_load(n / 10);
            snprintf(what, sizeof what, "scenario load, a queue chain %d deep", n / 10);
        } else {
            t = bench_chain_upserts(n / 250);
            snprintf(what, sizeof what, "a chain of %d queues, one upsert at a time", n / 250);
        }
        printf("  %-48s %8.3f s%s\n", what, t, t < 0 ? "  FAILED" : "");
        failed |= t < 0;
    }
    return failed;
}

/* --load FILE: load FILE `repeats` times in this process (each freed
 * before the next) and print the fastest, in CPU and wall seconds, and the
 * mean CPU: loading alone, for side-by-side runs of two builds on a shared
 * machine, where a whole benchmark run is too long to alternate often. */
static int load_only(const char *path) {
    double best_cpu = 0, best_wall = 0, sum_cpu = 0;
    for (int k = 0; k < repeats; k++) {
        us_scenario sc;
        us_err err = {0};
        double t0 = now(), c0 = cpu_now();
        if (us_scenario_load_file(&sc, path, &err) < 0) {
            fprintf(stderr, "understory-bench: %s: %s\n", path, err.msg);
            return 1;
        }
        double wall = now() - t0, cpu = cpu_now() - c0;
        us_scenario_free(&sc);
        if (k == 0 || cpu < best_cpu) best_cpu = cpu;
        if (k == 0 || wall < best_wall) best_wall = wall;
        sum_cpu += cpu;
    }
    printf("load %s: best of %d %.3f s cpu (%.3f s wall), mean %.3f s cpu\n", path, repeats, best_cpu,
           best_wall, sum_cpu / repeats);
    return 0;
}

int main(int argc, char **argv) {
    int scale = 1000000;
    int sizes[16] = {1000, 5000, 10000};
    int nsizes = 3;
    bool shapes[2] = {true, true};  /* plain, real */
    uint64_t seed = 42;
    const char *policies = "policies", *write_to = NULL, *load_from = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
            nsizes = 0;
            for (char *s = argv[++i]; *s && nsizes < 16;) {
                long v = strtol(s, &s, 10);
                if (v < 1 || v > 1000000 || (*s && *s != ',')) {
                    fprintf(stderr, "understory-bench: --nodes: expected sizes like 1000,10000\n");
                    return 2;
                }
                sizes[nsizes++] = (int)v;
                if (*s == ',') s++;
            }
        } else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            shapes[0] = strcmp(v, "plain") == 0 || strcmp(v, "plain,real") == 0 || strcmp(v, "real,plain") == 0;
            shapes[1] = strcmp(v, "real") == 0 || strcmp(v, "plain,real") == 0 || strcmp(v, "real,plain") == 0;
            if (!shapes[0] && !shapes[1]) {
                fprintf(stderr, "understory-bench: --shape: expected plain, real or plain,real\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--policies") == 0 && i + 1 < argc) {
            policies = argv[++i];
        } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            repeats = atoi(argv[++i]);
            if (repeats < 1) repeats = 1;
        } else if (strcmp(argv[i], "--cycles") == 0 && i + 1 < argc) {
            ncycles = atoi(argv[++i]);
            if (ncycles < 1 || ncycles > MAXCYC + 1) ncycles = 2;
        } else if (strcmp(argv[i], "--write") == 0 && i + 1 < argc) {
            write_to = argv[++i];
        } else if (strcmp(argv[i], "--load") == 0 && i + 1 < argc) {
            load_from = argv[++i];
        } else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc) {
            scale = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--perf-fifo") == 0 && i + 1 < argc) {
            char *v = argv[++i], *comma = strchr(v, ',');
            if (!comma || comma == v || !comma[1]) {
                fprintf(stderr, "understory-bench: --perf-fifo: expected CTL,ACK (two FIFOs)\n");
                return 2;
            }
            *comma = '\0';
            perf_ctl_fifo = v;
            perf_ack_fifo = comma + 1;
        } else if (strcmp(argv[i], "--perf-cycle") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "lua,first") && strcmp(v, "lua,change") && strcmp(v, "lua,quiet") &&
                strcmp(v, "c,first") && strcmp(v, "c,change") && strcmp(v, "c,quiet") &&
                strcmp(v, "lua,api") && strcmp(v, "c,api")) {
                fprintf(stderr, "understory-bench: --perf-cycle: expected lua|c,first|change|quiet|api, "
                                "not \"%s\"\n", v);
                return 2;
            }
            perf_api = strstr(v, "api") != NULL;
            perf_lua = v[0] == 'l';
            perf_at = strstr(v, "first") ? PERF_FIRST : strstr(v, "quiet") ? PERF_QUIET : PERF_CHANGE;
        } else {
            fprintf(stderr, "usage: understory-bench [--nodes N[,N...]] [--shape plain|real|plain,real] "
                            "[--seed S] [--policies DIR] [--cycles K] [--repeat R] [--write FILE] [--load FILE] "
                            "[--scale N] [--perf-fifo CTL,ACK] [--perf-cycle lua|c,first|change|quiet|api]\n");
            return 2;
        }
    }
    if (load_from) return load_only(load_from);
    if (write_to) {
        buf b = {0};
        generate(&b, sizes[0], seed, shapes[1] && !shapes[0]);
        FILE *f = fopen(write_to, "w");
        if (!f || fwrite(b.s, 1, b.n, f) != b.n || fclose(f) != 0) {
            fprintf(stderr, "understory-bench: %s: %s\n", write_to, strerror(errno));
            return 1;
        }
        free(b.s);
        return 0;
    }

    printf("understory benchmark: %d cycles and one after a 1%% change, seed %llu, policies %s vs "
           "built-in C, best of %d runs\n", ncycles, (unsigned long long)seed, policies, repeats);
    int failed = 0;
    for (int shape = 0; shape < 2; shape++) {
        if (!shapes[shape]) continue;
        const char *label = shape ? "real (unique hostname, instance type, zone)" : "plain (a zone)";
        double base = 0;
        int base_nodes = 0;
        for (int s = 0; s < nsizes; s++) {
            result lua, c;
            if (best_of(sizes[s], seed, shape, policies, &lua) < 0 ||
                best_of(sizes[s], seed, shape, NULL, &c) < 0) {
                printf("%d nodes, %s labels: FAILED\n", sizes[s], label);
                failed = 1;
                continue;
            }
            printf("\n%d nodes, %zu pods, %zu pending AI pods, node labels %s\n", sizes[s], lua.pods,
                   lua.pending_ai, label);
            print_row("lua", &lua);
            print_row("c", &c);
            printf("  lua / c cycle time: %.2fx full (#1), %.2fx after the 1%% change (+1%%)\n",
                   c.cycle > 0 ? lua.cycle / c.cycle : 0, c.inc > 0 ? lua.inc / c.inc : 0);
            if (run_io(sizes[s], seed, shape, policies) < 0) failed = 1;
            if (run_api(sizes[s], seed, shape, policies) < 0) failed = 1;
            if (!base_nodes) {
                base = lua.cycle;
                base_nodes = sizes[s];
            } else {
                printf("  cost per node vs %d nodes: %.2fx (1.00 = linear)\n", base_nodes,
                       (lua.cycle / sizes[s]) / (base / base_nodes));
            }
        }
    }
    if (scale >= 250 && run_scale_cases(scale)) failed = 1;
    return failed;
}
