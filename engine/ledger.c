/*
 * ledger.c — per-node physical use and per-workload counts kept across
 * cycles (see ledger.h).
 */
#include "ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strmap.h"
#include "usesum.h"

void us_ledger_free(us_ledger *l) {
    free(l->use);
    free(l->waiting);
    free(l->holding);
    free(l->running);
    free(l->pending);
    free(l->unnamed);
    free(l->ai);
    free(l->bg);
    free(l->kind);
    free(l->stamp);
    free(l->npool);
    free(l->wpool);
    for (size_t k = 0; k < l->npools; k++) free(l->pools[k]);
    free(l->pools);
    bool counts_only = l->counts_only;
    uint64_t clock = l->clock;
    memset(l, 0, sizeof *l);
    l->counts_only = counts_only;
    l->clock = clock;
}

/* Where pod x (as it is or was) counts in the views, counted as kind:
 * the pools as numbers (npool, wpool), not two strings a pod. */
static int share_of(const us_ledger *l, const us_pod_was *x, uint8_t kind) {
    if (x->node < 0) return 0;
    int np = l->npool[x->node];  /* -1: removed */
    if (np < 0) return 0;
    return us_view_share(kind, np == l->wpool[x->workload], x->state, x->gone);
}

int us_ledger_pool_number(const us_ledger *l, const char *pool) {
    for (size_t k = 0; k < l->npools; k++)
        if (strcmp(l->pools[k], pool) == 0) return (int)k;
    return -1;
}

const int *us_ledger_workload_pools(const us_ledger *l, const us_state *st) {
    bool kept = l && l->valid && l->wpool && l->nworkloads == st->nworkloads &&
                l->nnodes == st->nnodes && l->nodes_version == st->nodes_version;
    return kept ? l->wpool : NULL;
}

static bool saturated(const us_use *u) {
    for (int r = 0; r < US_NRES; r++)
        if (u->used.v[r] == INT64_MAX || u->used.v[r] == INT64_MIN) return true;
    return false;
}

/* Pod x's share in (sign 1) or out (-1) of *ai (US_SHARE_AI) or *bg
 * (US_SHARE_BG), its node's.  False when it cannot be followed exactly: a
 * fractional pod with no device recorded, a saturated sum. */
static bool view_add(const us_state *st, const us_pod_was *x, int share, us_use *ai,
                     us_bg_total *bg, int sign) {
    us_res req = st->workloads[x->workload].request;
    if (share == US_SHARE_BG) return us_bg_total_add(bg, req, sign);
    if (us_req_is_fractional(req) && (x->shared_dev < 0 || x->shared_dev >= US_MAX_GPUS)) return false;
    if (saturated(ai)) return false;
    if (sign > 0) us_use_add(ai, &st->nodes[x->node], req, x->shared_dev);
    else us_use_remove(ai, req, x->shared_dev);
    return !saturated(ai);
}

/* The pool of each node present as a number (l->npool[n], -1 when
 * removed) and of each workload (l->wpool[w], -1 when no node has it),
 * numbers given in the order the nodes name the pools (l->pools): equal
 * numbers, the same pool.  A node's pool never changes while the nodes
 * stay (nodes_version), nor a workload's.  0, or -1 when memory runs out
 * (what it made is l's, freed with it). */
static int pool_numbers(us_ledger *l, const us_state *st, size_t cap_workloads) {
    us_strmap pools = {0};
    l->npool = malloc((st->nnodes ? st->nnodes : 1) * sizeof *l->npool);
    l->wpool = malloc(cap_workloads * sizeof *l->wpool);
    int rc = l->npool && l->wpool ? 0 : -1, last = -1;
    const char *last_pool = NULL;
    for (size_t n = 0; n < st->nnodes && rc == 0; n++) {
        const char *pool = st->nodes[n].pool;
        int id = last;
        if (!last_pool || strcmp(pool, last_pool) != 0) {  /* nodes of a pool come together */
            id = us_strmap_get(&pools, pool);
            if (id < 0) {
                char *copy = strdup(pool);
                if (!copy || us_grow((void **)&l->pools, &l->cap_pools, l->npools,
                                     sizeof *l->pools) < 0 ||
                    us_strmap_add(&pools, pool, id = (int)l->npools) < 0) {
                    free(copy);
                    rc = -1;
                    break;
                }
                l->pools[l->npools++] = copy;
            }
            last = id;
            last_pool = pool;
        }
        l->npool[n] = st->nodes[n].removed ? -1 : id;
    }
    for (size_t w = 0; w < st->nworkloads && rc == 0; w++)
        l->wpool[w] = us_strmap_get(&pools, st->workloads[w].pool);
    us_strmap_free(&pools);
    return rc;
}

