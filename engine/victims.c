/*
 * victims.c — reclaim and preempt: one victim search, two rules for who may
 * be a victim.
 *
 * The search evicts candidate units (an elastic pod, or a whole gang when
 * taking a pod would leave it below min_member, counting the pods the
 * cycle placed so far) in order until the job's
 * gang fits, then drops every unit it did not need, so no pod is evicted
 * in vain.  All of it happens in the plan and is rolled back on failure.
 */
#include "victims.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gang.h"
#include "hashidx.h"
#include "queueorder.h"
#include "sort.h"

static double slack(double x) { return 1e-9 * fabs(x) + 1e-6; }

/* Is queue q over its fair share on a resource that req asks for? */
static bool over_fair(const us_plan *p, int q, us_res req) {
    for (int r = 0; r < US_NRES; r++) {
        double f = p->fair[q * US_NRES + r];
        if (req.v[r] > 0 && (double)p->alloc[q].v[r] > f + slack(f)) return true;
    }
    return false;
}

/* Is queue q over its quota on a resource that req asks for? */
static bool over_quota(const us_plan *p, int q, us_res req) {
    for (int r = 0; r < US_NRES; r++) {
        int64_t quota = us_queue_res(&p->st->queues[q], p->pool, r).quota;
        if (req.v[r] > 0 && quota != US_UNLIMITED && p->alloc[q].v[r] > quota) return true;
    }
    return false;
}

/* Is queue q, and every ancestor up to (not including) stop, over(q)? */
static bool path_over(const us_plan *p, int q, int stop, us_res req,
                      bool (*over)(const us_plan *, int, us_res)) {
    for (; q >= 0 && q != stop; q = p->st->queues[q].parent)
        if (!over(p, q, req)) return false;
    return true;
}

/* May a reclaimer in queue `to` whose job needs `need` take from queue
 * `from`?  Two rules, as KAI's reclaim strategies:
 *  - fair share: every queue from `from` up to, not including, the first
 *    ancestor they share is over its fair share (taking from a queue whose
 *    parent is under its own share would only move the unfairness up the
 *    tree);
 *  - deserved quota: the reclaimer's queue just below that ancestor stays
 *    within its quota with the job, and every queue on the victim's side is
 *    over its quota, even if within its fair share (a queue under quota is
 *    never left starved because the fair share is all handed out). */
static bool reclaimable(const us_plan *p, int from, int to, us_res need) {
    int lfrom, lto;
    us_qorder_level(p, from, to, &lfrom, &lto);
    int stop = p->st->queues[lfrom].parent;  /* -1 when they share no ancestor */
    if (path_over(p, from, stop, need, over_fair)) return true;
    return us_qorder_within_quota(p, lto, need) && path_over(p, from, stop, need, over_quota);
}

/* Would queue q alone stay within its fair share after adding req?  A
 * reclaimer may only take what it is entitled to; its ancestors are judged
 * once the victims are chosen (reclaimer_within_fair). */
static bool within_fair(const us_plan *p, int q, us_res req) {
    for (int r = 0; r < US_NRES; r++) {
        double f = p->fair[q * US_NRES + r];
        if (req.v[r] > 0 && (double)us_sat_add(p->alloc[q].v[r], req.v[r]) > f + slack(f)) return false;
    }
    return true;
}

/* With the job placed and its victims gone, is the reclaimer's queue and
 * every ancestor within its fair share on the resources the job asks for?
 * Victims inside an ancestor count against it: two siblings under a parent
 * at its fair share may reclaim from each other. */
static bool reclaimer_within_fair(const us_plan *p, int q, us_res req) {
    for (; q >= 0; q = p->st->queues[q].parent)
        if (over_fair(p, q, req)) return false;
    return true;
}

typedef struct search {
    us_plan *p;
    int job;
    us_action act;
    int need;        /* pods to place */
    us_res total;    /* what they request together */
} search;

