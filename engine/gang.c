/*
 * gang.c — jobs as the unit of AI scheduling: eligibility, the order queues
 * and jobs are served in, and all-or-nothing gang placement.
 */
#include "gang.h"

#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "sort.h"

bool us_gang_is_job(const us_plan *p, int w) { return p->wl_ai[w]; }

const int *us_gang_pending(const us_plan *p, int w, size_t *n) {
    size_t all;
    const int *pods = us_pv_list_of(p->view, us_pv_pending_list(p->view, (size_t)w), &all);
    *n = all - (size_t)p->wl_placed[w];
    return pods + p->wl_placed[w];
}

int us_gang_missing(const us_plan *p, int w) {
    const us_workload *wl = &p->st->workloads[w];
    /* one that holds pods needs min_member less those and the succeeded */
    int m = us_wl_gang_start(wl) - p->held[w];
    return m > 0 ? m : 0;
}

us_res us_gang_need(const us_plan *p, int w) {
    int missing = us_gang_missing(p, w), count = missing > 0 ? missing : 1;
    us_res need = p->st->workloads[w].request;
    for (int r = 0; r < US_NRES; r++) need.v[r] *= count;
    return need;
}

static int job_order(const void *a, const void *b, void *ctx) {
    const us_state *st = ctx;
    const us_workload *x = &st->workloads[*(const int *)a];
    const us_workload *y = &st->workloads[*(const int *)b];
    if (x->priority != y->priority) return x->priority > y->priority ? -1 : 1;
    if (x->created_at != y->created_at) return x->created_at < y->created_at ? -1 : 1;
    return strcmp(x->name, y->name);
}

size_t us_gang_jobs(const us_plan *p, int *jobs) {
    const us_state *st = p->st;
    size_t n = 0;
    for (size_t w = 0; w < st->nworkloads; w++) {
        size_t pending;
        (void)us_gang_pending(p, (int)w, &pending);
        if (pending > 0 && us_gang_is_job(p, (int)w)) {
            if (p->wl_terminating[w] > 0) {
                /* its own pods still terminate: it waits for them (see us_gang_try) */
                p->st->workloads[w].why_pending = US_WHY_OWN_PODS;
                continue;
            }
            jobs[n++] = (int)w;
        }
    }
    us_sort(jobs, n, sizeof *jobs, job_order, (void *)st);
    return n;
}

int us_gang_try(us_plan *p, int w, int count, us_action act, bool *ok, us_err *err) {
    *ok = false;
    const us_workload *wl = &p->st->workloads[w];
    /* A job whose own pods still terminate (a broken gang, an evicted pod)
     * waits for them: a pod pipelined behind a member of its own gang, or
     * behind its own earlier incarnation, would wait for itself. */
    if (p->wl_terminating[w] > 0) {
        p->st->workloads[w].why_pending = US_WHY_OWN_PODS;
        return 0;
    }
    size_t n;
    const int *pods = us_gang_pending(p, w, &n);
    size_t mark = us_plan_mark(p);
    int rc = 0, placed = 0;
    bool np = wl->preemptibility != US_PREEMPTIBLE;
    us_why why = US_WHY_NONE;
    int blocker = -1;
    for (size_t i = 0; i < n && placed < count; i++) {
        if ((why = us_plan_queue_admits(p, wl->queue, wl->request, np, &blocker)) != US_WHY_NONE) break;
        int node;
        if ((rc = us_place_choose(p, pods[i], &node, err)) < 0) break;
        if (node < 0) {
            why = US_WHY_ROOM;
            break;
        }
        if ((rc = us_plan_place(p, pods[i], node, act)) < 0) {
            us_err_nomem(err);
            break;
        }
        placed++;
    }
    if (rc == 0 && placed == count && count > 0) {
        *ok = true;
    } else {
        us_plan_rollback(p, mark);
        /* the pending report says why (the last attempt's reason stands) */
        if (why != US_WHY_NONE) {
            p->st->workloads[w].why_pending = why;
            p->st->workloads[w].why_queue = blocker;
        }
    }
    return rc;
}
