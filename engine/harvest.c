/*
 * harvest.c — the harvest and disturbance figures of a simulation: samples
 * the state after every cycle, bounds the background evictions AI placement
 * could not have avoided, and times AI pods pipelined onto background pods'
 * room.
 *
 * Owns the measurement only.  It must never change the state or the log it
 * reads, nor format anything: output_figures.c and report.c render it.
 */
#include "harvest.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sort.h"
#include "strmap.h"

struct us_hv_wait {
    char *pod;
    double since;
    int pool;
};

struct us_hv_bg {
    int pool;      /* -1: left out of the bound */
    int wl;
    us_res req;
};

static int pool_index(const us_harvest *h, const char *name) {
    size_t lo = 0, hi = h->npools;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(h->pools[mid], name);
        if (c == 0) return (int)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The distinct pools of nodes and workloads, sorted, each a copy. */
static int collect_pools(us_harvest *h, const us_state *st) {
    size_t n = st->nnodes + st->nworkloads;
    if (!(h->pools = calloc(n ? n : 1, sizeof *h->pools))) return -1;
    for (size_t i = 0; i < n; i++) {
        const char *name = i < st->nnodes ? st->nodes[i].pool : st->workloads[i - st->nnodes].pool;
        bool seen = false;
        for (size_t k = 0; k < h->npools && !seen; k++) seen = strcmp(h->pools[k], name) == 0;
        if (seen) continue;
        if (!(h->pools[h->npools] = strdup(name))) return -1;
        h->npools++;
    }
    qsort(h->pools, h->npools, sizeof *h->pools, cmp_str);
    return 0;
}

static int by_node_name(const void *a, const void *b, void *ctx) {
    const us_harvest *h = ctx;
    return strcmp(h->nodes[*(const int *)a], h->nodes[*(const int *)b]);
}

int us_hv_node_index(const us_harvest *h, const char *name) {
    size_t lo = 0, hi = name ? h->nnodes : 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(h->nodes[h->node_order[mid]], name);
        if (c == 0) return h->node_order[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

int us_hv_init(us_harvest *h, const us_state *st, double interval) {
    memset(h, 0, sizeof *h);
    h->interval = interval;
    h->nnodes = st->nnodes;
    h->nqueues = st->nqueues;
    if (collect_pools(h, st) < 0) goto nomem;
    if (!(h->nodes = calloc(st->nnodes ? st->nnodes : 1, sizeof *h->nodes)) ||
        !(h->node_pool = calloc(st->nnodes ? st->nnodes : 1, sizeof *h->node_pool)) ||
        !(h->node_order = calloc(st->nnodes ? st->nnodes : 1, sizeof *h->node_order)) ||
        !(h->waits = calloc(h->npools + 1, sizeof *h->waits)) ||
        !(h->nwaits = calloc(h->npools + 1, sizeof *h->nwaits)) ||
        !(h->cap_waits = calloc(h->npools + 1, sizeof *h->cap_waits)))
        goto nomem;
    for (size_t i = 0; i < st->nnodes; i++) {
        if (!(h->nodes[i] = strdup(st->nodes[i].name))) goto nomem;
        h->node_pool[i] = pool_index(h, st->nodes[i].pool);
        h->node_order[i] = (int)i;
    }
    /* node names are unique: the order is total */
    us_sort(h->node_order, h->nnodes, sizeof *h->node_order, by_node_name, h);
    return 0;
nomem:
    us_hv_free(h);
    return -1;
}

void us_hv_free(us_harvest *h) {
    for (size_t i = 0; h->pools && i < h->npools; i++) free(h->pools[i]);
    for (size_t i = 0; h->nodes && i < h->nnodes; i++) free(h->nodes[i]);
    for (size_t i = 0; i < h->ncycles; i++) {
        free(h->cycles[i].pools);
        free(h->cycles[i].nodes);
        free(h->cycles[i].quota);
    }
    for (size_t i = 0; h->waits && i <= h->npools; i++) free(h->waits[i]);
    for (size_t i = 0; i < h->nopen; i++) free(h->open[i].pod);
    free(h->pools);
    free(h->nodes);
    free(h->node_pool);
    free(h->node_order);
    free(h->cycles);
    free(h->waits);
    free(h->nwaits);
    free(h->cap_waits);
    free(h->open);
    free(h->bg);
    memset(h, 0, sizeof *h);
}

static bool live_node(const us_state *st, int n) {
    return n >= 0 && (size_t)n < st->nnodes && !st->nodes[n].removed;
}

/* Holds room in the plan's end state: running, or pipelined onto it. */
static bool in_end_state(const us_pod *p) {
    return !p->gone && (p->state == US_POD_RUNNING || p->state == US_POD_PIPELINED);
}

int us_hv_before(us_harvest *h, const us_state *st) {
    h->nbg = 0;
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        if (!in_end_state(p) || !live_node(st, p->node) || !st->workloads[p->workload].background)
            continue;
        if (us_grow((void **)&h->bg, &h->cap_bg, h->nbg, sizeof *h->bg) < 0) return -1;
        h->bg[h->nbg++] = (us_hv_bg){h->node_pool[p->node], p->workload, st->workloads[p->workload].request};
    }
    return 0;
}

/* ---- sampling ------------------------------------------------------------- */

/* Devices held on each node by AI and by background pods: running or
 * releasing pods hold their devices; a shared device counts once. */
static void sample_nodes(const us_harvest *h, const us_state *st, us_hv_node *nodes, uint64_t *shared) {
    for (size_t n = 0; n < h->nnodes; n++) {
        nodes[n] = (us_hv_node){live_node(st, (int)n) ? (int16_t)st->nodes[n].gpus : -1, 0, 0};
        shared[n] = 0;
    }
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        if (p->gone || (p->state != US_POD_RUNNING && p->state != US_POD_RELEASING) ||
            !live_node(st, p->node) || (size_t)p->node >= h->nnodes)
            continue;
        const us_workload *w = &st->workloads[p->workload];
        us_hv_node *nd = &nodes[p->node];
        int whole = us_req_whole_gpus(w->request);
        if (w->background) nd->background = (int16_t)(nd->background + whole);
        else nd->ai = (int16_t)(nd->ai + whole);
        if (us_req_is_fractional(w->request) && p->shared_dev >= 0 && p->shared_dev < 64)
            shared[p->node] |= UINT64_C(1) << p->shared_dev;
    }
    for (size_t n = 0; n < h->nnodes; n++) {
        for (uint64_t s = shared[n]; s; s &= s - 1) nodes[n].ai++;
        /* never more than the node has, whatever a bug elsewhere did */
        if (nodes[n].gpus >= 0 && nodes[n].ai + nodes[n].background > nodes[n].gpus)
            nodes[n].background = (int16_t)(nodes[n].gpus - nodes[n].ai);
    }
}

static void sample_pending(const us_harvest *h, const us_state *st, us_hv_pool *pools) {
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        const us_workload *w = &st->workloads[p->workload];
        /* an external pod waits for its own scheduler, not for us */
        if (p->gone || p->state != US_POD_PENDING || w->state != US_WL_ACTIVE || w->external) continue;
        int k = pool_index(h, w->pool);
        if (k < 0) continue;
        if (w->background) pools[k].pending_background++;
        else pools[k].pending_ai++;
    }
}

