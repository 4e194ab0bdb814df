/*
 * queueorder.c — the order of queues, KAI's criterion by criterion.  Two
 * leaf queues are compared through the two queues that decide between them
 * (their ancestors just below the deepest one they share), each with the
 * resources its next job needs added:
 *
 *   1. not over its fair share, before over it;
 *   2. within its quota with the job, before beyond it;
 *   3. higher queue priority;
 *   4. not starting to hold a resource it has no fair share of, before one
 *      that would;
 *   5. smaller dominant share (allocated / fair share) with the job;
 *   6. the same without the job;
 *   7. created earlier;
 *   8. name.
 *
 * Allocate, reclaim and preempt serve queues in this order; reclaim takes
 * victims in its reverse (without jobs), so the queue that would be served
 * last gives first.  Reads the plan; never changes it.
 */
#include "queueorder.h"

#include <math.h>
#include <string.h>

/* Room for rounding in a policy's arithmetic (the same as victims.c). */
static double slack(double x) { return 1e-9 * fabs(x) + 1e-6; }

/* A resource held without a fair share: far over, but still ordered by
 * how much is held. */
#define NO_SHARE_WEIGHT 1e9

static double fair_of(const us_plan *p, int q, int r) { return p->fair[q * US_NRES + r]; }

bool us_qorder_over_fair(const us_plan *p, int q) {
    for (int r = 0; r < US_NRES; r++) {
        double f = fair_of(p, q, r);
        if ((double)p->alloc[q].v[r] > f + slack(f)) return true;
    }
    return false;
}

bool us_qorder_within_quota(const us_plan *p, int q, us_res extra) {
    for (int r = 0; r < US_NRES; r++) {
        int64_t quota = us_queue_res(&p->st->queues[q], p->pool, r).quota;
        if (quota != US_UNLIMITED && p->alloc[q].v[r] + extra.v[r] > quota) return false;
    }
    return true;
}

/* Would q hold, with extra, some resource it has no fair share of? */
static bool zero_share(const us_plan *p, int q, us_res extra) {
    for (int r = 0; r < US_NRES; r++)
        if (fair_of(p, q, r) <= 0 && p->alloc[q].v[r] + extra.v[r] > 0) return true;
    return false;
}

double us_qorder_share(const us_plan *p, int q, us_res extra) {
    double worst = 0;
    for (int r = 0; r < US_NRES; r++) {
        double a = (double)(p->alloc[q].v[r] + extra.v[r]), f = fair_of(p, q, r);
        if (a <= 0) continue;
        double share = f > 0 ? a / f : a * NO_SHARE_WEIGHT;
        if (share > worst) worst = share;
    }
    return worst;
}

void us_qorder_level(const us_plan *p, int a, int b, int *la, int *lb) {
    const us_queue *qs = p->st->queues;
    /* climb the deeper one to the other's depth, then both together */
    while (qs[a].depth > qs[b].depth) a = qs[a].parent;
    while (qs[b].depth > qs[a].depth) b = qs[b].parent;
    while (qs[a].parent != qs[b].parent) {
        a = qs[a].parent;
        b = qs[b].parent;
    }
    *la = a;
    *lb = b;
}

/* -1 when only x holds, 1 when only y does, else 0. */
static int first_if(bool x, bool y) { return x == y ? 0 : x ? -1 : 1; }

static int smaller(double x, double y) { return x < y ? -1 : x > y ? 1 : 0; }

int us_qorder_compare(const us_plan *p, int a, us_res ea, int b, us_res eb) {
    const us_queue *qs = p->st->queues;
    int c;
    us_qorder_level(p, a, b, &a, &b);
    if ((c = first_if(!us_qorder_over_fair(p, a), !us_qorder_over_fair(p, b)))) return c;
    if ((c = first_if(us_qorder_within_quota(p, a, ea), us_qorder_within_quota(p, b, eb)))) return c;
    if (qs[a].priority != qs[b].priority) return qs[a].priority > qs[b].priority ? -1 : 1;
    if ((c = first_if(!zero_share(p, a, ea), !zero_share(p, b, eb)))) return c;
    if ((c = smaller(us_qorder_share(p, a, ea), us_qorder_share(p, b, eb)))) return c;
    us_res none = {{0}};
    if ((c = smaller(us_qorder_share(p, a, none), us_qorder_share(p, b, none)))) return c;
    if ((c = smaller(qs[a].created_at, qs[b].created_at))) return c;
    return strcmp(qs[a].name, qs[b].name);
}
