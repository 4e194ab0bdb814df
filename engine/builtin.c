/*
 * builtin.c — the default policies compiled in C: KAI fair share, the
 * bin-packing node score and the background re-offer.
 *
 * Each function is the algorithm of policies/fairshare.lua, placement.lua
 * and background.lua, step for step and in the same units, so that the C
 * and Lua versions give bit-identical doubles (tests/c/test_policy.c checks
 * it).  That is why the arithmetic below works in the units of the Lua
 * views (gpu in devices, cpu in millicores, memory in bytes), keeps the
 * order of every sum and product, and only converts back at the end: change
 * one side and the other must change with it.
 *
 * Pure functions of their input: no Lua, no state, no globals.  They judge
 * nothing: a caller checks the invariants of what they return.
 */
#include "builtin.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sort.h"

/* A gpu amount in devices, as the Lua views show it. */
static double gpus(int64_t milli) { return (double)milli / US_GPU_UNIT; }

static double view_value(int r, int64_t v) { return r == US_GPU ? gpus(v) : (double)v; }

/* Quota or limit in view units; -1 (unlimited / no limit) stays -1. */
static double view_bound(int r, int64_t v) { return v == US_UNLIMITED ? -1.0 : view_value(r, v); }

/* Lua's math.min(a, b): a unless b is strictly smaller. */
static double min2(double a, double b) { return b < a ? b : a; }

/* Lua's x / capacity with the "0 when there is no capacity" rule. */
static double fraction(double used, double capacity) { return capacity == 0 ? 0 : used / capacity; }

/* ---- fair share ------------------------------------------------------- */

typedef struct fs_work {
    const us_fs_input *in;
    int r;          /* resource being divided */
    int *first;     /* first[q]: first child of q in name order; first[n]: first root */
    int *next;      /* next[q]: the sibling after q, in name order */
    int *sibs;      /* scratch: one sibling group */
    int *act;       /* scratch: siblings still taking in a water-filling round */
    int *prios;     /* scratch: distinct priorities of a group, highest first */
    int *waiting;   /* queues whose children are still to be divided */
    double *share;  /* fair share of resource r, view units */
    double *want;   /* deserved amount (quota capped by demand and limit) */
    double *rest;   /* what a water-filling round offered beyond whole units; < 0: none */
} fs_work;

/* What a queue is guaranteed before anything is shared: its quota, capped by
 * its demand (quota it does not use would be wasted) and its limit.  An
 * unlimited quota guarantees its demand, up to what is being divided. */
static double deserved(const us_fs_queue *q, int r, double amount) {
    double demand = view_value(r, q->demand.v[r]);
    double quota = view_bound(r, q->res[r].quota);
    double limit = view_bound(r, q->res[r].limit);
    double want = min2(amount, demand);
    if (quota != -1) want = min2(quota, demand);
    if (limit != -1) want = min2(want, limit);
    return want < 0 ? 0 : want;
}

/* The most a queue can usefully receive: its demand, capped by its limit. */
static double ceiling(const us_fs_queue *q, int r) {
    double most = view_value(r, q->demand.v[r]);
    double limit = view_bound(r, q->res[r].limit);
    if (limit != -1) most = min2(most, limit);
    return most;
}

/* Does queue a come before b for a unit left over: the larger rest, then
 * created earlier, then name. */
static bool rest_before(const fs_work *w, int a, int b) {
    const us_fs_queue *qs = w->in->queues;
    if (w->rest[a] != w->rest[b]) return w->rest[a] > w->rest[b];
    if (qs[a].created_at != qs[b].created_at) return qs[a].created_at < qs[b].created_at;
    return strcmp(qs[a].name, qs[b].name) < 0;
}

/* Water-filling inside one priority bucket, in whole units as KAI does.
 * Each round, every sibling still short of its ceiling and with a positive
 * weight is offered remaining * weight / total weight: one that needs no
 * more than that takes what it needs, and the rest is offered again next
 * round; the others take the whole units of their offer (floor).  What the
 * floors leave goes one unit at a time to the siblings with the largest
 * part of a unit not given (then the earliest created, then name), never
 * past a ceiling.  Returns what the bucket leaves over. */
