/*
 * commit.h — turning a finished plan into state changes, decisions and
 * events (see commit.c).
 */
#ifndef US_COMMIT_H
#define US_COMMIT_H

#include "plan.h"
#include "reoffer.h"
#include "use.h"

/* What physically holds each node (its running and terminating pods) and
 * how many pipelined pods wait on it.  At the start of a cycle
 * (us_commit_cycle_start) the cycle borrows it from the ledger kept across
 * cycles (ledger.h; counted afresh from every pod without a cycle cache);
 * each pool's commit then keeps it up to date with the changes it makes,
 * so that no commit reads every pod again, and the cycle hands it back at
 * its end.  Owned by the cycle until then (us_phys_free); not
 * thread-safe. */
typedef struct us_phys {
    us_use *use;       /* [nnodes] */
    int *waiting;      /* [nnodes] pipelined pods on the node */
    size_t nnodes;
} us_phys;

/* The same counted from every pod of the state as it is now: 0, or -1
 * when memory runs out (ph left empty).  The invariant checker compares it
 * with the kept one. */
int us_phys_take(const us_state *st, us_phys *ph);
void us_phys_free(us_phys *ph);

/* Apply plan p and re-offer bg to the state; ph, read at the cycle's start,
 * follows every change. */
int us_commit(us_plan *p, const us_reoffer *bg, us_phys *ph, us_cycle_counts *counts, us_err *err);

/* The start of a cycle, from the ledger brought up to date with the pods
 * changed since the last cycle (ledger.h; a pass over the pods only to
 * list pipelined ones, when there are some, or when it counts afresh):
 * - a gang that broke (a node left, a bind failed, a pod was lost or
 *   min_member was raised) holds fewer than min_member pods: every pod it
 *   still runs or has pipelined is stopped, each an evict decision (action
 *   stalegangeviction, the evictor the gang itself), with one Evict event
 *   per gang, and the gang goes back to pending whole;
 * - then pipelined pods whose resources are now free bind.
 * Call after us_life_expire.  0 with *ph read from the state once this is
 * done (the caller's to free), or -1 when memory runs out. */
int us_commit_cycle_start(us_state *st, double now, const us_cycle_opts *o, us_cycle_log *log,
                          us_phys *ph, us_err *err);

#endif
