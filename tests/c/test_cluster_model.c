/*
 * test_cluster_model.c — the engine driven through the public API the way
 * `understory serve` drives it on a Kubernetes cluster, against a model of
 * that cluster, with seeded random workloads.
 *
 * On a cluster the engine does not own pod names: a controller creates
 * each pod, and its replacement after an eviction, under a new name, some
 * time later; a bind can fail (409); a deletion takes its time.  The
 * caller binds only pods that exist and are pending, deletes only pods
 * bound where the decision says, and reports what changed (serve/writes.c,
 * serve/workloads.c).  The model does the same and, after every step,
 * checks:
 *
 *   same view   every pod the engine has on a node (running, terminating,
 *               or pipelined onto it) is a pod the cluster has, in the
 *               matching state, and every pod the cluster has on a node
 *               the engine has there: no pod the engine placed that the
 *               cluster cannot have (a controller's replacement before it
 *               exists), none the cluster runs that the engine misses;
 *   reports     every report of a real pod is taken;
 *   room        no node holds more than its capacity on the cluster;
 *   progress    no pod stays pipelined longer than the slowest deletion
 *               it waits for (first come first served on a node: a pod
 *               placed later never binds first into the room that freed
 *               for it), and room free at the end leaves no pod pending
 *               that it fits.
 *
 * Deterministic by seed (xorshift); seeds 1..N with N = 60, or
 * UNDERSTORY_MODEL_SEEDS; one seed alone with UNDERSTORY_MODEL_SEED.  A
 * failure names the seed, the step and the pod; MODEL_DEBUG=1 prints each
 * decision as it is carried out and the end state.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "understory.h"

#define NODES 6
#define GPUS 8
#define MAXPODS 4096
#define MAXWLS 64
#define STEPS 160
#define QUIET 40              /* last steps: nothing arrives */
#define MAX_DELETE 6.0        /* a deletion takes up to this long */

static uint64_t rng;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static int roll(int n) { return (int)(next() % (uint64_t)n); }
static bool chance(int percent) { return roll(100) < percent; }

typedef enum { M_PENDING, M_BOUND, M_TERMINATING } mstate;

typedef struct mpod {
    char name[48];
    int wl, node, pin;       /* node: -1 pending; pin: a DaemonSet pod's node */
    mstate st;
    double gone_at;          /* M_TERMINATING: when the deletion completes */
    int pipelined_since;     /* step the engine first had it pipelined, or -1 */
    bool live;
} mpod;

typedef struct mwl {
    char name[32];
    bool bg, daemonset;
    int replicas, gpu, made; /* made: names handed out */
    int priority;            /* >= 100: non-preemptible, within quota only */
    double grace;
    int create_at;           /* step the controller next creates a pod */
} mwl;

/* What the runs did, over all seeds: the properties are only worth as much
 * as the traffic that exercised them. */
static struct {
    long bg_binds, bg_evictions, ai_binds, ai_evictions, failed_binds, pipelines;
} seen_ops;

typedef struct model {
    us_engine *e;
    mpod pods[MAXPODS];
    int npods;
    mwl wls[MAXWLS];
    int nwls;
    unsigned seed;
    int step;
    char failure[512];
} model;

static void failf(model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failf(model *m, const char *fmt, ...) {
    if (m->failure[0]) return;
    int k = snprintf(m->failure, sizeof m->failure, "seed %u step %d: ", m->seed, m->step);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->failure + k, sizeof m->failure - (size_t)k, fmt, ap);
    va_end(ap);
}

static mpod *find(model *m, const char *name) {
    for (int i = 0; i < m->npods; i++)
        if (m->pods[i].live && !strcmp(m->pods[i].name, name)) return &m->pods[i];
    return NULL;
}

static const char *node_name(int n) {
    static char names[NODES][16];
    snprintf(names[n], sizeof names[n], "n%d", n);
    return names[n];
}

static int node_index(const char *name) { return name && name[0] == 'n' ? atoi(name + 1) : -1; }

