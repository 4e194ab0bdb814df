/*
 * diff.h — what one policy version decides differently from another on the
 * same scenario: the decisions that differ, cycle by cycle, and the change
 * in the summary figures (evictions by action, AI pods pending, policy
 * warnings, fair share per queue at the end).
 *
 * `understory diff` runs the scenario once per policy directory and
 * compares; `understory simulate --watch` (watch.c) compares each run with
 * the one before.  A us_diff_run owns everything it holds.  Comparing and
 * rendering only read runs; the same two runs always render to the same
 * bytes.  Not thread-safe.
 */
#ifndef US_DIFF_H
#define US_DIFF_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "sim.h"

/* One side of a comparison: a finished run and the figures read from it. */
typedef struct us_diff_run {
    char *dir;                      /* policy directory; NULL: built-in policies */
    char id[US_SIM_POLICY_ID];      /* policy id at the start, or "builtin" */
    us_sim_result res;
    char **queues;                  /* queue names of the final state */
    us_res *fair;                   /* [nqueues] fair share after the last cycle,
                                       rounded to engine units */
    size_t nqueues;
    int evictions[US_ACT_NONE];     /* evict decisions by action */
    int decisions;                  /* decisions of all cycles */
    int policy_warnings;            /* PolicyFailed + PolicyRejected events */
} us_diff_run;

/* Load scenario (a file), drop its timeline reloads (a diff compares the
 * policies it is given), load dir (NULL: the built-in policies) and run.
 * 0, or -1 with err; err->code is US_EINVAL or US_EIO when the scenario
 * does not load, US_EPOLICY or US_EIO when the policies do not, so that
 * callers can tell a bad input from a failed run. */
int us_diff_run_file(us_diff_run *run, const char *scenario, const char *dir,
                     const us_sim_opts *o, us_err *err);

/* Take a finished run: res is moved into run (and left empty), final is
 * the state it ended in, dir the policy directory (copied; may be NULL).
 * 0, or -1 (out of memory; res is freed). */
int us_diff_capture(us_diff_run *run, us_sim_result *res, const us_state *final,
                    const char *dir, us_err *err);

void us_diff_run_free(us_diff_run *run);

/* How many cycles differ in their decisions (0: the runs decided the
 * same), or -1 when memory runs out. */
int us_diff_count(const us_diff_run *a, const us_diff_run *b);

/* The cycles whose decisions differ ("- " only in a, "+ " only in b) and
 * a summary table whose columns are headed name_a, name_b, "change".
 * 0, or -1 with err. */
int us_diff_text(FILE *f, const us_diff_run *a, const us_diff_run *b, const char *name_a,
                 const char *name_b, us_err *err);

/* The same as a document: {"scenario", "from": {"dir", "id"}, "to": {...},
 * "cycles": [{"cycle", "time", "only_from": [decision], "only_to": [...]}]
 * (cycles that differ only), "summary": {"from", "to", "change"}}, each
 * summary {"cycles", "decisions", "evictions": {"allocate", "reclaim",
 * "preempt", "backgroundpods"}, "ai_pods_pending", "policy_warnings",
 * "fair_share": {queue: {"gpu", "cpu", "memory"}}} in output units.  NULL
 * when memory runs out. */
cJSON *us_diff_document(const us_diff_run *a, const us_diff_run *b);

#endif
