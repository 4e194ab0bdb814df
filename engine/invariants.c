/*
 * invariants.c — the invariant checker (see invariants.h).  Each check
 * recomputes what it needs from the state alone, so that it does not share
 * a bug with the code it checks; the first violation found is reported.
 */
#include "invariants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sort.h"
#include "use.h"

static int push(us_inv *inv, int pod, int node, int what) {
    if (us_grow((void **)&inv->e, &inv->cap, inv->n, sizeof *inv->e) < 0) return -1;
    inv->e[inv->n++] = (us_inv_expect){pod, node, what};
    return 0;
}

int us_inv_record(us_inv *inv, const us_plan *p, const us_reoffer *bg) {
    const us_state *st = p->st;
    for (size_t k = 0; k < p->nplaced; k++)
        if (push(inv, p->placed[k], p->pnode[p->placed[k]], US_INV_PLACED) < 0) return -1;
    for (size_t i = 0; i < p->npods; i++)
        if ((p->flags[i] & US_PF_VICTIM) && push(inv, (int)i, st->pods[i].node, US_INV_STOPPED) < 0)
            return -1;
    /* every running background pod, offered or staying: a staying pod the
     * commit stopped (it reads only the offered ones) breaks "kept".  The
     * re-offer does not list the pods that stay: they are found here from
     * the workloads alone (not from the plan's us_plan.wl_bg), as every
     * running pod of active background work of the pool on one of its
     * nodes that was not offered */
    bool *offered = calloc(p->npods + 1, sizeof *offered);
    if (!offered) return -1;
    int rc = 0;
    for (size_t k = 0; k < bg->nrunning && rc == 0; k++) {
        offered[bg->running[k]] = true;
        rc = push(inv, bg->running[k], st->pods[bg->running[k]].node,
                  bg->keep[k] ? US_INV_KEPT : US_INV_STOPPED);
    }
    for (size_t i = 0; i < p->npods && rc == 0; i++) {
        const us_pod *pd = &st->pods[i];
        const us_workload *w = &st->workloads[pd->workload];
        if (!offered[i] && !pd->gone && w->background && !w->blocked && w->state == US_WL_ACTIVE &&
            strcmp(w->pool, p->pool) == 0 && pd->state == US_POD_RUNNING && pd->node >= 0 &&
            p->pos[pd->node] >= 0)
            rc = push(inv, (int)i, pd->node, US_INV_KEPT);
    }
    free(offered);
    if (rc < 0) return -1;
    for (size_t k = 0; k < bg->npending; k++)
        if (bg->place[k] >= 0 && push(inv, bg->pending[k], bg->place[k], US_INV_PLACED) < 0) return -1;
    /* pods nothing may move, from the workloads alone (not from
     * us_plan_holds_fixed, the plan's own test) */
    for (size_t i = 0; i < p->npods; i++) {
        const us_pod *pd = &st->pods[i];
        const us_workload *w = &st->workloads[pd->workload];
        bool fixed = w->external || (w->blocked && w->state == US_WL_ACTIVE);
        if (fixed && !pd->gone && pd->state == US_POD_RUNNING && pd->node >= 0 &&
            p->pos[pd->node] >= 0 && push(inv, (int)i, pd->node, US_INV_FIXED) < 0)
            return -1;
    }
    return 0;
}

void us_inv_free(us_inv *inv) {
    free(inv->e);
    memset(inv, 0, sizeof *inv);
}

#define BROKEN(err, name, ...)                                                          \
    (us_err_set(err, US_EINVARIANT, "invariant \"" name "\" broken after the cycle at t=%g: " \
                __VA_ARGS__))

static void res_text(us_res r, char *buf, size_t len) {
    snprintf(buf, len, "gpu %g, cpu %lldm, memory %lld", (double)r.v[US_GPU] / US_GPU_UNIT,
             (long long)r.v[US_CPU], (long long)r.v[US_MEM]);
}

/* Add every pod in one of two states to its node's use, in pod order; the
 * first that does not fit breaks the invariant. */
static int capacity(const us_state *st, us_pod_state a, us_pod_state b, const char *view,
                    double now, us_err *err) {
    us_use *u = calloc(st->nnodes ? st->nnodes : 1, sizeof *u);
    if (!u) return us_err_nomem(err);
    int rc = 0;
    for (size_t i = 0; i < st->npods && rc == 0; i++) {
        const us_pod *pd = &st->pods[i];
        if (pd->gone || pd->node < 0 || (pd->state != a && pd->state != b)) continue;
        const us_node *n = &st->nodes[pd->node];
        us_res req = st->workloads[pd->workload].request;
        /* a pod sharing a device holds one: the uses the cycle keeps take
         * such a pod off the device it recorded */
        if (us_req_is_fractional(req) && pd->shared_dev < 0) {
            rc = BROKEN(err, "capacity",
                        "pod \"%s\" (%s on node \"%s\") asks a fraction of a GPU but holds no "
                        "device", now, pd->name, us_pod_state_names[pd->state], n->name);
            break;
        }
        if (!us_use_fits(&u[pd->node], n, req, pd->shared_dev)) {
            char held[96], cap[96];
            res_text(u[pd->node].used, held, sizeof held);
            res_text(n->cap, cap, sizeof cap);
            rc = BROKEN(err, "capacity",
                        "node \"%s\" is over capacity %s: pod \"%s\" (%s) does not fit beside "
                        "%s of %s (%d whole GPU(s) of %d taken)",
                        now, n->name, view, pd->name, us_pod_state_names[pd->state], held, cap,
                        u[pd->node].whole, n->gpus);
            break;
        }
        us_use_add(&u[pd->node], n, req, pd->shared_dev);
    }
    free(u);
    return rc;
}