/* Each queue's quota summed over the pools that have nodes. */
static void sample_quota(const us_harvest *h, const us_state *st, const us_hv_node *nodes, us_res *quota) {
    bool *has = calloc(h->npools ? h->npools : 1, sizeof *has);
    for (size_t n = 0; has && n < h->nnodes; n++)
        if (nodes[n].gpus >= 0 && h->node_pool[n] >= 0) has[h->node_pool[n]] = true;
    for (size_t q = 0; q < st->nqueues && q < h->nqueues; q++) {
        quota[q] = (us_res){{0}};
        for (size_t k = 0; has && k < h->npools; k++) {
            if (!has[k]) continue;
            for (int r = 0; r < US_NRES; r++) {
                int64_t v = us_queue_res(&st->queues[q], h->pools[k], r).quota;
                if (quota[q].v[r] == US_UNLIMITED) continue;
                quota[q].v[r] = v == US_UNLIMITED ? US_UNLIMITED : quota[q].v[r] + v;
            }
        }
    }
    free(has);
}

/* ---- the lower bound on needed evictions ---------------------------------- */

/* Largest request of resource *ctx first; the order among equals does not
 * change the count taken. */
static int cmp_bg_desc(const void *a, const void *b, void *ctx) {
    int r = *(const int *)ctx;
    int64_t x = ((const us_hv_bg *)a)->req.v[r], y = ((const us_hv_bg *)b)->req.v[r];
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The fewest background pods of pool k whose requests of resource r cover
 * short, taking the largest first (sorts h->bg's pool-k entries, which
 * come first after partition). */
static int fewest_to_cover(us_hv_bg *bg, size_t n, int r, int64_t short_by) {
    us_sort(bg, n, sizeof *bg, cmp_bg_desc, &r);
    int count = 0;
    for (size_t i = 0; i < n && short_by > 0; i++, count++) short_by -= bg[i].req.v[r];
    return count;
}

/* Pool by pool: the AI end state (running and pipelined AI pods) against
 * the pool's capacity less what the background pods that held room before
 * the cycle take.  Whatever AI needs beyond the rest has to come from those
 * background pods, and no node choice frees it with fewer of them than the
 * fewest whose requests cover it, resource by resource. */
static int needed_evictions(us_harvest *h, const us_state *st, us_hv_pool *pools) {
    us_res *cap = calloc(h->npools ? h->npools : 1, sizeof *cap);
    us_res *ai = calloc(h->npools ? h->npools : 1, sizeof *ai);
    us_res *bgsum = calloc(h->npools ? h->npools : 1, sizeof *bgsum);
    int rc = -1;
    if (!cap || !ai || !bgsum) goto cleanup;
    for (size_t n = 0; n < h->nnodes; n++)
        if (live_node(st, (int)n) && h->node_pool[n] >= 0)
            cap[h->node_pool[n]] = us_res_add(cap[h->node_pool[n]], st->nodes[n].cap);
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        const us_workload *w = &st->workloads[p->workload];
        if (!in_end_state(p) || w->background || !live_node(st, p->node)) continue;
        int k = h->node_pool[p->node];
        if (k >= 0) ai[k] = us_res_add(ai[k], w->request);
    }
    for (size_t i = 0; i < h->nbg; i++)
        if (h->bg[i].pool >= 0) bgsum[h->bg[i].pool] = us_res_add(bgsum[h->bg[i].pool], h->bg[i].req);
    /* group each pool's background pods together */
    size_t start = 0;
    for (size_t k = 0; k < h->npools; k++) {
        size_t end = start;
        for (size_t i = start; i < h->nbg; i++)
            if (h->bg[i].pool == (int)k) {
                us_hv_bg t = h->bg[i];
                h->bg[i] = h->bg[end];
                h->bg[end++] = t;
            }
        int need = 0;
        for (int r = 0; r < US_NRES; r++) {
            int64_t short_by = ai[k].v[r] - (cap[k].v[r] - bgsum[k].v[r]);
            if (short_by <= 0) continue;
            int c = fewest_to_cover(h->bg + start, end - start, r, short_by);
            if (c > need) need = c;
        }
        pools[k].needed = need;
        start = end;
    }
    rc = 0;
cleanup:
    free(cap);
    free(ai);
    free(bgsum);
    return rc;
}

