/*
 * commit.h — turning a finished plan into state changes, decisions and
 * events (see commit.c).
 */
#ifndef US_COMMIT_H
#define US_COMMIT_H

#include "plan.h"
#include "reoffer.h"

int us_commit(us_plan *p, const us_reoffer *bg, us_cycle_counts *counts, us_err *err);

/* Bind pipelined pods whose resources are now free (start of a cycle). */
int us_commit_promote(us_state *st, us_cycle_log *log, us_err *err);

#endif
