/*
 * report.h — a finished simulation as one self-contained HTML page: inline
 * SVG charts, inline CSS, no script and nothing fetched, so it reads the
 * same in any browser, offline, or as a mail attachment.
 *
 * The page shows the run's figures (the same numbers, rounded the same
 * way, as the JSON summary: figures.h), and per pool GPU use over time
 * stacked as AI / background / idle with eviction markers by action,
 * pending pods over time, each queue's GPU allocation against its fair
 * share, and a heat strip of every node's GPUs over time.
 *
 * Rendering only: reads the result and the final state, never a clock.
 * Not thread-safe with respect to what it reads.
 */
#ifndef US_REPORT_H
#define US_REPORT_H

#include <stdio.h>

#include "error.h"
#include "sim.h"
#include "state.h"

/* Write the page to f.  0, or -1 with err filled. */
int us_report_html(FILE *f, const us_sim_result *res, const us_state *final, us_err *err);

/* Write the page to the file at path (replaced).  0, or -1 with err
 * naming the file. */
int us_report_write(const char *path, const us_sim_result *res, const us_state *final, us_err *err);

#endif
