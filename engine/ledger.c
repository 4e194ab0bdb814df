/*
 * ledger.c — per-node physical use and per-workload counts kept across
 * cycles (see ledger.h).
 */
#include "ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usesum.h"

void us_ledger_free(us_ledger *l) {
    free(l->use);
    free(l->waiting);
    free(l->holding);
    memset(l, 0, sizeof *l);
}

int us_ledger_take(us_ledger *l, const us_state *st) {
    us_ledger_free(l);
    size_t nn = st->nnodes ? st->nnodes : 1, nw = st->nworkloads ? st->nworkloads : 1;
    l->use = calloc(nn, sizeof *l->use);
    l->waiting = calloc(nn, sizeof *l->waiting);
    l->holding = calloc(nw, sizeof *l->holding);
    us_usesum sum;  /* one addition per node, not per pod (usesum.h) */
    if (!l->use || !l->waiting || !l->holding || us_usesum_init(&sum, st->nnodes, &l->use, 1) < 0) {
        us_ledger_free(l);
        return -1;
    }
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *pd = &st->pods[i];
        if (pd->gone) continue;
        if (pd->state == US_POD_PIPELINED) {
            l->npipelined++;
            if (pd->node >= 0) l->waiting[pd->node]++;
        }
        if (pd->state == US_POD_RUNNING || pd->state == US_POD_PIPELINED) l->holding[pd->workload]++;
        if (us_ledger_holds_room(pd->gone, pd->node, pd->state))
            us_usesum_add(&sum, (size_t)pd->node, &st->nodes[pd->node],
                          st->workloads[pd->workload].request, pd->shared_dev);
    }
    us_usesum_flush_all(&sum);
    us_usesum_free(&sum);
    l->valid = true;
    l->pods_version = st->pods_version;
    l->nodes_version = st->nodes_version;
    l->nnodes = st->nnodes;
    l->nworkloads = st->nworkloads;
    l->cap_workloads = nw;
    l->recounted = true;
    return 0;
}

static bool saturated(const us_use *u) {
    for (int r = 0; r < US_NRES; r++)
        if (u->used.v[r] == INT64_MAX || u->used.v[r] == INT64_MIN) return true;
    return false;
}

/* Count pod x in (sign 1) or out (-1).  false when it cannot be followed
 * exactly: a fractional pod with no device recorded, a saturated sum. */
static bool count(us_ledger *l, const us_state *st, const us_pod_was *x, int sign, bool nodes) {
    if (x->gone) return true;
    if (x->state == US_POD_PIPELINED) {
        l->npipelined += (size_t)(ptrdiff_t)sign;
        if (nodes && x->node >= 0) l->waiting[x->node] += sign;
    }
    if (x->state == US_POD_RUNNING || x->state == US_POD_PIPELINED) l->holding[x->workload] += sign;
    if (!nodes || !us_ledger_holds_room(x->gone, x->node, x->state)) return true;
    us_res req = st->workloads[x->workload].request;
    if (us_req_is_fractional(req) && (x->shared_dev < 0 || x->shared_dev >= US_MAX_GPUS)) return false;
    us_use *u = &l->use[x->node];
    if (saturated(u)) return false;
    if (sign > 0) us_use_add(u, &st->nodes[x->node], req, x->shared_dev);
    else us_use_remove(u, req, x->shared_dev);
    return !saturated(u);
}

/* Each journal entry out as it was, in as it is (in the per-node counts
 * too when nodes); false when one cannot be followed (the counts are then
 * half-done: the caller counts afresh). */
static bool apply(us_ledger *l, const us_state *st, bool nodes) {
    for (size_t k = 0; k < st->njournal; k++) {
        const us_pod_was *was = &st->journal[k];
        us_pod_was is = {was->pod, was->workload, -1, -1, US_POD_PENDING, true};
        if (was->pod >= 0) {
            const us_pod *pd = &st->pods[was->pod];
            is = (us_pod_was){was->pod, pd->workload, pd->node, pd->shared_dev, pd->state, pd->gone};
        }
        if (!count(l, st, was, -1, nodes) || !count(l, st, &is, 1, nodes)) return false;
        l->applied++;
    }
    return true;
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
        if (!h) return false;
        l->holding = h;
        l->cap_workloads = cap;
    }
    memset(l->holding + l->nworkloads, 0, (st->nworkloads - l->nworkloads) * sizeof *l->holding);
    l->nworkloads = st->nworkloads;
    return true;
}

int us_ledger_check(const us_ledger *l, const us_state *st, char *broken, size_t len) {
    us_ledger fresh = {0};
    if (!l->valid || !l->use || l->nnodes != st->nnodes || l->nworkloads != st->nworkloads) {
        snprintf(broken, len, "invariant \"ledger\" broken: no counts kept for the state's %zu "
                 "node(s) and %zu workload(s)", st->nnodes, st->nworkloads);
        return -2;
    }
    if (us_ledger_take(&fresh, st) < 0) return -1;
    int rc = 0;
    for (size_t n = 0; n < st->nnodes && rc == 0; n++) {
        const us_use *a = &l->use[n], *b = &fresh.use[n];
        if (memcmp(&a->used, &b->used, sizeof a->used) != 0 || a->whole != b->whole ||
            memcmp(a->shared, b->shared, sizeof a->shared) != 0 || l->waiting[n] != fresh.waiting[n]) {
            snprintf(broken, len, "invariant \"ledger\" broken: node \"%s\": the use kept from the "
                     "last cycle and the journal is not what its pods hold (a write to a pod "
                     "that skipped us_pod_touch?)", st->nodes[n].name);
            rc = -2;
        }
    }
    for (size_t w = 0; w < st->nworkloads && rc == 0; w++)
        if (l->holding[w] != fresh.holding[w]) {
            snprintf(broken, len, "invariant \"ledger\" broken: workload \"%s\": %d pod(s) holding "
                     "kept, %d counted", st->workloads[w].name, l->holding[w], fresh.holding[w]);
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
    bool followed = can_follow(l, st) && apply(l, st, true);
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
    bool followed = waiting && can_follow(l, st) && apply(l, st, false);
    us_state_journal_clear(st);
    if (!followed) us_ledger_free(l);
}
