/*
 * ledger.h — what physically holds each node and how many pods each
 * workload holds, kept from one cycle to the next and brought up to date
 * from the state's journal of changed pods (state.h), so that a cycle
 * after a small change pays for the change, not for every pod.
 *
 * Counted per pod, by its node, state, device and gone flag:
 *   use[node]      room of its running and terminating pods (not gone);
 *   waiting[node]  its pipelined pods;
 *   holding[w]     pods of workload w running or pipelined;
 *   npipelined     pipelined pods in all.
 *
 * us_ledger_sync takes each journal entry's pod out as it was and adds it
 * as it is.  It counts every pod again instead when it cannot follow: the
 * first time, after pods or workloads were renumbered (pods_version), after
 * the nodes changed (nodes_version), when the journal was lost (memory),
 * or when a change involves a fractional pod with no device recorded (the
 * device it takes depends on the order pods are added) or a node whose
 * sums saturate (a saturated sum cannot be taken back).  Either way the
 * counts come out as counting every pod would make them; checking builds
 * (-DUS_CHECK_INVARIANTS) count every pod after each sync and compare
 * (invariant "ledger"), so a write to a pod that skipped us_pod_touch
 * fails the suite.
 *
 * Owned by whoever runs the cycles (in us_cycle_cache), save while a cycle
 * borrows its per-node arrays (us_ledger_lend); a zeroed ledger is an
 * empty one.  Not thread-safe: one owner, one state at a time.
 */
#ifndef US_LEDGER_H
#define US_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"
#include "use.h"

typedef struct us_ledger {
    bool valid;
    uint64_t pods_version, nodes_version;  /* the state's, when counted */
    size_t nnodes, nworkloads, cap_workloads;
    us_use *use;       /* [nnodes] */
    int *waiting;      /* [nnodes] */
    int *holding;      /* [nworkloads] */
    size_t npipelined;
    /* how the last sync went, for tests and profiles */
    size_t applied;    /* journal entries applied (0 when counted afresh) */
    bool recounted;    /* every pod was counted */
} us_ledger;

/* Count every pod of st into l (l's journal position is not touched).
 * 0, or -1 when memory runs out (l is then empty and invalid). */
int us_ledger_take(us_ledger *l, const us_state *st);

/* Bring l up to date with st and read the journal (which is cleared).
 * 0; -1 when memory runs out (l invalid, the journal cleared: the next
 * sync counts afresh); -2 in checking builds when the kept counts are not
 * what counting every pod gives (broken, len bytes, says where). */
int us_ledger_sync(us_ledger *l, us_state *st, char *broken, size_t len);

/* Is l what counting every pod of st gives?  0; -1 when memory runs out;
 * -2 when not (broken, len bytes, says where). */
int us_ledger_check(const us_ledger *l, const us_state *st, char *broken, size_t len);

/* A cycle borrows the use and waiting counts (its us_phys) and keeps them
 * up to date with each change it makes, as the journal records the same
 * changes: lend hands them over (l then holds none), settle takes them
 * back once the cycle is done and brings the other counts up from the
 * journal, which it clears.  A cycle that failed gives nothing back:
 * us_ledger_free, and the next sync counts afresh. */
void us_ledger_lend(us_ledger *l, us_use **use, int **waiting);
void us_ledger_settle(us_ledger *l, us_state *st, us_use *use, int *waiting);

void us_ledger_free(us_ledger *l);

/* Does a pod with these fields hold room on its node physically (running
 * or terminating, not gone)?  What use[] counts, and what the cycle's
 * commit keeps it to. */
static inline bool us_ledger_holds_room(bool gone, int node, int state) {
    return !gone && node >= 0 && (state == US_POD_RUNNING || state == US_POD_RELEASING);
}

#endif