/* Pod x (not gone) in (sign 1) or out (-1) of the per-workload counts. */
static void workload_count(const us_pod_was *x, const us_ledger_counts *c, int sign) {
    if (x->state == US_POD_RUNNING || x->state == US_POD_PIPELINED) c->holding[x->workload] += sign;
    if (x->state == US_POD_RUNNING) c->running[x->workload] += sign;
    if (x->state == US_POD_PENDING) {
        c->pending[x->workload] += sign;
        if (!x->named) c->unnamed[x->workload] += sign;
    }
}

static us_ledger_counts counts_of(const us_ledger *l) {
    return (us_ledger_counts){l->holding, l->running, l->pending, l->unnamed};
}

int us_ledger_take(us_ledger *l, const us_state *st) {
    us_ledger_free(l);
    size_t nn = st->nnodes ? st->nnodes : 1, nw = st->nworkloads ? st->nworkloads : 1;
    l->use = calloc(nn, sizeof *l->use);
    l->waiting = calloc(nn, sizeof *l->waiting);
    l->holding = calloc(nw, sizeof *l->holding);
    l->running = calloc(nw, sizeof *l->running);
    l->pending = calloc(nw, sizeof *l->pending);
    l->unnamed = calloc(nw, sizeof *l->unnamed);
    l->kind = calloc(nw, sizeof *l->kind);
    bool views = !l->counts_only;
    if (views) {
        l->ai = calloc(nn, sizeof *l->ai);
        l->bg = calloc(nn, sizeof *l->bg);
        l->stamp = malloc(nn * sizeof *l->stamp);
    }
    us_usesum sum, aisum;  /* one addition per node, not per pod (usesum.h) */
    if (!l->use || !l->waiting || !l->holding || !l->running || !l->pending || !l->unnamed ||
        !l->kind || (views && (!l->ai || !l->bg || !l->stamp)) ||
        us_usesum_init(&sum, st->nnodes, &l->use, 1) < 0) {
        us_ledger_free(l);
        return -1;
    }
    if (views && (pool_numbers(l, st, nw) < 0 || us_usesum_init(&aisum, st->nnodes, &l->ai, 1) < 0)) {
        us_usesum_free(&sum);
        us_ledger_free(l);
        return -1;
    }
    for (size_t w = 0; w < st->nworkloads; w++) l->kind[w] = us_view_kind(&st->workloads[w]);
    us_ledger_counts counts = counts_of(l);
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *pd = &st->pods[i];
        if (pd->gone) continue;
        if (pd->state == US_POD_PIPELINED) {
            l->npipelined++;
            if (pd->node >= 0) l->waiting[pd->node]++;
        }
        us_pod_was x = {(int)i, pd->workload, pd->node, pd->shared_dev, pd->state, pd->gone, pd->named};
        workload_count(&x, &counts, 1);
        if (us_ledger_holds_room(pd->gone, pd->node, pd->state))
            us_usesum_add(&sum, (size_t)pd->node, &st->nodes[pd->node],
                          st->workloads[pd->workload].request, pd->shared_dev);
        if (!views) continue;
        int share = share_of(l, &x, l->kind[pd->workload]);
        us_res req = st->workloads[pd->workload].request;
        /* in pod order, as the snapshot adds them: a fractional pod with no
         * device takes the slot the pods before it leave */
        if (share == US_SHARE_AI)
            us_usesum_add(&aisum, (size_t)pd->node, &st->nodes[pd->node], req, pd->shared_dev);
        else if (share == US_SHARE_BG)
            (void)us_bg_total_add(&l->bg[pd->node], req, 1);  /* saturated: kept so, as summed */
    }
    us_usesum_flush_all(&sum);
    us_usesum_free(&sum);
    if (views) {
        us_usesum_flush_all(&aisum);
        us_usesum_free(&aisum);
        uint64_t stamp = ++l->clock;
        for (size_t n = 0; n < nn; n++) l->stamp[n] = stamp;
    }
    l->valid = true;
    l->pods_version = st->pods_version;
    l->nodes_version = st->nodes_version;
    l->nnodes = st->nnodes;
    l->nworkloads = st->nworkloads;
    l->cap_workloads = nw;
    l->recounted = true;
    return 0;
}