/* May pod be taken for the job?  (Before the unit rule.) */
static bool candidate(const search *s, int pod) {
    const us_plan *p = s->p;
    if (!(p->flags[pod] & US_PF_HELD) || (p->flags[pod] & US_PF_VICTIM)) return false;
    if (!us_plan_is_ai(p, pod)) return false;
    const us_workload *v = &p->st->workloads[p->st->pods[pod].workload];
    const us_workload *j = &p->st->workloads[s->job];
    if (v->preemptibility == US_NON_PREEMPTIBLE) return false;
    if (s->act == US_ACT_RECLAIM)
        return v->queue != j->queue && reclaimable(p, v->queue, j->queue, s->total);
    return v->queue == j->queue && v->priority < j->priority;
}

/* The order victims give in: by queue, the one queue order would serve
 * last first (give_order); inside a queue (within_queue), lower priority
 * first, then the newest workload, then the newest pod.  The order inside
 * a queue never changes during a cycle, so each queue's pods are sorted
 * once, band by band (group_queue, sort_band); the queues, whose order
 * follows the plan, are sorted per search. */
static int give_order(const void *a, const void *b, void *ctx) {
    us_res none = {{0}};
    return -us_qorder_compare(ctx, *(const int *)a, none, *(const int *)b, none);
}

static int within_queue(const void *a, const void *b, void *ctx) {
    const us_state *st = ctx;
    const us_pod *x = &st->pods[*(const int *)a], *y = &st->pods[*(const int *)b];
    const us_workload *wx = &st->workloads[x->workload], *wy = &st->workloads[y->workload];
    if (wx->priority != wy->priority) return wx->priority < wy->priority ? -1 : 1;
    if (wx->created_at != wy->created_at) return wx->created_at > wy->created_at ? -1 : 1;
    if (x->seq != y->seq) return x->seq > y->seq ? -1 : 1;  /* newest first */
    return strcmp(x->name, y->name);
}

/* Queue q's victims grouped by priority, lowest first: a band per
 * priority (victim_band: each entry's band's end), each sorted in the
 * order they give only when a search first reaches it (sort_band).  A
 * search in a large queue that preempts only lower priorities sorts only
 * those; sorting a whole queue's victims for it was most of a quiet
 * cycle's victim search on a large cluster.  Priorities are few beside
 * pods, so the bands are a bucket pass: the distinct priorities are found
 * by hash and only they are sorted; inside a band the victims keep pod
 * order, as the sort by (priority, pod) this replaces left them.  0, or -1
 * when memory runs out. */
static bool prio_is(int id, const void *key, void *ctx) {
    return ((const int *)ctx)[id] == *(const int *)key;
}

static int by_value(const void *a, const void *b, void *ctx) {
    const int *v = ctx, x = v[*(const int *)a], y = v[*(const int *)b];
    return (x > y) - (x < y);
}

static int group_queue(us_plan *p, int q) {
    const us_state *st = p->st;
    int f = p->victim_first[q], e = p->victim_first[q + 1];
    size_t n = (size_t)(e - f) + 1;
    /* per victim its priority's id; per id its value, then its band's start */
    int *id = malloc(n * sizeof *id), *value = malloc(n * sizeof *value);
    int *order = malloc(n * sizeof *order), *start = malloc((n + 1) * sizeof *start);
    int *pods = malloc(n * sizeof *pods);
    us_hashidx seen = {0};
    int nd = 0, rc = -1;
    if (!id || !value || !order || !start || !pods) goto out;
    for (int x = f, last = -1; x < e; x++) {
        int prio = st->workloads[st->pods[p->victim_pods[x]].workload].priority;
        if (last < 0 || value[last] != prio) {  /* a workload's pods are mostly in a row */
            uint64_t h = us_hash_finish(us_hash_words(US_HASH_SEED, &prio, sizeof prio));
            last = us_hashidx_find(&seen, h, prio_is, &prio, value);
            if (last < 0) {
                if (us_hashidx_add(&seen, h, nd) < 0) goto out;
                value[nd] = prio;
                last = nd++;
            }
        }
        id[x - f] = last;
    }
    for (int d = 0; d < nd; d++) order[d] = d;
    us_sort(order, (size_t)nd, sizeof *order, by_value, value);
    /* counting sort by rank: start[d] first counts, then offsets */
    memset(start, 0, (size_t)(nd + 1) * sizeof *start);
    for (int x = f; x < e; x++) start[id[x - f]]++;
    for (int r = 0, at = f; r < nd; r++) {
        int d = order[r], cnt = start[d];
        start[d] = at;
        at += cnt;
        for (int k = start[d]; k < at; k++) p->victim_band[k] = at;
    }
    for (int x = f; x < e; x++) pods[start[id[x - f]]++ - f] = p->victim_pods[x];
    memcpy(p->victim_pods + f, pods, (size_t)(e - f) * sizeof *pods);
    memset(p->victim_done + f, 0, (size_t)(e - f) * sizeof *p->victim_done);
    p->victim_sorted[q] = true;
    rc = 0;
out:
    free(id);
    free(value);
    free(order);
    free(start);
    free(pods);
    us_hashidx_free(&seen);
    return rc;
}

