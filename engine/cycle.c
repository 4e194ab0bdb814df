/*
 * cycle.c — one scheduling cycle, the order of its steps and nothing else:
 *
 *   expire terminated pods, stop the pods of gangs that broke, bind
 *   pipelined pods whose room is free;
 *   per node pool (in name order):
 *     snapshot + virtual eviction (plan.c), fair share (fairshare.c),
 *     allocate (allocate.c), reclaim, preempt (victims.c),
 *     the least-displacement tie-break (ties.c),
 *     background re-offer (reoffer.c), commit (commit.c);
 *   then status events: rule warnings, pending reports, gang start times;
 *   then, when asked, the invariant check (invariants.c).
 */
#include "cycle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocate.h"
#include "blocker.h"
#include "commit.h"
#include "cyclecache.h"
#include "fairshare.h"
#include "invariants.h"
#include "lifecycle.h"
#include "plan.h"
#include "reoffer.h"
#include "sort.h"
#include "ties.h"
#include "victims.h"

void us_cycle_opts_default(us_cycle_opts *o) {
    o->background_aware_ties = true;
    o->long_grace = 30;
    o->profile = NULL;
    o->score_cache = true;
    o->cycle_budget = US_CYCLE_BUDGET;
    o->cache = NULL;
    o->full_cycles = false;
    o->reported_pods = false;
#ifdef US_CHECK_INVARIANTS
    o->check_invariants = true;
#else
    o->check_invariants = false;
#endif
}

double us_cycle_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double us_cycle_cpu_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Time one step into a profile field, when profiling. */
#define STEP(o, field, call)                                                   \
    do {                                                                       \
        double t0_ = (o)->profile ? us_cycle_cpu_clock() : 0;                  \
        int rc_ = (call);                                                      \
        if ((o)->profile) (o)->profile->field += us_cycle_cpu_clock() - t0_;   \
        if (rc_ < 0) goto out;                                                 \
    } while (0)

/* Add name to the sorted set pools (*n of them) unless it is there. */
static void pool_add(const char **pools, size_t *n, const char *name) {
    size_t k = 0;
    while (k < *n && strcmp(pools[k], name) < 0) k++;
    if (k < *n && strcmp(pools[k], name) == 0) return;
    memmove(pools + k + 1, pools + k, (*n - k) * sizeof *pools);
    pools[k] = name;
    (*n)++;
}

/* The distinct pools of the nodes into pools (*n of them): read off every
 * node, or from the cache while the state's node version is the one it
 * read them at.  A name equal to the last one met costs one comparison:
 * most nodes share a few pools.  -1 when the cache says otherwise than
 * the nodes (checking builds read the nodes anyway). */
static int node_pools(const us_state *st, us_cycle_cache *cache, const char **pools, size_t *n) {
    size_t from = *n;
    bool kept = cache && cache->node_pools_version &&
                cache->node_pools_version == st->nodes_version;
    if (kept) {
        for (size_t i = 0; i < cache->n; i++)
            if (cache->pools[i].has_nodes) pool_add(pools, n, cache->pools[i].pool);
#ifndef US_CHECK_INVARIANTS
        return 0;
#endif
    }
    const char **fresh = kept ? malloc((st->nnodes + 1) * sizeof *fresh) : pools;
    size_t nfresh = kept ? 0 : *n;
    if (!fresh) return 0;  /* only a check goes without */
    const char *last = NULL;
    for (size_t i = 0; i < st->nnodes; i++) {
        const char *name = st->nodes[i].pool;
        if (last && strcmp(last, name) == 0) continue;
        last = name;
        pool_add(fresh, &nfresh, name);
    }
    if (kept) {
        bool same = nfresh == *n - from;
        for (size_t i = 0; same && i < nfresh; i++) same = strcmp(fresh[i], pools[from + i]) == 0;
        free(fresh);
        return same ? 0 : -1;
    }
    *n = nfresh;
    if (!cache) return 0;
    cache->node_pools_version = 0;
    for (size_t i = 0; i < cache->n; i++) cache->pools[i].has_nodes = false;
    for (size_t i = from; i < *n; i++) {
        us_pool_hints *h = us_cycle_cache_pool(cache, pools[i]);
        if (!h) return 0;  /* not kept: the next cycle reads the nodes again */
        h->has_nodes = true;
    }
    cache->node_pools_version = st->nodes_version;
    return 0;
}