static double waterfill(fs_work *w, size_t m, int prio, double remaining) {
    const us_fs_queue *qs = w->in->queues;
    int r = w->r;
    for (size_t i = 0; i < m; i++) w->rest[w->sibs[i]] = -1;
    for (;;) {
        size_t k = 0;
        double total_weight = 0;
        for (size_t i = 0; i < m; i++) {
            int q = w->sibs[i];
            double weight = qs[q].res[r].over_quota_weight;
            if (qs[q].priority != prio) continue;
            if (weight > 0 && ceiling(&qs[q], r) - w->share[q] > 0) {
                w->act[k++] = q;
                total_weight = total_weight + weight;
            }
        }
        if (k == 0 || remaining <= 0) break;

        double given = 0;
        bool again = false;
        for (size_t j = 0; j < k; j++) {
            int q = w->act[j];
            double room = ceiling(&qs[q], r) - w->share[q];
            double portion = remaining * qs[q].res[r].over_quota_weight / total_weight;
            if (room <= portion) {
                /* assign, not add: the share lands exactly on the ceiling */
                w->share[q] = ceiling(&qs[q], r);
                given = given + room;
                w->rest[q] = -1;
                if (room < portion) again = true;
            } else {
                double whole = floor(portion);
                w->share[q] = w->share[q] + whole;
                given = given + whole;
                if (portion - whole > 0) w->rest[q] = portion - whole;
            }
        }
        remaining = remaining - given;
        /* nobody needed less than offered: no round would give more */
        if (!again) break;
    }
    while (remaining > 0) {
        int best = -1;
        for (size_t i = 0; i < m; i++) {
            int q = w->sibs[i];
            if (qs[q].priority == prio && w->rest[q] >= 0 && (best < 0 || rest_before(w, q, best)))
                best = q;
        }
        if (best < 0) break;
        double unit = min2(min2(1, remaining), ceiling(&qs[best], r) - w->share[best]);
        w->share[best] = w->share[best] + unit;
        remaining = remaining - unit;
        w->rest[best] = -1;
    }
    return remaining;
}