/* Count pod x in (sign 1) or out (-1).  false when it cannot be followed
 * exactly: a fractional pod with no device recorded, a saturated sum. */
static bool count(us_ledger *l, const us_state *st, const us_pod_was *x, int sign, bool nodes) {
    if (x->gone) return true;
    if (x->state == US_POD_PIPELINED) {
        l->npipelined += (size_t)(ptrdiff_t)sign;
        if (nodes && x->node >= 0) l->waiting[x->node] += sign;
    }
    us_ledger_counts c = counts_of(l);
    workload_count(x, &c, sign);
    if (!nodes || !us_ledger_holds_room(x->gone, x->node, x->state)) return true;
    us_res req = st->workloads[x->workload].request;
    if (us_req_is_fractional(req) && (x->shared_dev < 0 || x->shared_dev >= US_MAX_GPUS)) return false;
    us_use *u = &l->use[x->node];
    if (saturated(u)) return false;
    if (sign > 0) us_use_add(u, &st->nodes[x->node], req, x->shared_dev);
    else us_use_remove(u, req, x->shared_dev);
    return !saturated(u);
}

/* What journal entry was's pod is now (gone once it left the array). */
static us_pod_was now_of(const us_state *st, const us_pod_was *was) {
    us_pod_was is = {was->pod, was->workload, -1, -1, US_POD_PENDING, true, false};
    if (was->pod >= 0) {
        const us_pod *pd = &st->pods[was->pod];
        is = (us_pod_was){was->pod, pd->workload, pd->node, pd->shared_dev, pd->state, pd->gone,
                          pd->named};
    }
    return is;
}

/* Pod x's share of the views (counted as kind) in or out; false when it
 * cannot be followed. */
static bool view_count(us_ledger *l, const us_state *st, const us_pod_was *x, uint8_t kind, int sign) {
    if (!l->ai) return true;  /* counts only */
    int share = share_of(l, x, kind);
    if (!share) return true;
    l->stamp[x->node] = ++l->clock;
    return view_add(st, x, share, &l->ai[x->node], &l->bg[x->node], sign);
}

/* Each journal entry out as it was, in as it is (in the per-node counts
 * too when nodes); the views too, out as the kind they were counted as,
 * in as the kind they are now.  False when one cannot be followed (the
 * counts are then half-done: the caller counts afresh). */
static bool apply(us_ledger *l, const us_state *st, bool nodes) {
    for (size_t k = 0; k < st->njournal; k++) {
        const us_pod_was *was = &st->journal[k];
        us_pod_was is = now_of(st, was);
        if (!count(l, st, was, -1, nodes) || !count(l, st, &is, 1, nodes) ||
            !view_count(l, st, was, l->kind[was->workload], -1) ||
            !view_count(l, st, &is, us_view_kind(&st->workloads[is.workload]), 1))
            return false;
        l->applied++;
    }
    for (size_t w = 0; w < st->nworkloads; w++) l->kind[w] = us_view_kind(&st->workloads[w]);
    return true;
}

/* Can the views follow the workloads whose kind changed since they were
 * counted?  Only pods running or pipelined count in them (us_view_share),
 * so only when each such workload's pods that were (holding, not yet
 * brought up to date) are all in the journal: one not in it would stay
 * counted as the old kind.  False too when memory runs out. */