/* Distinct pools of nodes and workloads, sorted; strings borrowed (from
 * the state or the cache).  0; -1 when memory runs out; -2 in checking
 * builds when the cache's pools of nodes are not the nodes'. */
static int collect_pools(const us_state *st, us_cycle_cache *cache, const char ***out, size_t *n) {
    const char **pools = malloc((st->nnodes + st->nworkloads + 1) * sizeof *pools), *last = NULL;
    if (!pools) return -1;
    *n = 0;
    if (node_pools(st, cache, pools, n) < 0) {
        free(pools);
        return -2;
    }
    /* a workload of a pool that has nodes adds nothing: the ledger says
     * which, without a string compared per workload */
    const int *wpool = cache ? us_ledger_workload_pools(&cache->ledger, st) : NULL;
    for (size_t i = 0; i < st->nworkloads; i++) {
        const char *name = st->workloads[i].pool;
        /* nor does one the API dropped (kept only while its gone pods are) */
        if ((wpool && wpool[i] >= 0) || st->workloads[i].dropped) continue;
        if (last && strcmp(last, name) == 0) continue;
        last = name;
        pool_add(pools, n, name);
    }
    *out = pools;
    return 0;
}

static int run_pool(us_state *st, const char *pool, const us_pod_set *set, us_policy *pol,
                    double now, const us_cycle_opts *o, us_cycle_log *log, us_queue_figures *figs,
                    us_cycle_counts *counts, us_inv *inv, us_cycle_budget *budget, us_phys *ph,
                    us_err *err) {
    us_plan p;
    us_reoffer bg = {0};
    int rc = -1;
    double t0 = o->profile ? us_cycle_cpu_clock() : 0;
    int snap = us_plan_snapshot(&p, st, pool, now, pol, o, log, set);
    if (snap == -2) return us_err_set(err, US_EINVARIANT, "%s", p.broken);
    if (snap < 0) return us_err_nomem(err);
    p.budget = budget;
    if (o->profile) o->profile->snapshot += us_cycle_cpu_clock() - t0;
    STEP(o, fairshare, us_fairshare_compute(&p, err));
    STEP(o, allocate, us_allocate(&p, err));
    STEP(o, victims, us_reclaim(&p, err) < 0 ? -1 : us_preempt(&p, err));
    STEP(o, reoffer, us_ties_spare_background(&p, err) < 0 ? -1 : us_reoffer_run(&p, &bg, err));
    if (figs)
        for (size_t q = 0; q < st->nqueues; q++) {
            figs[q].allocated = us_res_add(figs[q].allocated, p.alloc[q]);
            for (int r = 0; r < US_NRES; r++) figs[q].fair[r] += p.fair[q * US_NRES + r];
        }
    if (inv && us_inv_record(inv, &p, &bg) < 0) {
        us_err_nomem(err);
        goto out;
    }
    STEP(o, commit, us_commit(&p, &bg, ph, counts, err));
    rc = 0;
out:
    us_reoffer_free(&bg);
    us_plan_free(&p);
    return rc;
}

/* A node without cpu or memory can never run a pod that asks for them,
 * which is almost every pod: most likely a typo in its spec.  Said once. */
static int node_warnings(us_state *st, us_cycle_log *log) {
    /* no node added or changed since every node was looked at: a pass over
     * 130,000 nodes was 4% of a quiet cycle */
    if (st->nodes_warned && st->nodes_warned == st->node_specs_version) return 0;
    for (size_t i = 0; i < st->nnodes; i++) {
        us_node *n = &st->nodes[i];
        bool cpu = n->cap.v[US_CPU] > 0, mem = n->cap.v[US_MEM] > 0;
        if (n->removed || n->warned || (cpu && mem)) continue;
        n->warned = true;
        if (us_log_event(log, "Warning", "IncompleteCapacity", n->name, NULL,
                         "node has no %s capacity: it can never run a pod that requests %s",
                         !cpu && !mem ? "cpu and no memory" : !cpu ? "cpu" : "memory",
                         !cpu && !mem ? "either" : !cpu ? "cpu" : "memory") < 0)
            return -1;
    }
    st->nodes_warned = st->node_specs_version;
    return 0;
}