/* A controller creates a pod: a new name, pending; reported as serve does. */
static void create_pod(model *m, int w, int pin) {
    if (m->npods == MAXPODS) return;
    mwl *wl = &m->wls[w];
    mpod *p = &m->pods[m->npods++];
    memset(p, 0, sizeof *p);
    char name[sizeof p->name];
    snprintf(name, sizeof name, "%.24s-x%d", wl->name, wl->made++);
    memcpy(p->name, name, sizeof name);
    p->wl = w;
    p->node = -1;
    p->pin = pin;
    p->st = M_PENDING;
    p->pipelined_since = -1;
    p->live = true;
    us_pod_spec s = {.name = p->name, .workload = wl->name, .pin = pin >= 0 ? node_name(pin) : NULL};
    us_error err;
    if (us_engine_upsert_pod(m->e, &s, &err) != US_OK)
        failf(m, "the cluster's new pod %s was refused: %s", p->name, err.message);
}

static int live_pods(const model *m, int w, int pin) {
    int n = 0;
    for (int i = 0; i < m->npods; i++) {
        const mpod *p = &m->pods[i];
        if (p->live && p->wl == w && p->st != M_TERMINATING && (pin < 0 || p->pin == pin)) n++;
    }
    return n;
}

/* Controllers: each workload short of its replicas gets a pod, a step or
 * two after it fell short (as a ReplicaSet, Job or DaemonSet would). */
static void controllers(model *m) {
    for (int w = 0; w < m->nwls; w++) {
        mwl *wl = &m->wls[w];
        if (wl->daemonset) {
            for (int n = 0; n < NODES; n++)
                if (live_pods(m, w, n) == 0 && chance(60)) create_pod(m, w, n);
            continue;
        }
        if (live_pods(m, w, -1) >= wl->replicas) {
            wl->create_at = -1;
            continue;
        }
        if (wl->create_at < 0) wl->create_at = m->step + roll(3);
        if (m->step >= wl->create_at) {
            /* a gang's pods may appear over several steps */
            int k = chance(50) ? wl->replicas : 1;
            for (int i = 0; i < k && live_pods(m, w, -1) < wl->replicas; i++) create_pod(m, w, -1);
            wl->create_at = -1;
        }
    }
}

/* Deletions that completed: the pod is gone from the cluster. */
static void deletions(model *m, double t) {
    for (int i = 0; i < m->npods; i++) {
        mpod *p = &m->pods[i];
        if (!p->live || p->st != M_TERMINATING || p->gone_at > t) continue;
        p->live = false;
        us_error err;
        if (us_engine_remove_pod(m->e, p->name, &err) != US_OK)
            failf(m, "the removal of the cluster's pod %s was refused: %s", p->name, err.message);
    }
}

static void add_workload(model *m, bool bg, bool daemonset, int replicas, int gpu, int priority,
                         const char *queue, double t) {
    if (m->nwls == MAXWLS) return;
    mwl *wl = &m->wls[m->nwls];
    memset(wl, 0, sizeof *wl);
    snprintf(wl->name, sizeof wl->name, "%s%d", bg ? (daemonset ? "health" : "burn") : "train", m->nwls);
    wl->bg = bg;
    wl->daemonset = daemonset;
    wl->replicas = replicas;
    wl->gpu = gpu;
    wl->priority = priority;
    wl->grace = roll(3);
    wl->create_at = m->step + roll(2);
    char json[512], gang[64] = "";
    if (!daemonset) snprintf(gang, sizeof gang, "\"replicas\": %d, \"min_member\": %d, ", replicas, bg ? 1 : replicas);
    snprintf(json, sizeof json,
             "{\"name\": \"%s\", \"queue\": \"%s\", \"priority\": %d, \"controller\": \"%s\", "
             "%s\"requests\": {\"gpu\": %d, \"cpu\": \"1\", \"memory\": \"1Gi\"}, "
             "\"termination_grace\": %g%s}",
             wl->name, queue, priority, daemonset ? "daemonset" : bg ? "deployment" : "job", gang, gpu,
             wl->grace, bg ? ", \"labels\": {\"kai.scheduler/background\": \"true\"}" : "");
    us_error err;
    if (us_engine_upsert_workload_json(m->e, json, t, &err) != US_OK) {
        failf(m, "workload %s refused: %s", wl->name, err.message);
        return;
    }
    m->nwls++;
}