/* The band starting at x in the order its victims give, once. */
static void sort_band(us_plan *p, int x) {
    if (p->victim_done[x]) return;
    int e = p->victim_band[x];
    us_sort(p->victim_pods + x, (size_t)(e - x), sizeof *p->victim_pods, within_queue, (void *)p->st);
    memset(p->victim_done + x, 1, (size_t)(e - x) * sizeof *p->victim_done);
}

/* Evict the unit headed by pod: the pod alone when its gang stays whole
 * without it (us_wl_gang_whole), else the whole gang (a semi-preemptible
 * gang is never broken up: only its elastic pods may go).  *taken = false
 * when the unit may not be taken. */
static int evict_unit(search *s, int pod, bool *taken) {
    us_plan *p = s->p;
    int vw = p->st->pods[pod].workload;
    const us_workload *v = &p->st->workloads[vw];
    *taken = false;
    const us_workload *j = &p->st->workloads[s->job];
    if (s->act == US_ACT_RECLAIM && !reclaimable(p, v->queue, j->queue, s->total))
        return 0;
    if (us_wl_gang_whole(v, p->held[vw] - 1)) {
        *taken = true;
        return us_plan_evict(p, pod, s->act, s->job);
    }
    if (v->preemptibility == US_SEMI_PREEMPTIBLE) return 0;
    /* The whole gang would go, but pods of it placed earlier in this cycle
     * are not victims (only pods held at the snapshot are): they would be
     * left running below min_member.  Such a gang is not broken. */
    if (p->wl_placed[vw] > 0) return 0;
    *taken = true;
    /* its held pods, in pod order (build_index: a preemptible workload's
     * held pods are all there) */
    for (int x = p->victim_wl_first[vw]; x < p->victim_wl_first[vw + 1]; x++) {
        int i = p->victim_wl_pods[x];
        if (!(p->flags[i] & US_PF_VICTIM) && us_plan_evict(p, i, s->act, s->job) < 0) return -1;
    }
    return 0;
}

/* Place the job's gang with the victims taken so far.  For reclaim, the
 * reclaimer's queue and its ancestors must then be within their fair share;
 * when they are not, the placement is undone (the victims stay) and *ok is
 * false. */
static int try_fit(search *s, bool *ok, us_err *err) {
    size_t mark = us_plan_mark(s->p);
    if (us_gang_try(s->p, s->job, s->need, s->act, ok, err) < 0) return -1;
    if (*ok && s->act == US_ACT_RECLAIM &&
        !reclaimer_within_fair(s->p, s->p->st->workloads[s->job].queue, s->total)) {
        us_plan_rollback(s->p, mark);
        *ok = false;
    }
    return 0;
}

/* Evict the units in use[] (skipping dropped ones) and try the gang. */
static int attempt(search *s, const int *units, const bool *drop, size_t n, bool *ok, us_err *err) {
    bool taken;
    for (size_t i = 0; i < n; i++)
        if (!drop[i] && !(s->p->flags[units[i]] & US_PF_VICTIM) &&
            evict_unit(s, units[i], &taken) < 0)
            return us_err_nomem(err);
    return try_fit(s, ok, err);
}

/* What a search may take, known before any pod is indexed: each queue's
 * lowest priority among the preemptible AI workloads holding pods
 * (victim_low, INT_MAX: none), from the plan's count of held pods per
 * workload.  Pods placed earlier in the cycle are counted there too, so
 * it may promise more than there is, never less: a search only ever takes
 * pods held at the snapshot.  A cycle whose pending jobs can take nothing
 * (one priority everywhere, no queue over its share) builds no index of
 * the held pods at all.  Also the search's list of queues.  0, or -1 when
 * memory runs out. */