/* Warnings a workload draws once: a broken background rule, a long grace. */
static int rule_warnings(us_state *st, const us_cycle_opts *o, us_cycle_log *log) {
    if (node_warnings(st, log) < 0) return -1;
    for (size_t i = 0; i < st->nworkloads; i++) {
        us_workload *w = &st->workloads[i];
        if (w->state != US_WL_ACTIVE || w->warned) continue;
        w->warned = true;
        /* a background label other than "true" is named, whatever it does */
        const char *label = us_labels_get(&w->labels, US_BACKGROUND_LABEL);
        if (label && strcmp(label, "true") != 0) {
            bool ai = strcmp(label, "false") == 0;
            const char *ann[] = {"label", US_BACKGROUND_LABEL, "value", label, NULL};
            if (us_log_event(log, "Warning", ai ? "BackgroundLabel" : "NotScheduled", w->name, ann,
                             "label %s is \"%.100s\", not \"true\": %s", US_BACKGROUND_LABEL, label,
                             ai ? "the workload is AI work (only \"true\" marks background work)"
                                : "only \"true\" (background work) or \"false\" (AI work) is "
                                  "understood, so the workload is never scheduled") < 0)
                return -1;
            if (w->blocked == us_background_label_blocked) continue;
        }
        if (w->blocked &&
            us_log_event(log, "Warning", "NotScheduled", w->name, NULL, "%s", w->blocked) < 0)
            return -1;
        if (w->background && !w->blocked && w->termination_grace > o->long_grace &&
            us_log_event(log, "Warning", "LongTerminationGrace", w->name, NULL,
                         "termination grace period %gs is above %gs: AI pods pipelined onto "
                         "this background workload's resources wait that long to start",
                         w->termination_grace, o->long_grace) < 0)
            return -1;
    }
    return 0;
}

/* What the status steps after the pools read of every workload: pods
 * running, holding room (running or pipelined), pending (not gone); of the
 * pending, those not reported yet (us_cycle_opts.reported_pods); and for a
 * daemonset, whether every pending pod is blocked (pinned[w]: 1 + a
 * blocked pod's pin, -1 when some pending pod is not blocked, as each pod
 * has its own node).  The counts come from the ledger a cycle cache keeps
 * (ledger.h) when it can tell them, else from a pass over every pod; the
 * pins need a pass only while a daemonset has pods pending. */
typedef struct wl_counts {
    int *running, *holding, *pending, *pinned, *unreported;
} wl_counts;

static void wl_counts_free(wl_counts *c) {
    free(c->running);
    free(c->holding);
    free(c->pending);
    free(c->pinned);
    free(c->unreported);
}

/* pinned[w] after pending pod pd of workload w, pinned to its node, in pod
 * order */
static void pin_step(const us_state *st, int *pinned, const us_pod *pd) {
    int w = pd->workload;
    if (pd->pin < 0 || pinned[w] < 0) return;
    char ignored[8];
    pinned[w] = us_blocker_find(st, &st->workloads[w], pd->pin, 1, ignored, sizeof ignored) !=
                        US_BLOCK_NONE ? pd->pin + 1 : -1;
}

/* Does pending_reports read pinned[w]: an active daemonset with pods
 * pending that breaks no rule? */
static bool reads_pins(const us_workload *w, int pending) {
    return w->controller == US_CTRL_DAEMONSET && w->state == US_WL_ACTIVE && !w->blocked &&
           !w->external && pending > 0;
}

/* pinned[] from the pending pods pinned to a node, in pod order: from the
 * pods passing through (state.h) when they are known, else a pass over
 * every pod.  0, or -1 when memory runs out. */
static int pins_listed(us_state *st, int *pinned) {
    size_t n, k = 0;
    const int *passing = us_state_passing(st, &n);
    if (!passing) {
        for (size_t i = 0; i < st->npods; i++)
            if (!st->pods[i].gone && st->pods[i].state == US_POD_PENDING) pin_step(st, pinned, &st->pods[i]);
        return 0;
    }
    int *pods = malloc((n ? n : 1) * sizeof *pods);
    if (!pods) return -1;
    for (size_t j = 0; j < n; j++)
        if (st->pods[passing[j]].state == US_POD_PENDING) pods[k++] = passing[j];
    us_sort_ints(pods, k);
    for (size_t j = 0; j < k; j++) pin_step(st, pinned, &st->pods[pods[j]]);
    free(pods);
    return 0;
}