/* The decisions of the cycle, carried out as serve does: a bind of a pod
 * that exists and is pending (one in seven answered 409, so reported
 * pending again), an eviction of a pod bound on that node (deleted, its
 * deletion taking up to MAX_DELETE seconds; reported terminating there). */
static void apply(model *m, double t) {
    us_error err;
    for (size_t i = 0; i < us_engine_decision_count(m->e); i++) {
        us_decision_info d;
        if (us_engine_decision(m->e, i, &d) != US_OK) continue;
        if (getenv("MODEL_DEBUG"))
            fprintf(stderr, "t=%g %s %s %s %s\n", t, d.op_name, d.pod, d.node, d.action ? d.action : "-");
        mpod *p = find(m, d.pod);
        int n = node_index(d.node);
        if (d.op == US_DECISION_BIND) {
            if (!p || p->st != M_PENDING) continue; /* no such pod to bind */
            if (m->step < STEPS - 5 && chance(14)) {
                us_pod_spec s = {.name = p->name, .workload = m->wls[p->wl].name,
                                 .pin = p->pin >= 0 ? node_name(p->pin) : NULL};
                if (us_engine_upsert_pod(m->e, &s, &err) != US_OK)
                    failf(m, "pod %s reported pending after a failed bind was refused: %s", p->name,
                          err.message);
                seen_ops.failed_binds++;
                continue;
            }
            p->st = M_BOUND;
            p->node = n;
            if (m->wls[p->wl].bg) seen_ops.bg_binds++;
            else seen_ops.ai_binds++;
        } else if (d.op == US_DECISION_PIPELINE) {
            seen_ops.pipelines++;
        } else if (d.op == US_DECISION_EVICT) {
            if (p && p->st == M_PENDING) p->pipelined_since = -1; /* its nomination withdrawn */
            if (!p || p->st != M_BOUND || p->node != n) continue; /* nothing there to delete */
            p->st = M_TERMINATING;
            if (m->wls[p->wl].bg) seen_ops.bg_evictions++;
            else seen_ops.ai_evictions++;
            p->gone_at = t + m->wls[p->wl].grace + roll((int)MAX_DELETE + 1);
            us_pod_spec s = {.name = p->name, .node = d.node, .terminating = 1};
            if (us_engine_upsert_pod(m->e, &s, &err) != US_OK)
                failf(m, "pod %s reported terminating on %s was refused: %s", p->name, d.node,
                      err.message);
        }
    }
}

/* The engine's view against the cluster's, node by node and pod by pod. */
static void compare(model *m) {
    int gpu[NODES] = {0};
    bool seen[MAXPODS] = {false};
    for (size_t i = 0; i < us_engine_pod_count(m->e); i++) {
        us_pod_info x;
        if (us_engine_pod(m->e, i, &x) != US_OK) continue;
        if (x.external) continue;
        mpod *p = find(m, x.name);
        int n = node_index(x.node);
        if (x.phase == US_PHASE_PENDING) continue; /* a controller's pod to come, or pending */
        if (x.phase == US_PHASE_PIPELINED) {
            if (!p || p->st != M_PENDING)
                failf(m, "the engine pipelined %s onto %s, a pod the cluster has not pending", x.name,
                      x.node);
            else if (p->pipelined_since < 0) p->pipelined_since = m->step;
            else if (m->step - p->pipelined_since > (int)MAX_DELETE + 5)
                failf(m, "pod %s pipelined onto %s since step %d: the room never frees", x.name, x.node,
                      p->pipelined_since);
            continue;
        }
        mstate want = x.phase == US_PHASE_RUNNING ? M_BOUND : M_TERMINATING;
        if (!p || p->node != n || p->st != want) {
            failf(m, "the engine has %s %s on %s; the cluster has it %s", x.name, x.phase_name, x.node,
                  !p ? "nowhere" : p->node < 0 ? "pending" : p->st == M_BOUND ? "bound" : "terminating");
            continue;
        }
        seen[p - m->pods] = true;
    }
    for (int i = 0; i < m->npods; i++) {
        mpod *p = &m->pods[i];
        if (!p->live) continue;
        if (p->st == M_PENDING) {
            bool pipelined = false;
            for (size_t k = 0; k < us_engine_pod_count(m->e) && !pipelined; k++) {
                us_pod_info x;
                pipelined = us_engine_pod(m->e, k, &x) == US_OK && x.phase == US_PHASE_PIPELINED &&
                            !strcmp(x.name, p->name);
            }
            if (!pipelined) p->pipelined_since = -1;
            continue;
        }
        gpu[p->node] += m->wls[p->wl].gpu;
        if (!seen[i])
            failf(m, "the cluster has %s %s on %s; the engine does not", p->name,
                  p->st == M_BOUND ? "bound" : "terminating", node_name(p->node));
    }
    for (int n = 0; n < NODES; n++)
        if (gpu[n] > GPUS) failf(m, "node %s holds %d GPUs of %d on the cluster", node_name(n), gpu[n], GPUS);
}