static bool kinds_follow(const us_ledger *l, const us_state *st) {
    if (!l->ai) return true;  /* counts only: no views to follow */
    bool changed = false;
    for (size_t w = 0; w < st->nworkloads && !changed; w++)
        changed = l->holding[w] > 0 && us_view_kind(&st->workloads[w]) != l->kind[w];
    if (!changed) return true;
    int *in_journal = calloc(st->nworkloads, sizeof *in_journal);
    if (!in_journal) return false;
    for (size_t k = 0; k < st->njournal; k++) {
        const us_pod_was *was = &st->journal[k];
        if (!was->gone && (was->state == US_POD_RUNNING || was->state == US_POD_PIPELINED))
            in_journal[was->workload]++;
    }
    bool ok = true;
    for (size_t w = 0; w < st->nworkloads && ok; w++)
        ok = us_view_kind(&st->workloads[w]) == l->kind[w] || in_journal[w] == l->holding[w];
    free(in_journal);
    return ok;
}

/* Can l follow st through the journal?  Workloads appended since get
 * counts of zero here (their pods are in the journal). */
static bool can_follow(us_ledger *l, const us_state *st) {
    if (!l->valid || !l->use || st->journal_lost || l->pods_version != st->pods_version ||
        l->nodes_version != st->nodes_version || l->nnodes != st->nnodes ||
        st->nworkloads < l->nworkloads)
        return false;
    if (st->nworkloads > l->cap_workloads) {
        size_t cap = st->nworkloads * 2;
        int *h = realloc(l->holding, cap * sizeof *h);
        if (h) l->holding = h;
        int *r = h ? realloc(l->running, cap * sizeof *r) : NULL;
        if (r) l->running = r;
        int *pe = r ? realloc(l->pending, cap * sizeof *pe) : NULL;
        if (pe) l->pending = pe;
        int *u = pe ? realloc(l->unnamed, cap * sizeof *u) : NULL;
        if (u) l->unnamed = u;
        uint8_t *k = u ? realloc(l->kind, cap * sizeof *k) : NULL;
        if (k) l->kind = k;
        int *p = k && l->wpool ? realloc(l->wpool, cap * sizeof *p) : NULL;
        if (p) l->wpool = p;
        /* each array grown is still valid at its old size */
        if (!k || (l->wpool && !p)) return false;
        l->cap_workloads = cap;
    }
    size_t added = st->nworkloads - l->nworkloads;
    memset(l->holding + l->nworkloads, 0, added * sizeof *l->holding);
    memset(l->running + l->nworkloads, 0, added * sizeof *l->running);
    memset(l->pending + l->nworkloads, 0, added * sizeof *l->pending);
    memset(l->unnamed + l->nworkloads, 0, added * sizeof *l->unnamed);
    memset(l->kind + l->nworkloads, US_VIEW_NONE, added * sizeof *l->kind);
    for (size_t w = l->nworkloads; l->wpool && w < st->nworkloads; w++)
        l->wpool[w] = us_ledger_pool_number(l, st->workloads[w].pool);
    l->nworkloads = st->nworkloads;
    return true;
}