/* ---- waits on grace periods ------------------------------------------------ */

/* Pods by name, for the cycle's lookups: the incarnations of one name
 * belong to one workload, so any of them answers (the first in pod order
 * here).  Built on the first lookup of a cycle that needs one, of the pods
 * in the states the lookups can name (waiting: a pipelined pod and the
 * pods terminating where it waits; else every pod): a map of every pod's
 * name cost more than the rest of a large cluster's harvest. */
typedef struct pod_index {
    const us_state *st;
    us_strmap names;
    bool built, waiting;
} pod_index;

static int pod_index_build(pod_index *pi) {
    const us_state *st = pi->st;
    pi->built = true;
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        if (p->gone || (pi->waiting && p->state != US_POD_PIPELINED && p->state != US_POD_RELEASING))
            continue;
        if (us_strmap_add(&pi->names, p->name, (int)i) < 0) return -1;
    }
    return 0;
}

static const us_pod *pod_named(const pod_index *pi, const char *name) {
    int i = us_strmap_get(&pi->names, name);
    return i >= 0 ? &pi->st->pods[i] : NULL;
}

static int push_wait(us_harvest *h, size_t k, double w) {
    if (us_grow((void **)&h->waits[k], &h->cap_waits[k], h->nwaits[k], sizeof **h->waits) < 0) return -1;
    /* kept sorted, for percentiles */
    size_t i = h->nwaits[k]++;
    for (; i > 0 && h->waits[k][i - 1] > w; i--) h->waits[k][i] = h->waits[k][i - 1];
    h->waits[k][i] = w;
    return 0;
}