static int by_prio_desc(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

/* Divide what parent p holds (the pool's capacity for the virtual root n)
 * among its children. */
static void divide(fs_work *w, int p) {
    const us_fs_queue *qs = w->in->queues;
    size_t n = w->in->nqueues, m = 0, np = 0;
    int r = w->r;
    double amount = (size_t)p == n ? view_value(r, w->in->capacity.v[r]) : w->share[p];

    for (int c = w->first[p]; c != -1; c = w->next[c]) w->sibs[m++] = c;

    /* 1. quotas first, in full even when they add up to more than the
     * amount (KAI: a quota is not scaled down; the check allows it) */
    double total = 0, remaining;
    for (size_t i = 0; i < m; i++) {
        int q = w->sibs[i];
        w->want[q] = deserved(&qs[q], r, amount);
        w->share[q] = w->want[q];
        total = total + w->want[q];
    }
    remaining = amount - total;

    /* 2. the rest by priority bucket, highest first */
    for (size_t i = 0; i < m; i++) {
        int pr = qs[w->sibs[i]].priority;
        size_t j = 0;
        while (j < np && w->prios[j] != pr) j++;
        if (j == np) w->prios[np++] = pr;
    }
    qsort(w->prios, np, sizeof *w->prios, by_prio_desc);
    for (size_t j = 0; j < np; j++) {
        if (remaining <= 0) break;
        remaining = waterfill(w, m, w->prios[j], remaining);
    }
}

static int by_queue_name(const void *a, const void *b) {
    const us_fs_queue *x = *(const us_fs_queue *const *)a;
    const us_fs_queue *y = *(const us_fs_queue *const *)b;
    return strcmp(x->name, y->name);
}

int us_builtin_fairshare(const us_fs_input *in, double *fair, us_err *err) {
    size_t n = in->nqueues;
    int rc = -1;
    fs_work w = {.in = in};
    const us_fs_queue **sorted = NULL;

    for (size_t i = 0; i < n; i++) {
        int p = in->queues[i].parent;
        if (!in->queues[i].name) {
            us_err_set(err, US_EINVAL, "fair share input: queue %zu has no name", i);
            goto done;
        }
        if (p < -1 || p >= (long long)n || (size_t)p == i) {
            us_err_set(err, US_EINVAL, "fair share input: queue \"%s\" has an invalid parent (%d)",
                       in->queues[i].name, p);
            goto done;
        }
    }
    sorted = malloc((n + 1) * sizeof *sorted);
    w.first = malloc((n + 1) * sizeof *w.first);
    w.next = malloc((n + 1) * sizeof *w.next);
    w.sibs = malloc((n + 1) * sizeof *w.sibs);
    w.act = malloc((n + 1) * sizeof *w.act);
    w.prios = malloc((n + 1) * sizeof *w.prios);
    w.waiting = malloc((n + 1) * sizeof *w.waiting);
    w.share = malloc((n + 1) * sizeof *w.share);
    w.want = malloc((n + 1) * sizeof *w.want);
    w.rest = malloc((n + 1) * sizeof *w.rest);
    if (!sorted || !w.first || !w.next || !w.sibs || !w.act || !w.prios || !w.waiting || !w.share ||
        !w.want || !w.rest) {
        us_err_nomem(err);
        goto done;
    }

    /* Child lists in name order, so every sum runs in the order the Lua
     * policy uses (its `children` lists are sorted by name). */
    for (size_t i = 0; i < n; i++) sorted[i] = &in->queues[i];
    qsort(sorted, n, sizeof *sorted, by_queue_name);
    for (size_t i = 0; i <= n; i++) w.first[i] = -1;
    for (size_t i = n; i-- > 0;) {
        int q = (int)(sorted[i] - in->queues);
        int p = in->queues[q].parent < 0 ? (int)n : in->queues[q].parent;
        w.next[q] = w.first[p];
        w.first[p] = q;
    }

    for (int r = 0; r < US_NRES; r++) {
        size_t head = 0, tail = 0;
        w.r = r;
        for (size_t i = 0; i < n; i++) w.share[i] = 0;
        /* Breadth first from the virtual root.  Each queue has one parent, so
         * it is queued at most once; a parent cycle is unreachable from the
         * root and its queues keep 0. */
        w.waiting[tail++] = (int)n;
        while (head < tail) {
            int p = w.waiting[head++];
            divide(&w, p);
            for (int c = w.first[p]; c != -1; c = w.next[c])
                if (w.first[c] != -1) w.waiting[tail++] = c;
        }
        for (size_t i = 0; i < n; i++)
            fair[i * US_NRES + r] = r == US_GPU ? w.share[i] * US_GPU_UNIT : w.share[i];
    }
    rc = 0;
done:
    free(sorted);
    free(w.first);
    free(w.next);
    free(w.sibs);
    free(w.act);
    free(w.prios);
    free(w.waiting);
    free(w.share);
    free(w.want);
    free(w.rest);
    return rc;
}

/* ---- placement score -------------------------------------------------- */

/* score = 1000 * gpu_fraction + cpu_fraction, each fraction being
 * (allocated + request) / capacity on the node (0 without capacity): the
 * fullest node by GPU wins, CPU breaks the tie.  Packing keeps whole nodes
 * free for large gangs and for background work. */
double us_builtin_score(const us_pod_view *pod, const us_node_view *node) {
    us_res req = pod->wl->request, cap = node->node->cap, alloc = node->allocated;
    double gpu_after = gpus(alloc.v[US_GPU]) + gpus(req.v[US_GPU]);
    int64_t cpu_after = alloc.v[US_CPU] + req.v[US_CPU];
    return 1000 * fraction(gpu_after, gpus(cap.v[US_GPU])) +
           fraction((double)cpu_after, (double)cap.v[US_CPU]);
}

/* ---- background re-offer ---------------------------------------------- */

/* Room left on a node while re-offering, in view units. */
typedef struct room {
    double gpu;       /* devices, fractional free capacity included */
    int64_t cpu, mem;
    int64_t gpus;     /* whole free devices */
} room;

/* Devices a request needs: background pods request whole GPUs. */
static int64_t whole_gpus(int64_t milli) { return (int64_t)ceil(gpus(milli)); }

static bool fits(const room *rm, us_res req) {
    return req.v[US_CPU] <= rm->cpu && req.v[US_MEM] <= rm->mem &&
           whole_gpus(req.v[US_GPU]) <= rm->gpus;
}

static void take(room *rm, us_res req) {
    rm->gpu = rm->gpu - gpus(req.v[US_GPU]);
    rm->cpu = rm->cpu - req.v[US_CPU];
    rm->mem = rm->mem - req.v[US_MEM];
    rm->gpus = rm->gpus - whole_gpus(req.v[US_GPU]);
}

static void set_room(room *rm, us_res free, int free_gpus) {
    rm->gpu = gpus(free.v[US_GPU]);
    rm->cpu = free.v[US_CPU];
    rm->mem = free.v[US_MEM];
    rm->gpus = free_gpus;
}

/* The placement score of a node once the pod is on it. */
static double fullness(const us_node *n, const room *rm, us_res req) {
    double cap_gpu = gpus(n->cap.v[US_GPU]);
    double gpu_after = (cap_gpu - rm->gpu) + gpus(req.v[US_GPU]);
    int64_t cpu_after = (n->cap.v[US_CPU] - rm->cpu) + req.v[US_CPU];
    return 1000 * fraction(gpu_after, cap_gpu) + fraction((double)cpu_after, (double)n->cap.v[US_CPU]);
}

/* A candidate node ranked for a group of pending pods. */
typedef struct rank {
    int node;
    size_t listed;    /* its place in the candidate list: ties go to the first */
    double score;
} rank;

static int by_rank(const void *a, const void *b) {
    const rank *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->listed < y->listed ? -1 : x->listed > y->listed;
}

/* Pending pods of one workload with the same candidate list are one group. */
static bool same_group(const us_bg_pod *a, const us_bg_pod *b) {
    return a->wl == b->wl && a->candidates == b->candidates && a->ncandidates == b->ncandidates;
}

/* Groups by workload name, then by where their first pod is listed (lead
 * below); pods of a group stay in listed (name) order. */
typedef struct group_ctx {
    const us_bg_input *in;
    const size_t *lead;
} group_ctx;

static int by_group(const void *a, const void *b, void *ctx) {
    const group_ctx *g = ctx;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(g->in->pending[i].wl->name, g->in->pending[j].wl->name);
    if (c) return c;
    if (g->lead[i] != g->lead[j]) return g->lead[i] < g->lead[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* lead[j]: the first pending pod of pod j's group, by a hash of (workload,
 * candidate list) -> first index.  0 or -1 when memory runs out. */
static int find_leads(const us_bg_input *in, size_t *lead) {
    size_t cap = 16;
    while (cap < 2 * in->npending) cap *= 2;
    size_t *slot = malloc(cap * sizeof *slot);  /* pod index + 1, 0 empty */
    if (!slot) return -1;
    memset(slot, 0, cap * sizeof *slot);
    for (size_t j = 0; j < in->npending; j++) {
        const us_bg_pod *bp = &in->pending[j];
        uintptr_t h = ((uintptr_t)bp->wl * 31u) ^ ((uintptr_t)bp->candidates >> 3) ^ bp->ncandidates;
        h ^= h >> 17;
        size_t s = (size_t)(h * 0x9e3779b97f4a7c15ULL) & (cap - 1);
        for (;; s = (s + 1) & (cap - 1)) {
            if (!slot[s]) {
                slot[s] = j + 1;
                lead[j] = j;
                break;
            }
            if (same_group(&in->pending[slot[s] - 1], bp)) {
                lead[j] = slot[s] - 1;
                break;
            }
        }
    }
    free(slot);
    return 0;
}

int us_builtin_reoffer(const us_bg_input *in, bool *keep, int *place, us_err *err) {
    int rc = -1;
    room *rooms = NULL;
    size_t *order = NULL, *lead = NULL;
    rank *ranked = NULL;

    for (size_t i = 0; i < in->nrunning; i++)
        if (in->running[i].node < 0 || (size_t)in->running[i].node >= in->nnodes) {
            us_err_set(err, US_EINVAL, "re-offer input: running pod \"%s\" is on no listed node",
                       in->running[i].pod->name);
            goto done;
        }
    for (size_t j = 0; j < in->npending; j++)
        for (size_t c = 0; c < in->pending[j].ncandidates &&
                           !(j > 0 && in->pending[j].candidates == in->pending[j - 1].candidates);
             c++)
            if (in->pending[j].candidates[c] < 0 ||
                (size_t)in->pending[j].candidates[c] >= in->nnodes) {
                us_err_set(err, US_EINVAL, "re-offer input: pending pod \"%s\" has a candidate "
                           "that is not a listed node", in->pending[j].pod->name);
                goto done;
            }

    rooms = malloc((in->nnodes + 1) * sizeof *rooms);
    if (!rooms) {
        us_err_nomem(err);
        goto done;
    }
    /* Running pods first, undisturbed wherever they still fit beside the
     * AI plan's end state: evicting a pod that could stay would only churn
     * the cluster. */
    for (size_t k = 0; k < in->nnodes; k++)
        set_room(&rooms[k], in->nodes[k].free_at_end, in->nodes[k].free_gpus_at_end);
    for (size_t i = 0; i < in->nrunning; i++) {
        room *rm = &rooms[in->running[i].node];
        us_res req = in->running[i].wl->request;
        keep[i] = fits(rm, req);
        if (keep[i]) take(rm, req);
    }
    /* Pending pods go in idle room only: what nobody holds now, kept or
     * evicted running pods included. */
    for (size_t k = 0; k < in->nnodes; k++)
        set_room(&rooms[k], in->nodes[k].idle, in->nodes[k].idle_gpus);

    /* Then pending pods, a group at a time: the pods of one workload that
     * may go to the same nodes (workloads in name order).  The candidates
     * with room are ranked once by how full they are with one more pod
     * (packing leaves whole nodes idle for the next AI gang; ties go to the
     * listed order) and filled in that order.  A node that takes a pod only
     * gets fuller, so it stays first while it has room: this is the same as
     * sending each pod to the fullest node with room, in linear time. */
    if (!(order = malloc((in->npending + 1) * sizeof *order)) ||
        !(lead = malloc((in->npending + 1) * sizeof *lead)) ||
        !(ranked = malloc((in->nnodes + 1) * sizeof *ranked)) || find_leads(in, lead) < 0) {
        us_err_nomem(err);
        goto done;
    }
    for (size_t j = 0; j < in->npending; j++) {
        order[j] = j;
        place[j] = -1;
    }
    group_ctx gctx = {in, lead};
    us_sort(order, in->npending, sizeof *order, by_group, &gctx);
    for (size_t g = 0; g < in->npending;) {
        const us_bg_pod *lead = &in->pending[order[g]];
        us_res req = lead->wl->request;
        size_t end = g + 1;
        while (end < in->npending && same_group(&in->pending[order[end]], lead)) end++;
        size_t nr = 0;
        for (size_t c = 0; c < lead->ncandidates; c++) {
            int k = lead->candidates[c];
            if (!fits(&rooms[k], req)) continue;
            ranked[nr++] = (rank){k, c, fullness(in->nodes[k].node, &rooms[k], req)};
        }
        qsort(ranked, nr, sizeof *ranked, by_rank);
        size_t at = 0;
        for (size_t j = g; j < end; j++) {
            while (at < nr && !fits(&rooms[ranked[at].node], req)) at++;
            if (at == nr) break;
            take(&rooms[ranked[at].node], req);
            place[order[j]] = ranked[at].node;
        }
        g = end;
    }
    rc = 0;
done:
    free(rooms);
    free(order);
    free(lead);
    free(ranked);
    return rc;
}
