/*
 * sim.h — the simulator: runs a scenario's cycles over virtual time as
 * docs/scenario.md and docs/scheduling.md say (timeline, submissions,
 * durations, grace periods), recording every cycle's changes, decisions,
 * events and per-queue figures.
 *
 * us_sim_run consumes the scenario's state (it is the simulated cluster);
 * the result owns its own copies of everything it reports.  Not thread-safe.
 *
 * Policies: the caller's policy is lent, never freed.  A timeline
 * `reload_policies` goes through us_reload_check (reload.h) on the state as
 * it is at that time; a policy that passes is swapped in before the cycle,
 * with the one it replaces as its previous version (policy.h), and a
 * PolicyReloaded event; one that fails leaves the policy in force as it
 * was, with a PolicyReloadRefused Warning that says why.  The simulator owns
 * and frees every policy a reload loaded.  When the caller's policy is the
 * previous version of a reloaded one, the simulator takes it back
 * (us_policy_take_previous) before that one is replaced or freed, so the
 * caller's policy outlives the run untouched.
 */
#ifndef US_SIM_H
#define US_SIM_H

#include "cycle.h"
#include "harvest.h"
#include "scenario.h"

/* Called before each cycle with the state the cycle will start from (the
 * timeline applied, the policies seeded), the policy in force, the time
 * and the 1-based cycle number: for tests that compare what variants of
 * one cycle decide from the same state (on copies; the hook must leave st
 * and pol as they were). */
typedef void (*us_sim_hook)(void *ctx, us_state *st, us_policy *pol, double now, int cycle);

typedef struct us_sim_opts {
    us_cycle_opts cycle;
    const char *policy_dir;     /* NULL: built-in default policies dir */
    us_policy_limits limits;
    us_sim_hook before_cycle;   /* NULL: none */
    void *hook_ctx;
    /* Called after each cycle when non-NULL, with the cycle's number and
     * time and the most cycles the run may have: for a progress line.  It
     * must not touch the simulation. */
    void (*progress)(void *ctx, int cycle, double time, int most);
    void *progress_ctx;
} us_sim_opts;

/* Room for a policy id (policy.h: 16 hex digits) or "builtin". */
#define US_SIM_POLICY_ID 24

/* One change to the cluster that no scheduling decision made: a workload
 * submitted, deleted or completed, a node added, removed, cordoned or
 * uncordoned, pods of a workload leaving once their termination grace
 * ended.  Recorded in the cycle where it takes effect. */
typedef enum us_change_kind {
    US_CH_SUBMIT,
    US_CH_DELETE,
    US_CH_COMPLETE,
    US_CH_ADD_NODE,
    US_CH_REMOVE_NODE,
    US_CH_CORDON,
    US_CH_UNCORDON,
    US_CH_LEAVE
} us_change_kind;
extern const char *const us_change_names[]; /* "submit", ..., "uncordon", "leave" */

typedef struct us_change {
    us_change_kind action;
    char *object;          /* the workload (or node, for the node kinds) */
    bool by_duration;      /* complete: its duration ran out (else the timeline said so) */
    char **pods;           /* pods it brought (submit, add_node) or that stopped or left */
    size_t npods;
} us_change;

typedef struct us_sim_cycle {
    int index;                  /* 1-based */
    double time;
    char policy[US_SIM_POLICY_ID]; /* id of the policy in force, or "builtin" */
    us_cycle_log log;
    us_queue_figures *queues;   /* [nqueues] after the cycle */
    us_change *changes;         /* applied before the cycle ran, in order */
    size_t nchanges, cap_changes;
} us_sim_cycle;

typedef struct us_sim_result {
    char *scenario;
    us_sim_cycle *cycles;
    size_t ncycles, cap_cycles;
    size_t nqueues;
    double final_time;
    us_cycle_counts totals;
    int ai_pods_pending;        /* AI pods pending at the end */
    char policy[US_SIM_POLICY_ID]; /* the policy in force at the end, or "builtin" */
    us_harvest harvest;         /* GPU use, evictions and waits, cycle by cycle */
} us_sim_result;

void us_sim_opts_default(us_sim_opts *o);

/* Run sc to its horizon with policy pol (NULL: built-in C policies; lent,
 * see above).  On success sc->state holds the final cluster.  0 or -1. */
int us_sim_run(us_scenario *sc, us_policy *pol, const us_sim_opts *o,
               us_sim_result *res, us_err *err);
void us_sim_result_free(us_sim_result *res);

#endif
