/*
 * queueserve.c — serving jobs queue by queue in queue order (see gang.h,
 * us_gang_serve_in_order): a tournament over the queue tree.
 *
 * Each round the leaf queue first in queue order serves its next job.
 * Queue order is hierarchical (queueorder.c): two leaves are ordered by
 * their ancestors just below the deepest one they share, each judged with
 * the need of its leaf's next job.  So every queue has a representative,
 * the leaf first in order in its subtree (rep), and siblings are ordered
 * by their own figures with their representative's need: a key per
 * sibling, so each parent keeps its children with jobs in a binary heap.
 * The first leaf is the root heap's representative.
 *
 * Serving a job changes the allocation of the queues it placed into or
 * took from, and their ancestors (plan.c marks them, us_plan.qtouched),
 * and the served leaf's next job: only those queues move in their
 * parents' heaps, deepest first.  A round costs the touched paths times
 * the log of the siblings, where comparing every queue with jobs made a
 * cycle of many queues with jobs quadratic.
 */
#include "gang.h"

#include <stdlib.h>
#include <string.h>

#include "queueorder.h"
#include "sort.h"

typedef struct tour {
    us_plan *p;
    int nq;
    const int *first, *byq;  /* jobs per queue: byq[first[q] .. first[q + 1]) */
    int *next;               /* [nq] the queue's next job */
    int *rep;                /* [nq] its subtree's first leaf with a job, or -1 */
    us_res *need;            /* [nq] a leaf's next job's need */
    int *heap;               /* children with a rep, per parent: from hfirst[parent] */
    int *hfirst, *hn;        /* [nq + 1] (the roots' parent is nq) */
    int *hpos;               /* [nq] a queue's place in its parent's heap, or -1 */
} tour;

static int parent_of(const tour *t, int q) {
    int parent = t->p->st->queues[q].parent;
    return parent >= 0 ? parent : t->nq;
}

/* Is sibling x served before sibling y? */
static bool before(const tour *t, int x, int y) {
    int a = t->rep[x], b = t->rep[y];
    return us_qorder_compare(t->p, a, t->need[a], b, t->need[b]) < 0;
}

static void place(tour *t, int *h, int i, int q) {
    h[i] = q;
    t->hpos[q] = i;
}