int us_ledger_check(const us_ledger *l, const us_state *st, char *broken, size_t len) {
    us_ledger fresh = {.counts_only = l->counts_only};
    if (!l->valid || !l->use || l->nnodes != st->nnodes || l->nworkloads != st->nworkloads) {
        snprintf(broken, len, "invariant \"ledger\" broken: no counts kept for the state's %zu "
                 "node(s) and %zu workload(s)", st->nnodes, st->nworkloads);
        return -2;
    }
    if (us_ledger_take(&fresh, st) < 0) return -1;
    int rc = 0;
    for (size_t n = 0; n < st->nnodes && rc == 0; n++) {
        if (!us_use_equal(&l->use[n], &fresh.use[n]) || l->waiting[n] != fresh.waiting[n]) {
            snprintf(broken, len, "invariant \"ledger\" broken: node \"%s\": the use kept from the "
                     "last cycle and the journal is not what its pods hold (a write to a pod "
                     "that skipped us_pod_touch?)", st->nodes[n].name);
            rc = -2;
        }
    }
    for (size_t w = 0; w < st->nworkloads && rc == 0; w++)
        if (l->holding[w] != fresh.holding[w] || l->running[w] != fresh.running[w] ||
            l->pending[w] != fresh.pending[w] || l->unnamed[w] != fresh.unnamed[w]) {
            snprintf(broken, len, "invariant \"ledger\" broken: workload \"%s\": pods holding, "
                     "running, pending and pending not named %d, %d, %d, %d kept, %d, %d, %d, %d "
                     "counted (a write to a pod that skipped us_pod_touch?)", st->workloads[w].name,
                     l->holding[w], l->running[w], l->pending[w], l->unnamed[w], fresh.holding[w],
                     fresh.running[w], fresh.pending[w], fresh.unnamed[w]);
            rc = -2;
        }
    for (size_t n = 0; n < st->nnodes && rc == 0 && !l->counts_only; n++) {
        if (!us_use_equal(&l->ai[n], &fresh.ai[n]) || !us_use_top_holds(&l->ai[n]) ||
            memcmp(&l->bg[n], &fresh.bg[n], sizeof l->bg[n]) != 0) {
            snprintf(broken, len, "invariant \"ledger\" broken: node \"%s\": the AI view or "
                     "background total kept from the last cycle and the journal is not what "
                     "its pods hold (a write to a pod that skipped us_pod_touch, or a "
                     "workload whose kind changed unseen?)", st->nodes[n].name);
            rc = -2;
        }
    }
    for (size_t w = 0; w < st->nworkloads && rc == 0; w++)
        if (l->kind[w] != fresh.kind[w]) {
            snprintf(broken, len, "invariant \"ledger\" broken: workload \"%s\": its pods "
                     "counted as kind %d, it is kind %d", st->workloads[w].name, l->kind[w],
                     fresh.kind[w]);
            rc = -2;
        }
    if (rc == 0 && l->npipelined != fresh.npipelined) {
        snprintf(broken, len, "invariant \"ledger\" broken: %zu pipelined pod(s) kept, %zu counted",
                 l->npipelined, fresh.npipelined);
        rc = -2;
    }
    us_ledger_free(&fresh);
    return rc;
}

int us_ledger_sync(us_ledger *l, us_state *st, char *broken, size_t len) {
    (void)broken;
    (void)len;
    if (!st->pods_version) us_state_pods_renumbered(st);  /* known from here on */
    l->applied = 0;
    l->recounted = false;
    bool followed = can_follow(l, st) && kinds_follow(l, st) && apply(l, st, true);
    us_state_journal_clear(st);
    if (!followed) {
        l->applied = 0;
        return us_ledger_take(l, st);
    }
#ifdef US_CHECK_INVARIANTS
    int rc = us_ledger_check(l, st, broken, len);
    if (rc < 0) us_ledger_free(l);
    return rc;
#else
    return 0;
#endif
}

int us_ledger_renumber_workloads(us_ledger *l, us_state *st, const int *wmap, size_t nnew) {
    /* the journal names workloads by their old numbers: read it first */
    bool followed = can_follow(l, st) && kinds_follow(l, st) && apply(l, st, true);
    us_state_journal_clear(st);
    for (size_t w = 0; w < st->nworkloads && followed; w++)
        /* a workload going has no pod */
        followed = wmap[w] >= 0 || (l->holding[w] == 0 && l->pending[w] == 0);
    if (!followed) {
        us_ledger_free(l);
        return 1;
    }
    /* wmap keeps the order (new <= old), so the copies go forward in place */
    for (size_t w = 0; w < st->nworkloads; w++) {
        int to = wmap[w];
        if (to < 0) continue;
        l->holding[to] = l->holding[w];
        l->running[to] = l->running[w];
        l->pending[to] = l->pending[w];
        l->unnamed[to] = l->unnamed[w];
        l->kind[to] = l->kind[w];
        if (l->wpool) l->wpool[to] = l->wpool[w];
    }
    l->nworkloads = nnew;
    return 0;
}

