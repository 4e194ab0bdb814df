/*
 * rollup.h — the readable account's short form: a cycle's decisions rolled
 * up per workload ("evicted 8 pods of gpu-burn from n2, n3 for train-1"),
 * the final pods per state and workload, and the legend of the actions.
 *
 * Rendering only: reads a cycle log and the final state, never changes
 * them.  Names are listed in natural order (sort.h: gpu-burn-2 before
 * gpu-burn-10).  Not thread-safe with respect to what it reads.
 */
#ifndef US_ROLLUP_H
#define US_ROLLUP_H

#include <stdio.h>

#include "events.h"
#include "state.h"

/* The workload a pod name belongs to in st (names are <workload>-<i>, or
 * <workload>-<node> for daemonsets), or -1. */
int us_rollup_workload_of(const us_state *st, const char *pod);

/* One line per (op, action, workload, evictor) of log, in the order each
 * first appears, each after lead.  0, or -1 when memory runs out. */
int us_rollup_decisions(FILE *f, const char *lead, const us_cycle_log *log, const us_state *st);

/* The pods not gone, per state, then per workload: how many, on which
 * nodes.  0, or -1 when memory runs out. */
int us_rollup_pods(FILE *f, const us_state *st);

/* Every pod not gone, per state, one a line, in natural order of names.
 * 0, or -1 when memory runs out. */
int us_rollup_pods_each(FILE *f, const us_state *st);

/* What the decisions' words and actions mean. */
void us_rollup_legend(FILE *f);

#endif
