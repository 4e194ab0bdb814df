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
#include "strmap.h"

/* The workloads and nodes of a state by name, to tell which workload a
 * decision's pod belongs to; built once for every cycle's rollup (it
 * borrows the state's names: free it before the state). */
typedef struct us_rollup_names us_rollup_names;
us_rollup_names *us_rollup_names_new(const us_state *st);  /* NULL: out of memory */
void us_rollup_names_free(us_rollup_names *ix);

/* The workload a pod name belongs to (names are <workload>-<i>, or
 * <workload>-<node> for daemonsets; the longest such workload name, the
 * first of equal ones), or -1. */
int us_rollup_workload_of(const us_rollup_names *ix, const char *pod);

/* One line per (op, action, workload, evictor) of log, in the order each
 * first appears, each after lead.  0, or -1 when memory runs out. */
int us_rollup_decisions(FILE *f, const char *lead, const us_cycle_log *log, const us_rollup_names *ix);

/* The pods not gone, per state, then per workload: how many, on which
 * nodes.  0, or -1 when memory runs out. */
int us_rollup_pods(FILE *f, const us_state *st);

/* Every pod not gone, per state, one a line, in natural order of names.
 * 0, or -1 when memory runs out. */
int us_rollup_pods_each(FILE *f, const us_state *st);

/* What the decisions' words and actions mean. */
void us_rollup_legend(FILE *f);

#endif
