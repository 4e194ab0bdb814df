/*
 * victims.h — the reclaim and preempt actions: place pending AI jobs by
 * evicting preemptible AI pods.  Reclaim takes from other queues that are
 * over their fair share, for a queue that stays within its own; preempt
 * takes, inside one queue, from strictly lower-priority workloads.
 * Background pods are never victims here and never reclaimers: they are
 * not in the AI view at all.
 */
#ifndef US_VICTIMS_H
#define US_VICTIMS_H

#include "plan.h"

int us_reclaim(us_plan *p, us_err *err);
int us_preempt(us_plan *p, us_err *err);

#endif