/* The open waits by pod name, for one cycle's decisions: a lookup per
 * decision must not scan every open wait (at 130,000 nodes a cycle has
 * 100,000 decisions and thousands of waits).  Slots hold 1 + an index into
 * h->open; a dropped wait keeps its slot with its pod NULL, and is
 * compacted away when the cycle's decisions are read. */
typedef struct open_index {
    size_t *slot, cap;
} open_index;

static void open_add(open_index *oi, const us_harvest *h, size_t i) {
    size_t k = us_name_hash(h->open[i].pod) & (oi->cap - 1);
    while (oi->slot[k]) k = (k + 1) & (oi->cap - 1);
    oi->slot[k] = i + 1;
}

/* room: the waits that may open while it is used */
static int open_index_build(open_index *oi, const us_harvest *h, size_t room) {
    oi->cap = 16;
    while (oi->cap < 2 * (h->nopen + room)) oi->cap *= 2;
    if (!(oi->slot = calloc(oi->cap, sizeof *oi->slot))) return -1;
    for (size_t i = 0; i < h->nopen; i++) open_add(oi, h, i);
    return 0;
}

/* The first open wait of pod (in h->open order), or h->nopen. */
static size_t open_wait(const open_index *oi, const us_harvest *h, const char *pod) {
    size_t found = h->nopen;
    for (size_t k = us_name_hash(pod) & (oi->cap - 1); oi->slot[k]; k = (k + 1) & (oi->cap - 1)) {
        size_t i = oi->slot[k] - 1;
        if (h->open[i].pod && i < found && strcmp(h->open[i].pod, pod) == 0) found = i;
    }
    return found;
}

static void drop_open(us_harvest *h, size_t i) {
    free(h->open[i].pod);
    h->open[i].pod = NULL;
}

/* Close the gaps dropped waits left, keeping the order of the rest. */
static void compact_open(us_harvest *h) {
    size_t n = 0;
    for (size_t i = 0; i < h->nopen; i++)
        if (h->open[i].pod) h->open[n++] = h->open[i];
    h->nopen = n;
}

/* A pipelined AI pod that waits for a background pod starts a wait; its
 * bind once the room is free ends it; an eviction before that drops it. */
static int read_decisions(us_harvest *h, const us_state *st, double now, const us_cycle_log *log,
                          us_hv_pool *pools) {
    pod_index pi = {st, {0}, false, true};
    open_index oi = {NULL, 0};
    int rc = -1;
    if (open_index_build(&oi, h, log->ndecisions) < 0) return -1;
    for (size_t i = 0; i < log->ndecisions; i++) {
        const us_decision *d = &log->decisions[i];
        int node = us_hv_node_index(h, d->node);
        int k = node >= 0 ? h->node_pool[node] : -1;
        if (d->op == US_OP_EVICT && d->action == US_ACT_BACKGROUND && k >= 0) pools[k].evictions++;
        if (!d->pod) continue;
        size_t o = open_wait(&oi, h, d->pod);
        if (o < h->nopen && d->op == US_OP_BIND) {
            double w = now - h->open[o].since;
            int pk = h->open[o].pool;
            if ((pk >= 0 && push_wait(h, (size_t)pk, w) < 0) || push_wait(h, h->npools, w) < 0) goto cleanup;
            drop_open(h, o);
        } else if (o < h->nopen && d->op == US_OP_EVICT) {
            drop_open(h, o);
        }
        if (d->op != US_OP_PIPELINE) continue;
        if (!pi.built && pod_index_build(&pi) < 0) goto cleanup;
        const us_pod *p = pod_named(&pi, d->pod);
        if (!p || st->workloads[p->workload].background) continue;
        bool on_bg = false;
        for (size_t k2 = 0; k2 < d->nwaits && !on_bg; k2++) {
            const us_pod *v = d->waits_for[k2] ? pod_named(&pi, d->waits_for[k2]) : NULL;
            on_bg = v && st->workloads[v->workload].background;
        }
        if (!on_bg) continue;
        char *copy = strdup(d->pod);
        if (!copy || us_grow((void **)&h->open, &h->cap_open, h->nopen, sizeof *h->open) < 0) {
            free(copy);
            goto cleanup;
        }
        h->open[h->nopen++] = (us_hv_wait){copy, now, k};
        open_add(&oi, h, h->nopen - 1);
    }
    rc = 0;
cleanup:
    compact_open(h);
    free(oi.slot);
    us_strmap_free(&pi.names);
    return rc;
}

