/*
 * invariants.h — what must hold after every cycle, whatever the policies
 * returned: the checker behind us_cycle_opts.check_invariants.
 *
 *   capacity     no node is over capacity, physically (running and
 *                terminating pods) nor as planned (running and pipelined
 *                pods: where the AI plan ends), and each such pod that
 *                asks a fraction of a GPU holds a device;
 *   gang         every active AI workload holds 0 or at least min_member
 *                pods (running or pipelined);
 *   names        live pod names are unique (pending, pipelined, running;
 *                a terminating incarnation may share its successor's name);
 *   applied      every placement, keep and eviction the cycle accepted,
 *                from AI placement and from the background policy, is what
 *                the state now shows, and every running pod nothing may
 *                move still runs where it ran: an external workload's
 *                (another scheduler's: it counts on its node in every
 *                view) and an active workload's that breaks a rule (AI or
 *                background: never scheduled, so never evicted either);
 *   queue-usage  each queue's allocation as the cycle reports it equals the
 *                sum of the requests of its AI pods (running or pipelined),
 *                its children's included;
 *   queue-tree   what the state keeps derived of the queue tree (leaf,
 *                depth) is what the parents make it;
 *   physical-use what the cycle kept of each node's physical use and
 *                pipelined pods from its start through every commit
 *                (us_phys) is what the pods now make it.
 *
 * The cycle records what it accepted, pool by pool, before commit
 * (us_inv_record); us_inv_check is the one check, after the cycle.  A
 * violation is an engine bug: it fails the cycle with US_EINVARIANT and a
 * message naming the invariant, the time and the objects.  Read-only on
 * the state; never fixes what it finds.  Not thread-safe.
 */
#ifndef US_INVARIANTS_H
#define US_INVARIANTS_H

#include "commit.h"
#include "cycle.h"
#include "plan.h"
#include "reoffer.h"

typedef struct us_inv_expect {
    int pod;      /* index in the state (stable for the cycle: pods only append) */
    int node;     /* node index */
    int what;     /* US_INV_PLACED, US_INV_KEPT, US_INV_STOPPED or US_INV_FIXED */
} us_inv_expect;

enum { US_INV_PLACED, US_INV_KEPT, US_INV_STOPPED, US_INV_FIXED };

typedef struct us_inv {
    us_inv_expect *e;
    size_t n, cap;
    const us_phys *phys;  /* the cycle's ledger (borrowed), or NULL: not checked */
} us_inv;

/* Record what pool plan p and re-offer bg decided (call before commit).
 * 0, or -1 when memory runs out. */
int us_inv_record(us_inv *inv, const us_plan *p, const us_reoffer *bg);

/* Check every invariant on st after the cycle at time now; figs are the
 * per-queue figures the cycle reported ([st->nqueues]).  0, or -1 with err
 * (US_EINVARIANT, or US_ENOMEM). */
int us_inv_check(const us_state *st, const us_inv *inv, const us_queue_figures *figs, double now,
                 us_err *err);

void us_inv_free(us_inv *inv);

#endif