static bool holds_ai(const us_pod *pd) {
    return !pd->gone && (pd->state == US_POD_RUNNING || pd->state == US_POD_PIPELINED);
}

static bool ai_workload(const us_workload *w) {
    return w->state == US_WL_ACTIVE && !w->background && !w->blocked && !w->external;
}

static int gangs(const us_state *st, double now, us_err *err) {
    int *live = calloc(st->nworkloads ? st->nworkloads : 1, sizeof *live);
    if (!live) return us_err_nomem(err);
    for (size_t i = 0; i < st->npods; i++)
        if (holds_ai(&st->pods[i])) live[st->pods[i].workload]++;
    int rc = 0;
    for (size_t w = 0; w < st->nworkloads && rc == 0; w++) {
        const us_workload *wl = &st->workloads[w];
        if (ai_workload(wl) && live[w] > 0 && !us_wl_gang_whole(wl, live[w]))
            rc = BROKEN(err, "gang",
                        "workload \"%s\" holds %d pod(s) (running or pipelined), below its "
                        "min_member %d and above 0",
                        now, wl->name, live[w], wl->min_member);
    }
    free(live);
    return rc;
}

static int by_name(const void *a, const void *b, void *ctx) {
    const us_state *st = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    int c = strcmp(st->pods[x].name, st->pods[y].name);
    return c ? c : (x < y ? -1 : x > y);
}

static int names(const us_state *st, double now, us_err *err) {
    int *live = malloc((st->npods ? st->npods : 1) * sizeof *live);
    if (!live) return us_err_nomem(err);
    size_t n = 0;
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *pd = &st->pods[i];
        if (!pd->gone && (pd->state == US_POD_PENDING || pd->state == US_POD_PIPELINED ||
                          pd->state == US_POD_RUNNING))
            live[n++] = (int)i;
    }
    us_sort(live, n, sizeof *live, by_name, (void *)st);
    int rc = 0;
    for (size_t i = 1; i < n && rc == 0; i++) {
        const us_pod *x = &st->pods[live[i - 1]], *y = &st->pods[live[i]];
        if (strcmp(x->name, y->name) == 0)
            rc = BROKEN(err, "names", "two live pods are named \"%s\" (%s and %s)", now,
                        x->name, us_pod_state_names[x->state], us_pod_state_names[y->state]);
    }
    free(live);
    return rc;
}

static int applied(const us_state *st, const us_inv *inv, double now, us_err *err) {
    for (size_t k = 0; k < inv->n; k++) {
        const us_inv_expect *e = &inv->e[k];
        const us_pod *pd = &st->pods[e->pod];
        const char *node = e->node >= 0 ? st->nodes[e->node].name : "(none)";
        bool on = !pd->gone && pd->node == e->node;
        switch (e->what) {
        case US_INV_PLACED:
            if (!on || (pd->state != US_POD_RUNNING && pd->state != US_POD_PIPELINED))
                return BROKEN(err, "applied",
                              "pod \"%s\" was placed on node \"%s\" but is %s%s%s", now, pd->name,
                              node, pd->gone ? "gone" : us_pod_state_names[pd->state],
                              pd->node >= 0 && pd->node != e->node ? " on node " : "",
                              pd->node >= 0 && pd->node != e->node ? st->nodes[pd->node].name : "");
            break;
        case US_INV_KEPT:
            if (!on || pd->state != US_POD_RUNNING)
                return BROKEN(err, "applied",
                              "background pod \"%s\" was kept on node \"%s\" but is %s", now,
                              pd->name, node, pd->gone ? "gone" : us_pod_state_names[pd->state]);
            break;
        case US_INV_FIXED:
            if (!on || pd->state != US_POD_RUNNING)
                return BROKEN(err, "applied",
                              "pod \"%s\" of %s workload ran on node \"%s\" but is %s", now, pd->name,
                              st->workloads[pd->workload].external ? "an external" : "a blocked", node,
                              pd->gone ? "gone" : us_pod_state_names[pd->state]);
            break;
        case US_INV_STOPPED:
            /* terminating, or (nothing to release) already the controller's
             * new pending incarnation */
            if (!pd->gone && pd->state != US_POD_RELEASING && pd->state != US_POD_PENDING)
                return BROKEN(err, "applied",
                              "pod \"%s\" was evicted from node \"%s\" but is %s", now, pd->name,
                              node, us_pod_state_names[pd->state]);
            break;
        }
    }
    return 0;
}

