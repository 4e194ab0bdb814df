/*
 * check.h — linting a policy directory before it goes live: syntax of each
 * file, the required functions, and the result contract on a scenario (the
 * scenario's own, or a built-in one that exercises every function).
 *
 * The result contract is the C core's: a run's cycles check every policy
 * result against the scheduling invariants and log a Warning event,
 * PolicyFailed or PolicyRejected, for each call that fails or result that is
 * rejected.  A check is such a run with the policy alone (no previous
 * version), and every such event is a finding.  `understory check` (main.c)
 * and the hot reload (reload.c) both read findings this way.
 *
 * A check never changes the policy directory and never swaps a policy in;
 * it only reports.  Not thread-safe.
 */
/* Not US_CHECK_H: that guard is the C test harness's (tests/c/check.h),
 * and tests include both. */
#ifndef US_POLICY_CHECK_H
#define US_POLICY_CHECK_H

#include <stdbool.h>
#include <stdio.h>

#include "cycle.h"
#include "events.h"
#include "policy.h"
#include "scenario.h"

/* The built-in check scenario (JSON text): a queue tree (fair share on a
 * hierarchy), three nodes (placement has a choice), and background pods
 * running, pending and evicted for an AI gang in its first cycle, so that
 * compute, score and reoffer are all called at t=0. */
extern const char us_check_scenario_json[];

/* Load the built-in check scenario into sc.  0 or -1. */
int us_check_load_builtin(us_scenario *sc, us_err *err);

/* One distinct policy failure: the same file and message seen in one or
 * more cycles. */
typedef struct us_check_finding {
    char *file;        /* "placement.lua" */
    char *reason;      /* "PolicyFailed" or "PolicyRejected" */
    char *message;     /* "placement.lua:3: ...": the event's message without
                          the note on which version the cycle fell back to */
    int cycle;         /* first cycle it was seen in (1-based) */
    double time;       /* and that cycle's time */
    int count;         /* how many events carried it */
} us_check_finding;

typedef struct us_check_findings {
    us_check_finding *items;
    size_t n, cap;
} us_check_findings;

void us_check_findings_free(us_check_findings *f);

/* Add the PolicyFailed / PolicyRejected events of one cycle's log to f.
 * 0, or -1 when memory runs out. */
int us_check_collect(us_check_findings *f, const us_cycle_log *log, int cycle, double time);

/* Run sc to its horizon with pol (which must have no previous version:
 * the check is of pol alone), ignoring timeline reloads, and collect every
 * finding.  sc's state is consumed.  0, or -1 with err (out of memory). */
int us_check_run_scenario(us_scenario *sc, us_policy *pol, const us_cycle_opts *o,
                          us_check_findings *f, us_err *err);

/* Will the next cycle's re-offer be sure to have pods to decide about?
 * True when st holds pending pods of active background workloads that
 * break no rule: every such pod is offered.  (Running background pods are
 * offered only on nodes the AI plan changes, which a state does not tell.)
 * A reoffer call with nothing in it only shows that the function runs, not
 * that its results keep the rules. */
bool us_check_offers_background(const us_state *st);

/* Does the scenario have a background workload that breaks no rule? */
bool us_check_has_background(const us_state *st);

/* Drop the timeline's reload_policies entries: a check or a diff is about
 * the policies it was given, not those a scenario would swap in. */
void us_check_drop_reloads(us_scenario *sc);

typedef struct us_check_opts {
    const char *scenario;       /* a scenario file, or NULL: the built-in one */
    us_policy_limits limits;
    us_cycle_opts cycle;
} us_check_opts;

void us_check_opts_default(us_check_opts *o);

/* Lint dir and print a report on out: one line per problem, each naming
 * file:line where known, then a verdict.  Returns the number of problems
 * (0: dir passes), or -1 with err when the check itself cannot run (the
 * scenario does not load, memory runs out). */
int us_check_dir(FILE *out, const char *dir, const us_check_opts *o, us_err *err);

#endif
