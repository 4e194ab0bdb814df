/*
 * commit.h — turning a finished plan into state changes, decisions and
 * events (see commit.c).
 */
#ifndef US_COMMIT_H
#define US_COMMIT_H

#include "plan.h"
#include "reoffer.h"

int us_commit(us_plan *p, const us_reoffer *bg, us_cycle_counts *counts, us_err *err);

/* A gang that broke (a node left, a bind failed, a pod was lost or
 * min_member was raised) holds fewer than min_member pods: every pod it
 * still runs or has pipelined is stopped, each an evict decision (action
 * stalegangeviction, the evictor the gang itself), with one Evict event
 * per gang, and the gang goes back to pending whole.  Start of a cycle,
 * before pipelined pods bind. */
int us_commit_broken_gangs(us_state *st, double now, us_cycle_log *log, us_err *err);

/* Bind pipelined pods whose resources are now free (start of a cycle). */
int us_commit_promote(us_state *st, us_cycle_log *log, us_err *err);

#endif