/* After the quiet steps: room free on the cluster (background pods count as
 * free for AI work, which never sees them) leaves no pod pending that fits
 * it.  A background pod takes one GPU; a preemptible AI gang of equal pods
 * fits when the free slots of its size number its pods. */
static void settled(model *m) {
    int ai[NODES] = {0}, all[NODES] = {0};
    for (int i = 0; i < m->npods; i++) {
        const mpod *p = &m->pods[i];
        if (!p->live || p->st == M_PENDING) continue;
        all[p->node] += m->wls[p->wl].gpu;
        if (!m->wls[p->wl].bg || p->st == M_TERMINATING) ai[p->node] += m->wls[p->wl].gpu;
    }
    for (int w = 0; w < m->nwls; w++) {
        const mwl *wl = &m->wls[w];
        int pending = 0, other = 0;
        const char *one = NULL;
        for (int i = 0; i < m->npods; i++) {
            const mpod *p = &m->pods[i];
            if (!p->live || p->wl != w) continue;
            if (p->st == M_PENDING) {
                pending++;
                one = p->name;
            } else other++;
        }
        /* non-preemptible work may wait on quota with room free */
        if (!pending || wl->daemonset || wl->priority >= 100) continue;
        int slots = 0;
        for (int n = 0; n < NODES; n++) {
            int free_ = GPUS - (wl->bg ? all[n] : ai[n]);
            slots += wl->gpu ? free_ / wl->gpu : 1;
        }
        if (wl->bg ? slots > 0 : (other == 0 && pending == wl->replicas && slots >= wl->replicas))
            failf(m, "at the end %s (of %d pod(s) pending of %s) stays pending with room for it free",
                  one, pending, wl->name);
    }
}

/* MODEL_DEBUG: the end state, the engine's (W workloads, E pods) and the
 * cluster's (M pods: state 0 pending, 1 bound, 2 terminating; node). */
static void dump(model *m) {
    for (size_t i = 0; i < us_engine_workload_count(m->e); i++) {
        us_workload_info x;
        const char *why = us_engine_workload_pending_reason(m->e, i);
        if (us_engine_workload(m->e, i, &x) == US_OK)
            fprintf(stderr, "W %s blocked=%s reason=%s\n", x.name, x.blocked ? x.blocked : "-", why ? why : "-");
    }
    for (size_t i = 0; i < us_engine_pod_count(m->e); i++) {
        us_pod_info x;
        if (us_engine_pod(m->e, i, &x) == US_OK)
            fprintf(stderr, "E %s %s %s\n", x.name, x.phase_name, x.node ? x.node : "-");
    }
    for (int i = 0; i < m->npods; i++)
        if (m->pods[i].live) fprintf(stderr, "M %s %d %d\n", m->pods[i].name, m->pods[i].st, m->pods[i].node);
}