/* Every count by a pass over the pods (pins = false: all but pinned). */
static void wl_counts_count(const us_state *st, const us_cycle_opts *o, wl_counts *c, bool pins) {
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *pd = &st->pods[i];
        int w = pd->workload;
        if (pd->gone) continue;
        if (pd->state == US_POD_RUNNING) c->running[w]++;
        if (pd->state == US_POD_RUNNING || pd->state == US_POD_PIPELINED) c->holding[w]++;
        if (pd->state != US_POD_PENDING) continue;
        c->pending[w]++;
        if (!us_cycle_may_place(o, pd)) c->unreported[w]++;
        if (pins) pin_step(st, c->pinned, pd);
    }
}

/* Every count zero, for nw workloads: 0, or -1 (memory; c is then
 * wl_counts_free's to free). */
static int wl_counts_zero(wl_counts *c, size_t nw) {
    c->running = calloc(nw, sizeof *c->running);
    c->holding = calloc(nw, sizeof *c->holding);
    c->pending = calloc(nw, sizeof *c->pending);
    c->pinned = calloc(nw, sizeof *c->pinned);
    c->unreported = calloc(nw, sizeof *c->unreported);
    return c->running && c->holding && c->pending && c->pinned && c->unreported ? 0 : -1;
}

static int wl_counts_take(us_state *st, const us_cycle_opts *o, wl_counts *c, us_err *err) {
    size_t nw = st->nworkloads ? st->nworkloads : 1;
    if (wl_counts_zero(c, nw) < 0) return us_err_nomem(err);
    us_ledger_counts kept = {c->holding, c->running, c->pending, c->unreported};
    if (!o->cache || us_ledger_workload_counts(&o->cache->ledger, st, &kept) != 0) {
        wl_counts_count(st, o, c, true);  /* the counts are still zero */
        return 0;
    }
    /* kept: unreported holds the pending pods not named, which are the
     * ones not reported only when the caller reports pods */
    if (!o->reported_pods) memset(c->unreported, 0, nw * sizeof *c->unreported);
    bool pins = false;
    for (size_t w = 0; w < st->nworkloads && !pins; w++) pins = reads_pins(&st->workloads[w], c->pending[w]);
    if (pins && pins_listed(st, c->pinned) < 0) return us_err_nomem(err);
#ifdef US_CHECK_INVARIANTS
    {
        wl_counts fresh = {0};
        int rc = 0;
        if (wl_counts_zero(&fresh, nw) < 0) {
            rc = us_err_nomem(err);
        } else {
            wl_counts_count(st, o, &fresh, pins);
            for (size_t w = 0; w < st->nworkloads && rc == 0; w++)
                if (fresh.running[w] != c->running[w] || fresh.holding[w] != c->holding[w] ||
                    fresh.pending[w] != c->pending[w] || fresh.unreported[w] != c->unreported[w] ||
                    fresh.pinned[w] != c->pinned[w])
                    rc = us_err_set(err, US_EINVARIANT, "invariant \"workload-counts\" broken: "
                                    "workload \"%s\": the pods running, holding, pending, not "
                                    "reported and the pin kept by the ledger (%d, %d, %d, %d, %d) "
                                    "are not what its pods say (%d, %d, %d, %d, %d)",
                                    st->workloads[w].name, c->running[w], c->holding[w],
                                    c->pending[w], c->unreported[w], c->pinned[w], fresh.running[w],
                                    fresh.holding[w], fresh.pending[w], fresh.unreported[w],
                                    fresh.pinned[w]);
        }
        wl_counts_free(&fresh);
        if (rc < 0) return rc;
    }
#endif
    return 0;
}

/* Report pending pods once per change of status.  For background work,
 * pending is the normal steady state, so it is a Normal event. */
