/*
 * cycle.h — one scheduling cycle over a cluster state, pool by pool:
 * snapshot, virtual eviction of background pods, fair share, AI placement
 * (allocate, reclaim, preempt), background re-offer, commit.
 *
 * The cycle changes the state only in ways the decisions it logs describe
 * (plus expiring terminated pods).  Policy failures never fail a cycle: they
 * are reported as events and the built-in policy is used instead.  A cycle
 * fails (returns -1) only when memory runs out; the state is then
 * consistent but the cycle may be partly committed.
 *
 * Not thread-safe: a cycle owns its state, policy and log while it runs.
 */
#ifndef US_CYCLE_H
#define US_CYCLE_H

#include "events.h"
#include "policy.h"
#include "state.h"

/* Where a cycle's time went, summed over pools (seconds of the thread's
 * CPU time, us_cycle_cpu_clock).
 * Only filled when us_cycle_opts.profile is set: wall-clock figures never
 * reach the simulator's output, which must be the same for the same input. */
typedef struct us_cycle_profile {
    /* snapshot includes virtual eviction: both are one pass over the pods,
     * so eviction stays 0 (kept for us_engine_cycle_phase's list) */
    double snapshot, eviction, fairshare, allocate, victims, reoffer, commit;
    unsigned long long policy_calls;  /* Lua policy function invocations */
    double policy_seconds;            /* time inside us_policy_* calls */
    int placed;                       /* AI and background pods bound or pipelined */
    /* nodes put into node classes (each pool's at its first placement),
     * and of them those that kept the last cycle's class key (cyclecache.h) */
    unsigned long long nodes_classed, nodes_class_kept;
    /* placement scores found kept from the last cycle (nodeclass.h): each
     * one a (pod class, node class) pair not scored again */
    unsigned long long scores_kept;
    /* nodes whose AI view and background total the snapshot copied from
     * the ledger (ledger.h) instead of adding up every pod */
    unsigned long long nodes_view_kept;
    /* of them, those copied: the others' views were in the pool's kept
     * arrays already, with the ledger's stamp they have now */
    unsigned long long nodes_view_copied;
    /* nodes with running background pods the AI plan left alone: those
     * whose pods the re-offer asked to fit beside the AI view, and those
     * it did not ask again, their views unchanged since they last fitted
     * (reoffer.c, us_pool_hints.fits) */
    unsigned long long nodes_fit_asked, nodes_fit_kept;
    /* pods the ledger kept across cycles counted again at the cycle's
     * start, as it could not follow the changes since the last (ledger.h):
     * every pod, or 0 */
    unsigned long long pods_counted;
    /* pods whose part in a pool's snapshot was worked out: every pod of
     * the pool when read afresh, else those changed since the last
     * (podview.h) */
    unsigned long long pods_read;
} us_cycle_profile;

typedef struct us_cycle_opts {
    /* Between nodes interchangeable for every AI pod of the cycle, put new
     * AI pods where they displace the least background work (ties.h).
     * false: plain invisible planning, ties by name. */
    bool background_aware_ties;
    /* A background pod whose termination grace exceeds this (seconds) draws
     * a warning: it delays AI work pipelined onto its resources. */
    double long_grace;
    /* When non-NULL, the cycle adds its timings here (for benchmarks). */
    us_cycle_profile *profile;
    /* Cache placement scores per (pod class, node class) for the cycle
     * (nodeclass.h).  false: every feasible node is scored for every pod,
     * the reference the cache is tested against. */
    bool score_cache;
    /* Check the invariants (invariants.h) after the cycle; a violation
     * fails the cycle with an error naming it.  On by default in builds
     * with US_CHECK_INVARIANTS defined (the sanitizer flavour of make test). */
    bool check_invariants;
    /* Seconds of wall clock a whole cycle may spend before its policies are
     * no longer asked: past it, a call running is cut off and the rest of
     * the cycle uses the built-in policies, with a Warning event naming the
     * policy and the budget (a policy legal call by call can still be slow
     * over a cycle: one call per node class times many classes).  0: no
     * budget.  Default US_CYCLE_BUDGET. */
    double cycle_budget;
    /* What this cycle may reuse from the last one and leaves for the next
     * (cyclecache.h), owned by the caller; NULL: a full cycle that
     * recomputes everything.  Either way the cycle decides the same. */
    struct us_cycle_cache *cache;
    /* For whoever runs cycles one after another (the simulator): true gives
     * them no cache, so every cycle is a full one (--full-cycles); false
     * (default) gives them one of its own unless cache is set. */
    bool full_cycles;
    /* Pods exist once the caller reports them (a cluster that names its
     * own pods: Kubernetes).  A pending pod the engine's controller made
     * and no report has claimed yet (us_pod.named false: a workload's pods
     * at submission, a replacement after an eviction or a loss) keeps its
     * workload's place but is never placed, as no bind of it could be
     * carried out; a gang waits for min_member reported pods.  false
     * (default): the engine owns the names, and places its own pods. */
    bool reported_pods;
} us_cycle_opts;

/* May a cycle place pending pod pd?  Not a pod the caller has yet to
 * report, under reported_pods. */
static inline bool us_cycle_may_place(const us_cycle_opts *o, const us_pod *pd) {
    return !(o && o->reported_pods && !pd->named);
}

/* Does evicting a running pod of wl leave it terminating, holding its room?
 * With a grace period; and always under reported_pods, where a deleted pod
 * is there until the caller sees it gone (us_life_evict). */
static inline bool us_cycle_evict_terminates(const us_cycle_opts *o, const us_workload *wl) {
    return wl->termination_grace > 0 || (o && o->reported_pods);
}

#define US_CYCLE_BUDGET 5.0

void us_cycle_opts_default(us_cycle_opts *o);

/* A monotonic clock in seconds (wall clock: budgets, --timings). */
double us_cycle_clock(void);
/* The CPU time of the calling thread in seconds, for profiles: on a
 * machine shared with other work it measures the cycle's own cost. */
double us_cycle_cpu_clock(void);

/* Per-queue figures a cycle computed, summed over pools (engine units). */
typedef struct us_queue_figures {
    us_res allocated;
    double fair[US_NRES];
} us_queue_figures;

typedef struct us_cycle_counts {
    int background_evictions;
    int preemptions;
    int reclaims;
} us_cycle_counts;

/* Run one cycle at virtual time now.  pol may be NULL: built-in policies.
 * Appends decisions and events to log; fills figs[0..st->nqueues) when
 * non-NULL; adds to counts when non-NULL. */
int us_cycle_run(us_state *st, us_policy *pol, double now, const us_cycle_opts *o,
                 us_cycle_log *log, us_queue_figures *figs, us_cycle_counts *counts,
                 us_err *err);

#endif