static bool run_seed(unsigned seed, char *why, size_t len) {
    static model m;
    memset(&m, 0, sizeof m);
    m.seed = seed;
    rng = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)seed * 0x2545F4914F6CDD1DULL);
    us_engine_options o;
    us_engine_options_init(&o);
    o.check_invariants = 1;
    o.reported_pods = 1;
    us_error err;
    if (us_engine_create(&o, &m.e, &err) != US_OK) {
        snprintf(why, len, "create: %.400s", err.message);
        return false;
    }
    char json[256];
    for (int n = 0; n < NODES; n++) {
        snprintf(json, sizeof json, "{\"name\": \"%s\", \"gpu\": %d, \"cpu\": \"64\", \"memory\": \"512Gi\"}",
                 node_name(n), GPUS);
        if (us_engine_upsert_node_json(m.e, json, &err) != US_OK) failf(&m, "node: %s", err.message);
    }
    const char *queues[] = {
        "{\"name\": \"org\"}",
        "{\"name\": \"a\", \"parent\": \"org\", \"resources\": {\"gpu\": {\"quota\": 24}}}",
        "{\"name\": \"b\", \"parent\": \"org\", \"resources\": {\"gpu\": {\"quota\": 24}}}",
        /* background work's queue: no quota, no over-quota weight */
        "{\"name\": \"infra\", \"resources\": {\"gpu\": {\"quota\": 0, \"over_quota_weight\": 0}, "
        "\"cpu\": {\"quota\": 0, \"over_quota_weight\": 0}, \"memory\": {\"quota\": 0, \"over_quota_weight\": 0}}}",
    };
    for (size_t q = 0; q < sizeof queues / sizeof *queues; q++)
        if (us_engine_upsert_queue_json(m.e, queues[q], &err) != US_OK) failf(&m, "queue: %s", err.message);
    add_workload(&m, true, true, 0, 0, 50, "infra", 0);
    add_workload(&m, true, false, 20 + roll(20), 1, 50, "infra", 0);
    for (m.step = 0; m.step < STEPS && !m.failure[0]; m.step++) {
        double t = m.step;
        deletions(&m, t);
        if (m.step < STEPS - QUIET && chance(25))
            add_workload(&m, false, false, 1 + roll(4), 1 << roll(3), chance(30) ? 125 : 50,
                         chance(50) ? "a" : "b", t);
        controllers(&m);
        if (us_engine_run_cycle(m.e, t, &err) != US_OK) {
            failf(&m, "cycle: %s", err.message);
            break;
        }
        apply(&m, t);
        compare(&m);
    }
    if (!m.failure[0]) settled(&m);
    if (getenv("MODEL_DEBUG")) dump(&m);
    us_engine_destroy(m.e);
    snprintf(why, len, "%s", m.failure);
    return !m.failure[0];
}

TEST(engine_view_is_the_clusters) {
    const char *env = getenv("UNDERSTORY_MODEL_SEEDS");
    unsigned seeds = env ? (unsigned)atoi(env) : 60, failed = 0, first = 1;
    if (getenv("UNDERSTORY_MODEL_SEED")) first = seeds = (unsigned)atoi(getenv("UNDERSTORY_MODEL_SEED"));
    for (unsigned s = first; s <= seeds && failed < 3; s++) {
        char why[512];
        if (!run_seed(s, why, sizeof why)) {
            fprintf(stderr, "  %s\n", why);
            failed++;
        }
    }
    CHECK(failed == 0);
    printf("  %u seeds: binds %ld AI, %ld background (%ld failed, reported pending); pipelines %ld; "
           "evictions %ld AI, %ld background\n", seeds, seen_ops.ai_binds, seen_ops.bg_binds,
           seen_ops.failed_binds, seen_ops.pipelines, seen_ops.ai_evictions, seen_ops.bg_evictions);
    if (seeds >= 20) {
        CHECK(seen_ops.ai_binds > 0 && seen_ops.bg_binds > 0 && seen_ops.failed_binds > 0);
        CHECK(seen_ops.pipelines > 0 && seen_ops.ai_evictions > 0 && seen_ops.bg_evictions > 0);
    }
}

int main(void) {
    RUN(engine_view_is_the_clusters);
    return check_report();
}
