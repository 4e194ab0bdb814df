/*
 * gang.c — jobs as the unit of AI scheduling: eligibility, the order queues
 * and jobs are served in, and all-or-nothing gang placement.
 */
#include "gang.h"

#include <stdlib.h>
#include <string.h>

#include "placement.h"

bool us_gang_is_job(const us_plan *p, int w) {
    const us_workload *wl = &p->st->workloads[w];
    return !wl->background && !wl->blocked && wl->state == US_WL_ACTIVE &&
           strcmp(wl->pool, p->pool) == 0;
}

size_t us_gang_pending(const us_plan *p, int w, int *pods) {
    size_t n = 0;
    /* pods are appended as they are created, so array order is creation order */
    for (size_t i = 0; i < p->npods; i++) {
        const us_pod *pd = &p->st->pods[i];
        if (pd->workload == w && pd->state == US_POD_PENDING && !pd->gone &&
            !(p->flags[i] & US_PF_NEW))
            pods[n++] = (int)i;
    }
    return n;
}

int us_gang_missing(const us_plan *p, int w) {
    int m = p->st->workloads[w].min_member - p->held[w];
    return m > 0 ? m : 0;
}

static const us_state *cmp_st;
static int job_order(const void *a, const void *b) {
    const us_workload *x = &cmp_st->workloads[*(const int *)a];
    const us_workload *y = &cmp_st->workloads[*(const int *)b];
    if (x->priority != y->priority) return x->priority > y->priority ? -1 : 1;
    if (x->submit_at != y->submit_at) return x->submit_at < y->submit_at ? -1 : 1;
    return strcmp(x->name, y->name);
}

size_t us_gang_jobs(const us_plan *p, int *jobs) {
    const us_state *st = p->st;
    bool *has = calloc(st->nworkloads ? st->nworkloads : 1, sizeof *has);
    if (!has) return 0;
    for (size_t i = 0; i < p->npods; i++)
        if (st->pods[i].state == US_POD_PENDING && !st->pods[i].gone && !(p->flags[i] & US_PF_NEW))
            has[st->pods[i].workload] = true;
    size_t n = 0;
    for (size_t w = 0; w < st->nworkloads; w++)
        if (has[w] && us_gang_is_job(p, (int)w)) jobs[n++] = (int)w;
    free(has);
    cmp_st = st;
    qsort(jobs, n, sizeof *jobs, job_order);
    return n;
}

int us_gang_try(us_plan *p, int w, int count, us_action act, bool *ok, us_err *err) {
    *ok = false;
    const us_workload *wl = &p->st->workloads[w];
    int *pods = malloc((p->npods ? p->npods : 1) * sizeof *pods);
    if (!pods) return us_err_nomem(err);
    size_t n = us_gang_pending(p, w, pods);
    size_t mark = us_plan_mark(p);
    int rc = 0, placed = 0;
    bool np = wl->preemptibility != US_PREEMPTIBLE;
    for (size_t i = 0; i < n && placed < count; i++) {
        if (!us_plan_queue_admits(p, wl->queue, wl->request, np)) break;
        int node;
        if ((rc = us_place_choose(p, pods[i], &node, err)) < 0) break;
        if (node < 0) break;
        if ((rc = us_plan_place(p, pods[i], node, act)) < 0) {
            us_err_nomem(err);
            break;
        }
        placed++;
    }
    if (rc == 0 && placed == count && count > 0) *ok = true;
    else us_plan_rollback(p, mark);
    free(pods);
    return rc;
}

int us_gang_serve_in_order(us_plan *p, us_gang_serve_fn serve, us_err *err) {
    const us_state *st = p->st;
    int *jobs = malloc((st->nworkloads ? st->nworkloads : 1) * sizeof *jobs);
    bool *done = calloc(st->nworkloads ? st->nworkloads : 1, sizeof *done);
    int rc = 0;
    if (!jobs || !done) {
        rc = us_err_nomem(err);
        goto out;
    }
    size_t n = us_gang_jobs(p, jobs);
    /* Each round: the neediest queue serves its next job.  Ratios change as
     * jobs are placed, so the choice is made again every round. */
    for (size_t served = 0; served < n; served++) {
        int pick = -1;
        double best = 0;
        for (size_t i = 0; i < n; i++) {
            if (done[i]) continue;
            int q = st->workloads[jobs[i]].queue;
            /* only the first unserved job of each queue competes */
            bool first = true;
            for (size_t k = 0; k < i && first; k++)
                if (!done[k] && st->workloads[jobs[k]].queue == q) first = false;
            if (!first) continue;
            double ratio = us_plan_queue_ratio(p, q);
            if (pick < 0 || ratio < best ||
                (ratio == best && strcmp(st->queues[q].name,
                                         st->queues[st->workloads[jobs[pick]].queue].name) < 0)) {
                pick = (int)i;
                best = ratio;
            }
        }
        done[pick] = true;
        if ((rc = serve(p, jobs[pick], err)) < 0) break;
    }
out:
    free(jobs);
    free(done);
    return rc;
}