static int queue_summary(us_plan *p) {
    const us_state *st = p->st;
    if (p->victim_low) return 0;
    p->victim_low = malloc((st->nqueues + 1) * sizeof *p->victim_low);
    p->victim_queues = malloc((st->nqueues + 1) * sizeof *p->victim_queues);
    if (!p->victim_low || !p->victim_queues) {
        free(p->victim_low);
        free(p->victim_queues);
        p->victim_low = p->victim_queues = NULL;
        return -1;
    }
    for (size_t q = 0; q < st->nqueues; q++) p->victim_low[q] = INT_MAX;
    for (size_t w = 0; w < st->nworkloads; w++) {
        const us_workload *wl = &st->workloads[w];
        if (p->held[w] > 0 && wl->queue >= 0 && wl->preemptibility != US_NON_PREEMPTIBLE &&
            wl->priority < p->victim_low[wl->queue])
            p->victim_low[wl->queue] = wl->priority;
    }
    return 0;
}

/* Index the pods that may ever be victims (AI pods held at the snapshot
 * whose workload is not non-preemptible) by queue, so a search looks only
 * at the queues that may give.  One pass over the pods' flags lists the
 * held ones (only AI pods are, US_PF_HELD) with their queue; a counting
 * sort of that list groups them by queue, and a search puts a queue's in
 * the order they give as it reaches them (group_queue).  A search's
 * scratch is sized here once: searches are many (one per pod an elastic
 * job preempts), and scratch sized by every pod of the cluster made each
 * one cost the cluster's size.
 * 0 or -1 (out of memory). */
static int build_index(us_plan *p) {
    const us_state *st = p->st;
    int *first = calloc(st->nqueues + 1, sizeof *first), *fill = calloc(st->nqueues + 1, sizeof *fill);
    int *pods = malloc((p->npods + 1) * sizeof *pods);
    int *held = malloc((p->npods + 1) * sizeof *held), *queue = malloc((p->npods + 1) * sizeof *queue);
    size_t n = 0;
    if (!first || !fill || !pods || !held || !queue) goto nomem;
    for (size_t i = 0; i < p->npods; i++) {
        if (!(p->flags[i] & US_PF_HELD)) continue;
        const us_workload *w = &st->workloads[st->pods[i].workload];
        if (w->preemptibility == US_NON_PREEMPTIBLE) continue;
        held[n] = (int)i;
        queue[n++] = w->queue;
        first[w->queue + 1]++;
    }
    for (size_t q = 0; q < st->nqueues; q++) first[q + 1] += first[q];
    for (size_t k = 0; k < n; k++) pods[first[queue[k]] + fill[queue[k]]++] = held[k];
    /* the same pods by workload, in pod order: a gang evicted whole
     * (evict_unit) takes its own, not a scan of every pod */
    p->victim_wl_first = calloc(st->nworkloads + 2, sizeof *p->victim_wl_first);
    p->victim_wl_pods = malloc((n + 1) * sizeof *p->victim_wl_pods);
    int *wfill = calloc(st->nworkloads + 1, sizeof *wfill);
    if (!p->victim_wl_first || !p->victim_wl_pods || !wfill) {
        free(wfill);
        goto nomem;
    }
    for (size_t k = 0; k < n; k++) p->victim_wl_first[st->pods[held[k]].workload + 1]++;
    for (size_t w = 0; w < st->nworkloads; w++) p->victim_wl_first[w + 1] += p->victim_wl_first[w];
    for (size_t k = 0; k < n; k++) {
        int w = st->pods[held[k]].workload;
        p->victim_wl_pods[p->victim_wl_first[w] + wfill[w]++] = held[k];
    }
    free(wfill);
    free(fill);
    free(held);
    free(queue);
    fill = held = queue = NULL;
    p->victim_first = first;
    p->victim_pods = pods;
    first = pods = NULL;
    p->victim_cands = malloc((n + 1) * sizeof *p->victim_cands);
    p->victim_units = malloc((n + 1) * sizeof *p->victim_units);
    p->victim_drop = malloc((n + 1) * sizeof *p->victim_drop);
    p->victim_skip = calloc(st->nqueues + 1, sizeof *p->victim_skip);
    p->victim_sorted = calloc(st->nqueues + 1, sizeof *p->victim_sorted);
    p->victim_band = malloc((n + 1) * sizeof *p->victim_band);
    p->victim_done = malloc((n + 1) * sizeof *p->victim_done);
    if (!p->victim_cands || !p->victim_units || !p->victim_drop || !p->victim_skip || !p->victim_sorted ||
        !p->victim_band || !p->victim_done)
        goto nomem;
    return 0;
nomem:
    free(first);
    free(fill);
    free(pods);
    free(held);
    free(queue);
    /* the index is whole or absent: the next search builds it again */
    free(p->victim_first);
    free(p->victim_pods);
    free(p->victim_cands);
    free(p->victim_units);
    free(p->victim_drop);
    free(p->victim_skip);
    free(p->victim_sorted);
    free(p->victim_band);
    free(p->victim_done);
    free(p->victim_wl_first);
    free(p->victim_wl_pods);
    p->victim_wl_first = p->victim_wl_pods = NULL;
    p->victim_first = p->victim_pods = p->victim_cands = p->victim_units = NULL;
    p->victim_skip = p->victim_band = NULL;
    p->victim_sorted = p->victim_done = NULL;
    p->victim_drop = NULL;
    return -1;
}