static int pending_reports(us_state *st, const wl_counts *c, us_cycle_log *log) {
    const int *pending = c->pending, *pinned = c->pinned, *holding = c->holding,
              *unreported = c->unreported;
    int rc = 0;
    for (size_t i = 0; i < st->nworkloads && rc == 0; i++) {
        us_workload *w = &st->workloads[i];
        char msg[512], why[400];
        const char *reason, *code = "resources";
        w->pending_reason = w->state == US_WL_ACTIVE && w->blocked && !w->external && pending[i] ? "blocked" : NULL;
        if (w->state != US_WL_ACTIVE || w->blocked || w->external || pending[i] == 0) {
            free(w->last_status);
            w->last_status = NULL;
            continue;
        }
        /* a cause that no free room would cure comes before the load */
        us_blocker b = US_BLOCK_NONE;
        /* a gang that holds nothing needs min_member pods at once; one that
         * runs only waits for elastic pods, one at a time */
        int need = holding[i] == 0 ? us_wl_gang_start(w) : 1;
        if (w->controller != US_CTRL_DAEMONSET) b = us_blocker_find(st, w, -1, need, why, sizeof why);
        else if (pinned[i] > 0) b = us_blocker_find(st, w, pinned[i] - 1, 1, why, sizeof why);
        /* AI work short of pods to place: it waits for its controller to
         * create them (the caller reports each), not for room */
        bool short_of_pods = !w->background && b == US_BLOCK_NONE && unreported[i] > 0 &&
                             pending[i] - unreported[i] < need;
        if (short_of_pods) {
            reason = "WaitingForPods";
            code = "not-created";
            snprintf(msg, sizeof msg, "%d pod(s) pending: %d of them not created yet (%s %d at once; "
                     "only pods the cluster has are placed)", pending[i], unreported[i],
                     need > 1 ? "the gang starts with" : "it places", need);
        } else if (b != US_BLOCK_NONE) {
            reason = w->background ? "NotScheduled" : "Unschedulable";
            code = us_blocker_names[b];
            snprintf(msg, sizeof msg, "%d pod(s) pending: %s", pending[i], why);
        } else if (w->background) {
            reason = "WaitingForIdleResources";
            snprintf(msg, sizeof msg,
                     "%d pod(s) pending: waiting for idle resources (background work runs only "
                     "on capacity no AI workload needs)", pending[i]);
        } else {
            reason = "Unschedulable";
            const char *q = w->why_queue >= 0 && (size_t)w->why_queue < st->nqueues
                                ? st->queues[w->why_queue].name : "?";
            if (w->why_pending == US_WHY_LIMIT) code = "queue-limit";
            if (w->why_pending == US_WHY_QUOTA) code = "quota";
            if (w->why_pending == US_WHY_LIMIT)
                snprintf(msg, sizeof msg, "%d pod(s) pending: queue \"%s\" would go over its limit "
                         "on pool \"%s\"", pending[i], q, w->pool);
            else if (w->why_pending == US_WHY_QUOTA)
                snprintf(msg, sizeof msg, "%d pod(s) pending: non-preemptible work uses only quota, "
                         "and queue \"%s\" has used its quota on pool \"%s\"", pending[i], q, w->pool);
            else if (w->why_pending == US_WHY_OWN_PODS)
                snprintf(msg, sizeof msg, "%d pod(s) pending: waiting for pods of its own to "
                         "terminate (a pod never waits in line behind its own gang)", pending[i]);
            else
                snprintf(msg, sizeof msg, "%d pod(s) pending: not enough free resources for %s",
                         pending[i], w->min_member > 1 ? "the gang" : "the pod");
        }
        w->pending_reason = w->background && b == US_BLOCK_NONE ? "idle-resources" : code;
        bool normal = (w->background && b == US_BLOCK_NONE) || short_of_pods;
        if (w->last_status && strcmp(w->last_status, msg) == 0) continue;
        char *copy = strdup(msg);
        if (!copy) {
            rc = -1;
            break;
        }
        free(w->last_status);
        w->last_status = copy;
        const char *ann[] = {"pending-reason", code, NULL};
        rc = us_log_event(log, normal ? "Normal" : "Warning", reason, w->name,
                          w->background && b == US_BLOCK_NONE ? NULL : ann, "%s", msg);
    }
    return rc;
}

/* A gang runs once min_member of its pods run (or some run and others ran
 * to completion); one that is no longer whole starts again when it next
 * runs. */
static void gang_clock(us_state *st, const wl_counts *c, double now) {
    for (size_t w = 0; w < st->nworkloads; w++) {
        us_workload *wl = &st->workloads[w];
        if (wl->state != US_WL_ACTIVE) continue;
        if (!us_wl_gang_whole(wl, c->holding[w])) wl->started_at = -1;
        else if (us_wl_gang_whole(wl, c->running[w]) && wl->started_at < 0) wl->started_at = now;
    }
}

/* The lines the policy in force and the versions it falls back to logged
 * since the last cycle, moved into the cycle's log. */
static int take_policy_log(us_policy *pol, us_cycle_log *log) {
    for (us_policy *v = pol; v; v = us_policy_previous(v)) {
        for (size_t i = 0; i < us_policy_log_count(v); i++) {
            const us_policy_log_line *l = us_policy_log_at(v, i);
            if (us_log_line_add(log, l->file, l->line, l->text) < 0) return -1;
        }
        log->dropped_lines += us_policy_log_dropped(v);
        us_policy_log_clear(v);
    }
    return 0;
}

