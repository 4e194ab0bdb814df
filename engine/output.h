/*
 * output.h — rendering a finished simulation: the JSON document of
 * docs/scenario.md ("The output document") and a readable per-cycle account for
 * humans.
 *
 * Rendering only reads the result and the final state; it never changes
 * them and never consults a clock, so the same run renders to the same
 * bytes.  Not thread-safe with respect to the objects it reads.
 */
#ifndef US_OUTPUT_H
#define US_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "sim.h"
#include "state.h"

/* The engine's version, reported by `understory --version` and by the Lua
 * module as `understory.version`: the public header's, its one source. */
#include "understory.h"
#define US_VERSION UNDERSTORY_VERSION_STRING

/* A resource vector in output units: {"gpu": devices (a number),
 * "cpu": millicores, "memory": bytes}.  Integers whose magnitude reaches
 * 1e15 are stored as raw JSON text (cJSON_Raw, valuedouble also set) so that
 * they still print as exact integers.  NULL on allocation failure. */
cJSON *us_output_res(us_res r);

/* Add item under key of obj / at the end of arr; each takes item even on
 * failure (it is then deleted), so a NULL from a cJSON constructor can be
 * passed straight in.  0, or -1 when memory runs out. */
int us_output_put(cJSON *obj, const char *key, cJSON *item);
int us_output_push(cJSON *arr, cJSON *item);

/* One decision as the document lists it: {"op", "pod", "node",
 * "waits_for" (pipeline), "action", "evictor" (evict)}.  NULL on allocation
 * failure. */
cJSON *us_output_decision(const us_decision *d);

/* One decision as the text account prints it, on one line after lead:
 * "bind      train-1-0  -> n4  (allocate)"; the pod name padded to width. */
void us_output_decision_text(FILE *f, const char *lead, const us_decision *d, int width);

/* The whole output document (see docs/scenario.md).  final is the state after the
 * run (the scenario's state once us_sim_run returned).  Every cycle is
 * listed, including quiet ones, each with the id of the policy in force
 * ("policy"; "builtin" for the C policies), and the top level names the
 * policy in force at the end; every pod not marked gone, in state order.
 * The caller frees it with cJSON_Delete.  NULL on allocation failure. */
cJSON *us_output_document(const us_sim_result *res, const us_state *final);

/* The document, formatted, and a newline.  0, or -1 with err filled. */
int us_output_json(FILE *f, const us_sim_result *res, const us_state *final, us_err *err);

/* An account in words, summary first: the run's figures (harvest and
 * disturbance included), the legend of the actions, then cycle by cycle the
 * decisions, events and queue tables when their figures change (quiet
 * stretches summarised), then the final pods by state.  verbose: every
 * decision and every pod on a line of its own; else decisions rolled up per
 * workload and node, final pods per workload.  0, or -1 with err filled. */
int us_output_account(FILE *f, const us_sim_result *res, const us_state *final, bool verbose, us_err *err);

/* us_output_account, not verbose. */
int us_output_text(FILE *f, const us_sim_result *res, const us_state *final, us_err *err);

#endif
