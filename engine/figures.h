/*
 * figures.h — the harvest figures (harvest.h) and per-cycle queue figures
 * as the outputs show them: pieces of the JSON document, the readable
 * summary's tables, and CSV files for spreadsheets.
 *
 * Rendering only: reads a finished simulation, never changes it, never
 * reads a clock.  Every output rounds a figure the same way (us_fig_ratio),
 * so the JSON, the text, the CSV and the HTML report print equal numbers.
 * Not thread-safe with respect to the objects it reads.
 */
#ifndef US_FIGURES_H
#define US_FIGURES_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "sim.h"

/* The harvest ratio as every output shows it: 4 decimals; < 0 (no idle
 * capacity to harvest) stays negative and is shown as null / "-". */
double us_fig_ratio(double r);

/* A figure (GPU-seconds, seconds, devices) as every output prints it: up
 * to 3 decimals, no trailing zeros ("640", "0.5"); buf returned. */
const char *us_fig_num(char *buf, size_t n, double v);

/* The harvest ratio as text: 4 decimals at most, "-" when there is none. */
const char *us_fig_ratio_text(char *buf, size_t n, double r);

/* Cycle i's pools: [{"pool", "gpus", "ai", "background", "idle",
 * "pending_ai", "pending_background", "background_evictions",
 * "background_evictions_needed"}].  NULL when memory runs out. */
cJSON *us_fig_cycle_pools(const us_sim_result *res, size_t i);

/* Cycle i's queues: [{"name", "allocated", "fair_share", "quota"}], each a
 * resource vector in output units (quota -1: unlimited). */
cJSON *us_fig_cycle_queues(const us_sim_result *res, const us_state *st, size_t i);

/* The run's figures: overall, then "pools": [...] each with "pool". */
cJSON *us_fig_summary(const us_sim_result *res);

/* The readable summary's harvest and disturbance tables. */
void us_fig_text(FILE *f, const us_sim_result *res);

/* Writes DIR/pools.csv, DIR/queues.csv, DIR/nodes.csv and DIR/summary.csv
 * (creating DIR when missing).  0, or -1 with err naming the file. */
int us_fig_csv(const char *dir, const us_sim_result *res, const us_state *st, us_err *err);

#endif