/* A gang that fell below min_member is evicted whole at the start of the
 * cycle (action stalegangeviction), whatever AI needs: its background pods
 * are not room AI took, so they are left out of the bound. */
static int drop_stale_gangs(us_harvest *h, const us_state *st, const us_cycle_log *log) {
    pod_index pi = {st, {0}, false, false};
    for (size_t i = 0; i < log->ndecisions; i++) {
        const us_decision *d = &log->decisions[i];
        if (d->op != US_OP_EVICT || d->action != US_ACT_STALE_GANG || !d->pod) continue;
        if (!pi.built && pod_index_build(&pi) < 0) {
            us_strmap_free(&pi.names);
            return -1;
        }
        const us_pod *p = pod_named(&pi, d->pod);
        if (!p) continue;
        for (size_t k = 0; k < h->nbg; k++)
            if (h->bg[k].wl == p->workload) h->bg[k].pool = -1;
    }
    us_strmap_free(&pi.names);
    return 0;
}

int us_hv_after(us_harvest *h, const us_state *st, double now, const us_cycle_log *log) {
    us_hv_cycle c = {.time = now};
    uint64_t *shared = NULL;
    if (us_grow((void **)&h->cycles, &h->cap_cycles, h->ncycles, sizeof *h->cycles) < 0) return -1;
    if (!(c.pools = calloc(h->npools ? h->npools : 1, sizeof *c.pools)) ||
        !(c.nodes = calloc(h->nnodes ? h->nnodes : 1, sizeof *c.nodes)) ||
        !(c.quota = calloc(h->nqueues ? h->nqueues : 1, sizeof *c.quota)) ||
        !(shared = calloc(h->nnodes ? h->nnodes : 1, sizeof *shared)))
        goto nomem;
    sample_nodes(h, st, c.nodes, shared);
    for (size_t n = 0; n < h->nnodes; n++) {
        int k = h->node_pool[n];
        if (c.nodes[n].gpus < 0 || k < 0) continue;
        c.pools[k].gpus += c.nodes[n].gpus;
        c.pools[k].ai += c.nodes[n].ai;
        c.pools[k].background += c.nodes[n].background;
    }
    for (size_t k = 0; k < h->npools; k++)
        c.pools[k].idle = c.pools[k].gpus - c.pools[k].ai - c.pools[k].background;
    sample_pending(h, st, c.pools);
    sample_quota(h, st, c.nodes, c.quota);
    if (drop_stale_gangs(h, st, log) < 0 || needed_evictions(h, st, c.pools) < 0 ||
        read_decisions(h, st, now, log, c.pools) < 0)
        goto nomem;
    free(shared);
    h->cycles[h->ncycles++] = c;
    return 0;
nomem:
    free(shared);
    free(c.pools);
    free(c.nodes);
    free(c.quota);
    return -1;
}

/* ---- figures over the run --------------------------------------------------- */

/* Nearest rank: the smallest wait with at least pct% of waits at or below. */
static double percentile(const double *sorted, size_t n, double pct) {
    if (!n) return 0;
    size_t rank = (size_t)ceil(pct / 100.0 * (double)n);
    if (rank < 1) rank = 1;
    return sorted[rank - 1];
}

void us_hv_figures_of(const us_harvest *h, int p, us_hv_figures *out) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < h->ncycles; i++)
        for (size_t k = 0; k < h->npools; k++) {
            if (p >= 0 && (size_t)p != k) continue;
            const us_hv_pool *s = &h->cycles[i].pools[k];
            out->capacity += s->gpus * h->interval;
            out->ai += s->ai * h->interval;
            out->background += s->background * h->interval;
            out->idle += s->idle * h->interval;
            out->evictions += s->evictions;
            out->needed += s->needed;
        }
    double left = out->capacity - out->ai;
    out->harvest_ratio = left > 0 ? out->background / left : -1;
    size_t k = p >= 0 ? (size_t)p : h->npools;
    if (k > h->npools || !h->nwaits) return;  /* no such pool, or an empty harvest (a failed run's) */
    out->waits = h->nwaits[k];
    for (size_t i = 0; i < h->nwaits[k]; i++) out->wait_total += h->waits[k][i];
    out->wait_p50 = percentile(h->waits[k], h->nwaits[k], 50);
    out->wait_p99 = percentile(h->waits[k], h->nwaits[k], 99);
}