int us_cycle_run(us_state *st, us_policy *pol, double now, const us_cycle_opts *o,
                 us_cycle_log *log, us_queue_figures *figs, us_cycle_counts *counts, us_err *err) {
    us_cycle_opts defaults;
    if (!o) {
        us_cycle_opts_default(&defaults);
        o = &defaults;
    }
    /* the invariant check needs the figures even when the caller does not */
    us_queue_figures *own = NULL;
    us_inv inv = {0};
    us_phys ph = {0};  /* what holds each node, from the cycle's start on */
    us_pool_pods pool_pods = {0};
    if (!figs && o->check_invariants && !(figs = own = calloc(st->nqueues ? st->nqueues : 1, sizeof *own)))
        return us_err_nomem(err);
    if (figs) memset(figs, 0, st->nqueues * sizeof *figs);
    for (size_t w = 0; w < st->nworkloads; w++) st->workloads[w].why_pending = US_WHY_NONE;
    const char **pools = NULL;
    size_t npools;
    int rc = -1;
    if (us_life_expire(st, now) < 0) {
        us_err_set(err, US_EINVARIANT, "invariant \"release-times\" broken before the cycle at "
                   "t=%g: a pod ends or has left that the state did not know of, or a pod "
                   "releasing or pipelined is not listed (a write to a pod that skipped "
                   "us_pod_touch?)", now);
        goto out;
    }
    if (rule_warnings(st, o, log) < 0) {
        us_err_nomem(err);
        goto out;
    }
    if (us_commit_cycle_start(st, now, o, log, &ph, err) < 0) goto out;
    int listed = collect_pools(st, o->cache, &pools, &npools);
    if (listed == -2) {
        us_err_set(err, US_EINVARIANT, "invariant \"pool-list\" broken: the pools of nodes kept "
                   "from the last cycle are not the nodes' pools (a change to the nodes did not "
                   "move the state's node version)");
        goto out;
    }
    if (listed < 0) {
        us_err_nomem(err);
        goto out;
    }
    /* with several pools, each snapshot reads the pods of its pool only,
     * found for all in one pass (without memory for the lists, each reads
     * every pod) */
    double t_lists = o->profile ? us_cycle_cpu_clock() : 0;
    (void)us_pool_pods_make(&pool_pods, st, o->cache ? &o->cache->ledger : NULL, pools, npools);
    if (o->profile) o->profile->snapshot += us_cycle_cpu_clock() - t_lists;  /* the snapshots' part */
    rc = 0;
    /* one budget for the whole cycle, every pool and policy file */
    us_cycle_budget budget = {o->cycle_budget, us_cycle_clock() + o->cycle_budget, false};
    for (size_t i = 0; i < npools && rc == 0; i++) {
        us_pod_set set;
        bool only = us_pool_pods_set(&pool_pods, st, i, &set);
        rc = run_pool(st, pools[i], only ? &set : NULL, pol, now, o, log, figs, counts,
                      o->check_invariants ? &inv : NULL, &budget, &ph, err);
    }
    if (rc < 0) goto out;
    {
        /* gang start times do not change what pending_reports reads */
        wl_counts c = {0};
        rc = wl_counts_take(st, o, &c, err);
        if (rc == 0) gang_clock(st, &c, now);
        if (rc == 0 && (pending_reports(st, &c, log) < 0 || take_policy_log(pol, log) < 0))
            rc = us_err_nomem(err);
        wl_counts_free(&c);
        if (rc < 0) goto out;
    }
    inv.phys = &ph;
    if (o->check_invariants) rc = us_inv_check(st, &inv, figs, now, err);
    if (rc == 0 && o->cache) {
        /* the node counts the cycle kept go back to the ledger */
        us_ledger_settle(&o->cache->ledger, st, ph.use, ph.waiting);
        ph.use = NULL;
        ph.waiting = NULL;
        us_cycle_cache_changes_read(o->cache, st);
    }
out:
    /* the cycle's deadline binds no call made outside it */
    for (us_policy *v = pol; v; v = us_policy_previous(v)) us_policy_set_cycle_deadline(v, 0, 0);
    free(pools);
    us_pool_pods_free(&pool_pods);
    free(own);
    us_inv_free(&inv);
    us_phys_free(&ph);
    return rc;
}