static int queue_usage(const us_state *st, const us_queue_figures *figs, double now, us_err *err) {
    us_res *sum = calloc(st->nqueues ? st->nqueues : 1, sizeof *sum);
    if (!sum) return us_err_nomem(err);
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *pd = &st->pods[i];
        const us_workload *w = &st->workloads[pd->workload];
        if (!holds_ai(pd) || !ai_workload(w)) continue;
        for (int q = w->queue; q >= 0; q = st->queues[q].parent) sum[q] = us_res_add(sum[q], w->request);
    }
    int rc = 0;
    for (size_t q = 0; q < st->nqueues && rc == 0; q++)
        if (memcmp(&sum[q], &figs[q].allocated, sizeof sum[q]) != 0) {
            char a[96], b[96];
            res_text(figs[q].allocated, a, sizeof a);
            res_text(sum[q], b, sizeof b);
            rc = BROKEN(err, "queue-usage",
                        "queue \"%s\" reports an allocation of %s, its pods hold %s", now,
                        st->queues[q].name, a, b);
        }
    free(sum);
    return rc;
}

/* What the state keeps derived of the queue tree (a leaf has no child; a
 * root is at depth 0, a child one below its parent) is what the tree says,
 * however the tree was built (loaded whole, or queue by queue through the
 * API, which derives only what a new queue changes).  Walked from each
 * queue to its root with a bound: a cycle is reported, not followed. */
static int queue_tree(const us_state *st, double now, us_err *err) {
    size_t n = st->nqueues;
    bool *parent_of = calloc(n ? n : 1, sizeof *parent_of);
    if (!parent_of) return us_err_nomem(err);
    int rc = 0;
    for (size_t q = 0; q < n; q++)
        if (st->queues[q].parent >= 0) parent_of[st->queues[q].parent] = true;
    for (size_t q = 0; q < n && rc == 0; q++) {
        const us_queue *x = &st->queues[q];
        int depth = 0;
        for (int p = x->parent; p >= 0 && (size_t)depth <= n; p = st->queues[p].parent) depth++;
        if ((size_t)depth > n)
            rc = BROKEN(err, "queue-tree", "queue \"%s\" is in a cycle of parents", now, x->name);
        else if (x->leaf == parent_of[q] || x->depth != depth)
            rc = BROKEN(err, "queue-tree", "queue \"%s\" is kept as %s at depth %d; the tree makes it %s at depth %d",
                        now, x->name, x->leaf ? "a leaf" : "a parent", x->depth,
                        parent_of[q] ? "a parent" : "a leaf", depth);
    }
    free(parent_of);
    return rc;
}

/* The ledger the cycle kept against the same read from the pods now. */
static int physical_use(const us_state *st, const us_phys *kept, double now, us_err *err) {
    if (!kept || !kept->use) return 0;
    us_phys now_ph;
    if (us_phys_take(st, &now_ph) < 0) return us_err_nomem(err);
    int rc = 0;
    for (size_t n = 0; n < st->nnodes && n < kept->nnodes && rc == 0; n++) {
        const us_use *a = &kept->use[n], *b = &now_ph.use[n];
        if (!us_use_equal(a, b)) {
            char ka[96], kb[96];
            res_text(a->used, ka, sizeof ka);
            res_text(b->used, kb, sizeof kb);
            rc = BROKEN(err, "physical-use",
                        "node \"%s\": the cycle kept %s (%d whole GPU(s)) where its running and "
                        "terminating pods hold %s (%d whole GPU(s))",
                        now, st->nodes[n].name, ka, a->whole, kb, b->whole);
        } else if (kept->waiting[n] != now_ph.waiting[n]) {
            rc = BROKEN(err, "physical-use",
                        "node \"%s\": the cycle kept %d pipelined pod(s) waiting where %d do",
                        now, st->nodes[n].name, kept->waiting[n], now_ph.waiting[n]);
        }
    }
    if (rc == 0 && kept->nnodes != st->nnodes)
        rc = BROKEN(err, "physical-use", "the cycle kept %zu nodes where the state has %zu", now,
                    kept->nnodes, st->nnodes);
    us_phys_free(&now_ph);
    return rc;
}

int us_inv_check(const us_state *st, const us_inv *inv, const us_queue_figures *figs, double now,
                 us_err *err) {
    if (capacity(st, US_POD_RUNNING, US_POD_RELEASING, "physically (running and terminating pods)",
                 now, err) < 0 ||
        capacity(st, US_POD_RUNNING, US_POD_PIPELINED, "as planned (running and pipelined pods)",
                 now, err) < 0 ||
        gangs(st, now, err) < 0 || names(st, now, err) < 0 || applied(st, inv, now, err) < 0 ||
        queue_usage(st, figs, now, err) < 0 || queue_tree(st, now, err) < 0 ||
        physical_use(st, inv->phys, now, err) < 0)
        return -1;
    return 0;
}