void us_ledger_lend(us_ledger *l, us_use **use, int **waiting) {
    *use = l->use;
    *waiting = l->waiting;
    l->use = NULL;
    l->waiting = NULL;
}

void us_ledger_settle(us_ledger *l, us_state *st, us_use *use, int *waiting) {
    l->use = use;
    l->waiting = waiting;
    /* the cycle's own changes: in use and waiting already */
    bool followed = waiting && can_follow(l, st) && kinds_follow(l, st) && apply(l, st, false);
    us_state_journal_clear(st);
    if (!followed) us_ledger_free(l);
}

/* Pod x's share (counted as kind) in or out of the listed views. */
static bool view_patch(const us_ledger *l, const us_state *st, const us_pod_was *x, uint8_t kind,
                       const int *pos, us_use *ai, us_bg_total *bg, uint64_t *held, int sign) {
    int share = share_of(l, x, kind);
    if (!share || pos[x->node] < 0) return true;
    int at = pos[x->node];
    if (held) held[at] = 0;  /* no longer the ledger's as stamped */
    return view_add(st, x, share, &ai[at], &bg[at], sign);
}

int us_ledger_views(const us_ledger *l, const us_state *st, const int *nodes, size_t n,
                    const int *pos, us_use *ai, us_bg_total *bg, uint64_t *held, size_t *copied) {
    if (copied) *copied = 0;
    if (!l || !l->valid || !l->ai || st->journal_lost || l->pods_version != st->pods_version ||
        l->nodes_version != st->nodes_version || l->nnodes != st->nnodes ||
        l->nworkloads != st->nworkloads)
        return 1;
    /* a kind changed since the journal was read: not followed here (the
     * next sync follows it, or counts afresh) */
    for (size_t w = 0; w < st->nworkloads; w++)
        if (us_view_kind(&st->workloads[w]) != l->kind[w]) return 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t stamp = l->stamp[nodes[i]];
        if (held && held[i] == stamp) continue;  /* what it holds already */
        us_use_copy(&ai[i], &l->ai[nodes[i]]);
        bg[i] = l->bg[nodes[i]];
        if (held) held[i] = stamp;
        if (copied) ++*copied;
    }
    /* what changed since: the cycle's own bindings and evictions so far */
    for (size_t k = 0; k < st->njournal; k++) {
        const us_pod_was *was = &st->journal[k];
        us_pod_was is = now_of(st, was);
        if (!view_patch(l, st, was, l->kind[was->workload], pos, ai, bg, held, -1) ||
            !view_patch(l, st, &is, l->kind[is.workload], pos, ai, bg, held, 1)) {
            memset(ai, 0, n * sizeof *ai);
            memset(bg, 0, n * sizeof *bg);
            if (held) memset(held, 0, n * sizeof *held);
            return 1;
        }
    }
    return 0;
}

int us_ledger_workload_counts(const us_ledger *l, const us_state *st, const us_ledger_counts *out) {
    if (!l || !l->valid || !l->running || st->journal_lost || l->pods_version != st->pods_version ||
        l->nworkloads != st->nworkloads)
        return 1;
    size_t nw = st->nworkloads;
    memcpy(out->holding, l->holding, nw * sizeof *out->holding);
    memcpy(out->running, l->running, nw * sizeof *out->running);
    memcpy(out->pending, l->pending, nw * sizeof *out->pending);
    memcpy(out->unnamed, l->unnamed, nw * sizeof *out->unnamed);
    /* what changed since: each entry out as it was, in as it is, as count() does */
    for (size_t k = 0; k < st->njournal; k++) {
        const us_pod_was *was = &st->journal[k];
        us_pod_was is = now_of(st, was);
        for (int sign = -1; sign <= 1; sign += 2) {
            const us_pod_was *x = sign < 0 ? was : &is;
            if (!x->gone) workload_count(x, out, sign);
        }
    }
    return 0;
}