static void sift_up(tour *t, int *h, int i) {
    int q = h[i];
    while (i > 0 && before(t, q, h[(i - 1) / 2])) {
        place(t, h, i, h[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    place(t, h, i, q);
}

static void sift_down(tour *t, int *h, int n, int i) {
    int q = h[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(t, h[c + 1], h[c])) c++;
        if (!before(t, h[c], q)) break;
        place(t, h, i, h[c]);
        i = c;
    }
    place(t, h, i, q);
}

/* q's rep changed (or appeared, or is gone): its place in its parent's heap. */
static void reseat(tour *t, int q) {
    int parent = parent_of(t, q), *h = t->heap + t->hfirst[parent], i = t->hpos[q];
    if (t->rep[q] < 0) {
        if (i < 0) return;
        int last = h[--t->hn[parent]];
        t->hpos[q] = -1;
        if (last == q) return;
        place(t, h, i, last);
        sift_up(t, h, i);
        sift_down(t, h, t->hn[parent], t->hpos[last]);
        return;
    }
    if (i < 0) {
        i = t->hn[parent]++;
        place(t, h, i, q);
    }
    sift_up(t, h, i);
    sift_down(t, h, t->hn[parent], t->hpos[q]);
}

/* q's rep from its own jobs (a leaf) or its heap's first child. */
static void refresh(tour *t, int q) {
    if (t->first[q] < t->first[q + 1]) {  /* workloads sit in leaf queues only */
        if (t->first[q] + t->next[q] < t->first[q + 1]) {
            t->rep[q] = q;
            t->need[q] = us_gang_need(t->p, t->byq[t->first[q] + t->next[q]]);
        } else {
            t->rep[q] = -1;
        }
    } else {
        t->rep[q] = t->hn[q] ? t->rep[t->heap[t->hfirst[q]]] : -1;
    }
}

#ifdef US_CHECK_INVARIANTS
/* Checking builds, after every round: each queue's rep is what its jobs
 * or its children make it now, found by a plain pass over the children
 * (siblings' keys order them totally: the first is unique), and every
 * heap holds exactly the children with a rep, each at its place.  A stale
 * key or a child left out shows here. */
static bool tour_holds(tour *t) {
    const us_queue *qs = t->p->st->queues;
    for (int q = 0; q < t->nq; q++) {
        int parent = parent_of(t, q), i = t->hpos[q];
        if ((t->rep[q] >= 0) != (i >= 0)) return false;
        if (i >= 0 && (i >= t->hn[parent] || t->heap[t->hfirst[parent] + i] != q)) return false;
        if (t->first[q] < t->first[q + 1]) {
            bool jobs = t->first[q] + t->next[q] < t->first[q + 1];
            if (t->rep[q] != (jobs ? q : -1)) return false;
            continue;
        }
        int best = -1;
        for (int c = 0; c < t->nq; c++)
            if (qs[c].parent == q && t->rep[c] >= 0 && (best < 0 || before(t, c, best))) best = c;
        if (t->rep[q] != (best >= 0 ? t->rep[best] : -1)) return false;
    }
    return true;
}
#endif

static int deeper_first(const void *a, const void *b, void *ctx) {
    const us_queue *qs = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    if (qs[x].depth != qs[y].depth) return qs[x].depth > qs[y].depth ? -1 : 1;
    return x < y ? -1 : x > y;
}

int us_gang_serve_in_order(us_plan *p, us_gang_serve_fn serve, us_err *err) {
    const us_state *st = p->st;
    size_t nw = st->nworkloads ? st->nworkloads : 1, nq = st->nqueues;
    tour t = {p, (int)nq, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    int *jobs = malloc(nw * sizeof *jobs), *first = calloc(nq + 2, sizeof *first);
    int *byq = malloc(nw * sizeof *byq), *order = malloc((nq + 1) * sizeof *order);
    t.next = calloc(nq + 1, sizeof *t.next);
    t.rep = malloc((nq + 1) * sizeof *t.rep);
    t.need = malloc((nq + 1) * sizeof *t.need);
    t.heap = malloc((nq + 1) * sizeof *t.heap);
    t.hfirst = calloc(nq + 2, sizeof *t.hfirst);
    t.hn = calloc(nq + 1, sizeof *t.hn);
    t.hpos = malloc((nq + 1) * sizeof *t.hpos);
    p->qtouched = calloc(nq + 1, sizeof *p->qtouched);
    p->qtouch = malloc((nq + 1) * sizeof *p->qtouch);
    p->nqtouch = 0;
    int rc = 0;
    if (!jobs || !first || !byq || !order || !t.next || !t.rep || !t.need || !t.heap || !t.hfirst ||
        !t.hn || !t.hpos || !p->qtouched || !p->qtouch) {
        rc = us_err_nomem(err);
        goto out;
    }
    size_t n = us_gang_jobs(p, jobs);  /* in job order: each queue's come out in it */
    for (size_t i = 0; i < n; i++) first[st->workloads[jobs[i]].queue + 1]++;
    for (size_t q = 0; q < nq; q++) first[q + 1] += first[q];
    for (size_t i = 0; i < n; i++) {
        int q = st->workloads[jobs[i]].queue;
        byq[first[q] + t.next[q]++] = jobs[i];
    }
    memset(t.next, 0, (nq + 1) * sizeof *t.next);
    t.first = first;
    t.byq = byq;
    /* each parent's heap segment, sized by its children */
    for (size_t q = 0; q < nq; q++) t.hfirst[parent_of(&t, (int)q) + 1]++;
    for (size_t q = 0; q <= nq; q++) t.hfirst[q + 1] += t.hfirst[q];
    /* reps bottom-up, each queue seated in its parent's heap */
    for (size_t q = 0; q < nq; q++) {
        order[q] = (int)q;
        t.hpos[q] = -1;
    }
    us_sort(order, nq, sizeof *order, deeper_first, (void *)st->queues);
    for (size_t k = 0; k < nq; k++) {
        refresh(&t, order[k]);
        reseat(&t, order[k]);
    }
    for (size_t served = 0; served < n && rc == 0; served++) {
        int root = (int)nq;
        if (!t.hn[root]) break;  /* cannot happen: a job is left, so its leaf has a rep */
        int pick = t.rep[t.heap[t.hfirst[root]]];
        p->nqtouch = 0;
        rc = serve(p, byq[first[pick] + t.next[pick]++], err);
        /* the leaf served, its ancestors, and every queue whose allocation
         * the job changed (and theirs: plan.c marks up to the roots) */
        for (int q = pick; q >= 0; q = st->queues[q].parent)
            if (!p->qtouched[q]) {
                p->qtouched[q] = true;
                p->qtouch[p->nqtouch++] = q;
            }
        us_sort(p->qtouch, p->nqtouch, sizeof *p->qtouch, deeper_first, (void *)st->queues);
        for (size_t k = 0; k < p->nqtouch; k++) {
            int q = p->qtouch[k];
            p->qtouched[q] = false;
            refresh(&t, q);
            reseat(&t, q);
        }
#ifdef US_CHECK_INVARIANTS
        if (rc == 0 && !tour_holds(&t))
            rc = us_err_set(err, US_EINVARIANT, "invariant \"queue-order\" broken: a queue's first "
                                                "leaf or its place among its siblings is stale");
#endif
    }
out:
    free(p->qtouched);
    free(p->qtouch);
    p->qtouched = NULL;
    p->qtouch = NULL;
    free(jobs);
    free(first);
    free(byq);
    free(order);
    free(t.next);
    free(t.rep);
    free(t.need);
    free(t.heap);
    free(t.hfirst);
    free(t.hn);
    free(t.hpos);
    return rc;
}
