/*
 * commit.h — turning a finished plan into state changes, decisions and
 * events (see commit.c).
 */
#ifndef US_COMMIT_H
#define US_COMMIT_H

#include "plan.h"
#include "reoffer.h"

int us_commit(us_plan *p, const us_reoffer *bg, us_cycle_counts *counts, us_err *err);

/* The start of a cycle, in one pass over the pods (a second only when a
 * gang broke):
 * - a gang that broke (a node left, a bind failed, a pod was lost or
 *   min_member was raised) holds fewer than min_member pods: every pod it
 *   still runs or has pipelined is stopped, each an evict decision (action
 *   stalegangeviction, the evictor the gang itself), with one Evict event
 *   per gang, and the gang goes back to pending whole;
 * - then pipelined pods whose resources are now free bind.
 * Call after us_life_expire.  0, or -1 when memory runs out. */
int us_commit_cycle_start(us_state *st, double now, const us_cycle_opts *o, us_cycle_log *log,
                          us_err *err);

#endif
