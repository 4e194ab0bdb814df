/*
 * gang.h — jobs (workloads) as the unit of AI scheduling: which jobs a pool
 * has to schedule, in what order, and placing a gang all or nothing.
 */
#ifndef US_GANG_H
#define US_GANG_H

#include "plan.h"

/* An AI workload this plan schedules (active, not background, not blocked,
 * in the plan's pool). */
bool us_gang_is_job(const us_plan *p, int w);

/* Its pending pods not yet placed by the plan, in creation order: the end
 * of its run of wl_pending, *n of them.  The plan places a job's pending
 * pods only in that order (us_gang_try) and undoes the latest first, so
 * the placed ones are always the run's first (wl_placed): finding the
 * rest costs nothing, where a scan made an elastic job that preempts one
 * pod at a time quadratic. */
const int *us_gang_pending(const us_plan *p, int w, size_t *n);

/* Jobs of the pool with pending pods, in the order a queue serves them:
 * priority (high first), then creation time, then name.  A job whose own
 * pods still terminate is left out: it waits for them.  jobs must hold
 * st->nworkloads entries; returns the count. */
size_t us_gang_jobs(const us_plan *p, int *jobs);

/* Pods w still needs before its gang counts as running (>= 0). */
int us_gang_missing(const us_plan *p, int w);

/* What w's next placement needs: its missing pods, or one elastic pod. */
us_res us_gang_need(const us_plan *p, int w);

/* Place count pending pods of w, all or nothing (queue limit and in-quota
 * rules per pod; never while pods of w still terminate).  *ok tells whether they were placed; on failure the plan
 * is as before.  0, or -1 when memory runs out. */
int us_gang_try(us_plan *p, int w, int count, us_action act, bool *ok, us_err *err);

/* Serve jobs queue by queue in queue order (queueorder.h), each job once,
 * calling serve for each.  Used by allocate, reclaim and preempt alike.
 * In queueserve.c: a tournament over the queue tree. */
typedef int (*us_gang_serve_fn)(us_plan *p, int w, us_err *err);
int us_gang_serve_in_order(us_plan *p, us_gang_serve_fn serve, us_err *err);

#endif