/* A quick no before a reclaim search: *may = false when some ancestor of
 * the reclaimer's queue would stay over its fair share with the job even
 * if every candidate inside it went.  0, or -1 when memory runs out. */
static int ancestors_may_fit(const search *s, const int *cands, size_t nc, bool *may) {
    const us_plan *p = s->p;
    const us_state *st = p->st;
    us_res *freed = calloc(st->nqueues + 1, sizeof *freed);
    if (!freed) return -1;
    for (size_t i = 0; i < nc; i++) {
        const us_workload *v = &st->workloads[st->pods[cands[i]].workload];
        for (int x = v->queue; x >= 0; x = st->queues[x].parent) freed[x] = us_res_add(freed[x], v->request);
    }
    *may = true;
    for (int a = st->queues[st->workloads[s->job].queue].parent; a >= 0 && *may; a = st->queues[a].parent)
        for (int r = 0; r < US_NRES; r++) {
            double f = p->fair[a * US_NRES + r];
            int64_t least = p->alloc[a].v[r] + s->total.v[r] - freed[a].v[r];
            if (s->total.v[r] > 0 && (double)least > f + slack(f)) *may = false;
        }
    free(freed);
    return 0;
}

/* Where a search is in its queues' lists of victims. */
typedef struct cand_walk {
    const int *qs;  /* the queues that may give, in the order they give */
    size_t nq, k;   /* k: the queue walked now */
    int x;          /* its entry walked last, or -1 before the first */
} cand_walk;

/* Append the next candidate in victim order to cands; false at the end. */
static bool next_candidate(const search *s, cand_walk *w, int *cands, size_t *nc) {
    const us_plan *p = s->p;
    const us_state *st = p->st;
    int prio = st->workloads[s->job].priority;
    for (; w->k < w->nq; w->k++, w->x = -1) {
        int q = w->qs[w->k];
        if (w->x < 0) w->x = p->victim_first[q] + p->victim_skip[q] - 1;
        while (++w->x < p->victim_first[q + 1]) {
            /* preempt takes lower priorities only, and their bands come
             * first; a band is sorted when first reached (at its start) */
            if (s->act == US_ACT_PREEMPT &&
                st->workloads[st->pods[p->victim_pods[w->x]].workload].priority >= prio)
                break;
            sort_band(s->p, w->x);
            int pod = p->victim_pods[w->x];
            if (candidate(s, pod)) {
                cands[(*nc)++] = pod;
                return true;
            }
        }
    }
    return false;
}

/* Find victims for need pods of the job; on success the plan holds the
 * evictions and placements.  *ok tells. */
static int search_victims(search *s, bool *ok, us_err *err) {
    us_plan *p = s->p;
    const us_state *st = p->st;
    *ok = false;
    if (queue_summary(p) < 0) return us_err_nomem(err);
    int *qs = p->victim_queues;
    size_t nc = 0, nu = 0, nq = 0;
    int rc = 0;
    /* only the queues that may give: the job's own (preempt: only lower
     * priorities, so a queue with none gives nothing), or others over
     * their share along the tree (reclaim); listed in the order they give,
     * so the candidates come out in victim order */
    const us_workload *j = &st->workloads[s->job];
    for (size_t q = 0; q < st->nqueues; q++) {
        if (p->victim_low[q] == INT_MAX) continue;
        if (s->act == US_ACT_PREEMPT ? (int)q != j->queue || p->victim_low[q] >= j->priority
                                     : ((int)q == j->queue || !reclaimable(p, (int)q, j->queue, s->total)))
            continue;
        qs[nq++] = (int)q;
    }
    /* nothing to take: no index needed (a cluster full of one priority
     * indexed every held pod and grouped its largest queue each cycle,
     * for nothing) */
    if (nq == 0) return 0;
    if (!p->victim_first && build_index(p) < 0) return us_err_nomem(err);
    int *cands = p->victim_cands, *units = p->victim_units;
    bool *drop = p->victim_drop;
    for (size_t k = 0; k < nq; k++) {
        int q = qs[k];
        /* reclaim groups its queues only once the ancestors may fit */
        if (s->act == US_ACT_PREEMPT && !p->victim_sorted[q] && group_queue(p, (int)q) < 0)
            return us_err_nomem(err);
        /* a victim before this search stays one for the whole plan (every
         * rollback is inside a search): the leading ones are passed over
         * for good, so a job that takes one pod per search does not walk
         * every earlier victim again (a queue never grouped has none) */
        int *skip = &p->victim_skip[q];
        while (p->victim_sorted[q] && p->victim_first[q] + *skip < p->victim_first[q + 1]) {
            int x = p->victim_first[q] + *skip;
            /* only through bands a walk sorted: victims elsewhere (whole
             * gangs) are passed over by the walk itself */
            if (!p->victim_done[x] || !(p->flags[p->victim_pods[x]] & US_PF_VICTIM)) break;
            ++*skip;
        }
    }
    us_sort(qs, nq, sizeof *qs, give_order, p);
    cand_walk walk = {qs, nq, 0, -1};
    if (s->act == US_ACT_RECLAIM) {
        /* reclaim judges the ancestors by every candidate first, in any
         * order: most searches end there, and need no queue grouped nor
         * band sorted */
        for (size_t k = 0; k < nq; k++)
            for (int x = p->victim_first[qs[k]] + p->victim_skip[qs[k]]; x < p->victim_first[qs[k] + 1]; x++)
                if (candidate(s, p->victim_pods[x])) cands[nc++] = p->victim_pods[x];
        if (nc == 0) return 0;
        bool may;
        if (ancestors_may_fit(s, cands, nc, &may) < 0) return us_err_nomem(err);
        if (!may) return 0;
        /* then all of them in victim order */
        for (size_t k = 0; k < nq; k++)
            if (!p->victim_sorted[qs[k]] && group_queue(p, qs[k]) < 0) return us_err_nomem(err);
        nc = 0;
        while (next_candidate(s, &walk, cands, &nc)) {
        }
    }

    /* preempt lists candidates as the search takes them: a job that
     * preempts one pod per search looks at the first few, not at all */
    size_t mark = us_plan_mark(p);
    for (size_t i = 0; !*ok && (i < nc || next_candidate(s, &walk, cands, &nc)); i++) {
        if (p->flags[cands[i]] & US_PF_VICTIM) continue;  /* went with its gang */
        bool taken;
        if (evict_unit(s, cands[i], &taken) < 0) return us_err_nomem(err);
        if (!taken) continue;
        units[nu++] = cands[i];
        if ((rc = try_fit(s, ok, err)) < 0) return rc;
    }
    us_plan_rollback(p, mark);
    if (!*ok) return 0;

    /* Drop every unit the gang fits without, earliest first. */
    memset(drop, 0, nu * sizeof *drop);
    for (size_t i = 0; i < nu; i++) {
        bool fits;
        drop[i] = true;
        if ((rc = attempt(s, units, drop, nu, &fits, err)) < 0) return rc;
        us_plan_rollback(p, mark);
        if (!fits) drop[i] = false;
    }
    rc = attempt(s, units, drop, nu, ok, err);
    if (rc == 0 && !*ok) us_plan_rollback(p, mark);  /* cannot happen: same set fitted */
    return rc;
}

/* Would a search for w meet exactly the situation a failed one met?  Same
 * queue, priority, preemptibility, request, pods needed, node selector and
 * tolerations (the memo is per action: reclaim and preempt each start it
 * empty, and it empties whenever the plan changes).  The failures are
 * found by hash: a cycle of many distinct jobs that all fail made a scan
 * of them quadratic. */
typedef struct failed_key {
    int job, need;
} failed_key;

static uint64_t failed_hash(const us_plan *p, int w, int need) {
    const us_workload *a = &p->st->workloads[w];
    int ints[4] = {need, a->queue, a->priority, (int)a->preemptibility};
    uint64_t h = us_hash_words(us_hash_words(US_HASH_SEED, ints, sizeof ints), &a->request, sizeof a->request);
    return us_hash_finish(us_hash_tolerations(us_hash_labels(h, &a->node_selector), &a->tolerations));
}

static bool failed_is(int id, const void *key, void *ctx) {
    const us_plan *p = ctx;
    const failed_key *k = key;
    const us_workload *a = &p->st->workloads[k->job];
    const us_workload *b = &p->st->workloads[p->failed_jobs[2 * id]];
    return p->failed_jobs[2 * id + 1] == k->need && a->queue == b->queue && a->priority == b->priority &&
           a->preemptibility == b->preemptibility && memcmp(&a->request, &b->request, sizeof a->request) == 0 &&
           us_labels_equal(&a->node_selector, &b->node_selector) &&
           us_tolerations_equal(&a->tolerations, &b->tolerations);
}

static bool failed_before(us_plan *p, int w, int need) {
    failed_key k = {w, need};
    return us_hashidx_find(&p->failed, failed_hash(p, w, need), failed_is, &k, p) >= 0;
}

static int note_failed(us_plan *p, int w, int need) {
    if (p->nfailed == p->cap_failed) {
        size_t ncap = p->cap_failed ? p->cap_failed * 2 : 16;
        int *x = realloc(p->failed_jobs, ncap * 2 * sizeof *x);
        if (!x) return -1;
        p->failed_jobs = x;
        p->cap_failed = ncap;
    }
    if (us_hashidx_add(&p->failed, failed_hash(p, w, need), (int)p->nfailed) < 0) return -1;
    p->failed_jobs[2 * p->nfailed] = w;
    p->failed_jobs[2 * p->nfailed++ + 1] = need;
    return 0;
}

/* The plan changed: earlier failures may succeed now. */
static void forget_failed(us_plan *p) {
    p->nfailed = 0;
    us_hashidx_clear(&p->failed);
}

static int serve(us_plan *p, int w, us_action act, us_err *err) {
    const us_workload *wl = &p->st->workloads[w];
    for (;;) {
        int missing = us_gang_missing(p, w);
        search s = {p, w, act, missing > 0 ? missing : 1, us_gang_need(p, w)};
        size_t pending;
        (void)us_gang_pending(p, w, &pending);
        if (pending < (size_t)s.need) return 0;
        if (act == US_ACT_RECLAIM && !within_fair(p, wl->queue, s.total)) return 0;
        if (failed_before(p, w, s.need)) return 0;
        bool ok;
        if (search_victims(&s, &ok, err) < 0) return -1;
        if (!ok) return note_failed(p, w, s.need) < 0 ? us_err_nomem(err) : 0;
        forget_failed(p);
    }
}

static int reclaim_job(us_plan *p, int w, us_err *err) { return serve(p, w, US_ACT_RECLAIM, err); }
static int preempt_job(us_plan *p, int w, us_err *err) { return serve(p, w, US_ACT_PREEMPT, err); }

int us_reclaim(us_plan *p, us_err *err) {
    forget_failed(p);
    return us_gang_serve_in_order(p, reclaim_job, err);
}

int us_preempt(us_plan *p, us_err *err) {
    forget_failed(p);  /* a job reclaim could not help may still preempt */
    return us_gang_serve_in_order(p, preempt_job, err);
}
