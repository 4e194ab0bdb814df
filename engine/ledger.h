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
 *   running[w]     of them, running;
 *   pending[w]     pods of workload w pending, and unnamed[w] of them not
 *                  named (us_pod.named: not reported by the caller yet);
 *   npipelined     pipelined pods in all;
 * and by its workload's view kind (us_view_kind) too, for the cycle's
 * snapshot (plan.c), which copies them for its pool instead of adding up
 * every pod:
 *   ai[node]       room its pods hold in the AI planning view (virtual
 *                  eviction: background pods hold none there);
 *   bg[node]       what its running background pods take (us_bg_total);
 *   kind[w]        the kind workload w's pods were counted as: one whose
 *                  kind changes (it completes, is blocked) is followed only
 *                  when every pod of it holding room is in the journal,
 *                  else every pod is counted again.
 *
 * us_ledger_sync takes each journal entry's pod out as it was and adds it
 * as it is.  It counts every pod again instead when it cannot follow: the
 * first time, after pods or workloads were renumbered beyond what it
 * follows (pods_version; us_ledger_renumber_workloads follows the API's
 * tidying), after
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

/* How the pods of a workload count in the AI planning view, by what the
 * workload is now (plan.c, virtual eviction): */
enum {
    US_VIEW_NONE,   /* nowhere: not submitted, or done */
    US_VIEW_AI,     /* an AI job: its running and pipelined pods hold room on
                       the nodes of its pool */
    US_VIEW_BG,     /* background work the re-offer offers: its running pods
                       on the nodes of its pool go in their totals */
    US_VIEW_FIXED   /* external, or active and breaking a rule: nothing may
                       move its running and pipelined pods, which hold room
                       wherever they are */
};
static inline uint8_t us_view_kind(const us_workload *w) {
    if (w->external || (w->blocked && w->state == US_WL_ACTIVE)) return US_VIEW_FIXED;
    if (w->state != US_WL_ACTIVE || w->blocked) return US_VIEW_NONE;
    return w->background ? US_VIEW_BG : US_VIEW_AI;
}

/* Where a pod counts, on a node present (not removed): in the AI view
 * (US_SHARE_AI), in the node's background total (US_SHARE_BG) or nowhere
 * (0).  kind is its workload's, same_pool whether the workload's pool is
 * the node's.  A gone pod counts nowhere. */
enum { US_SHARE_AI = 1, US_SHARE_BG = 2 };
static inline int us_view_share(uint8_t kind, bool same_pool, int state, bool gone) {
    bool holds = state == US_POD_RUNNING || state == US_POD_PIPELINED;
    if (gone) return 0;
    if (kind == US_VIEW_FIXED) return holds ? US_SHARE_AI : 0;
    if (kind == US_VIEW_AI) return holds && same_pool ? US_SHARE_AI : 0;
    if (kind == US_VIEW_BG) return state == US_POD_RUNNING && same_pool ? US_SHARE_BG : 0;
    return 0;
}

typedef struct us_ledger {
    bool counts_only;  /* keeps no views (ai, bg): a ledger for one cycle
                          only, whose snapshot adds them up itself */
    bool valid;
    uint64_t pods_version, nodes_version;  /* the state's, when counted */
    size_t nnodes, nworkloads, cap_workloads;
    us_use *use;       /* [nnodes] */
    int *waiting;      /* [nnodes] */
    int *holding;      /* [nworkloads] */
    int *running, *pending, *unnamed;  /* [nworkloads] */
    size_t npipelined;
    us_use *ai;        /* [nnodes] never lent: the snapshot copies */
    us_bg_total *bg;   /* [nnodes] */
    uint8_t *kind;     /* [nworkloads] us_view_kind when last counted */
    /* a stamp per node, a new one whenever its ai or bg changes (a count
     * of every pod stamps every node anew): a node whose stamp is the one
     * read before has the views it had then.  clock is the last stamp
     * given; us_ledger_free keeps it, so no stamp is given twice */
    uint64_t *stamp;   /* [nnodes] */
    uint64_t clock;
    int *npool;        /* [nnodes] the pool of each node as a number, -1: removed */
    int *wpool;        /* [nworkloads] of each workload, -1: no node has it */
    char **pools;      /* the names, by number */
    size_t npools, cap_pools;
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

/* The workloads of st are about to be renumbered (the API's tidying drops
 * those no pod refers to any more): wmap[w] is workload w's index after,
 * -1 when it goes, for each of the st->nworkloads there are now, and nnew
 * of them stay.  Called while st still numbers them the old way, with no
 * cycle borrowing l's arrays: l brings itself up to date with the journal
 * (which is cleared) and renumbers its counts per workload, so that the
 * next sync follows on from them instead of counting every pod again.
 * 0; 1 when it cannot (not counted, an entry it cannot follow, a
 * workload going that still holds pods, memory): l is then freed, and the
 * caller says the pods were renumbered (us_state_pods_renumbered), as
 * before. */
int us_ledger_renumber_workloads(us_ledger *l, us_state *st, const int *wmap, size_t nnew);

/* The per-workload counts as counting every pod of st would make them now,
 * into the arrays given ([st->nworkloads] each): l's, brought up to date
 * with the journal's entries (the changes a cycle makes until it
 * settles).  0; 1 when l cannot tell (not counted, pods or workloads
 * renumbered since, the journal lost): the arrays are untouched, and the
 * caller counts them itself. */
typedef struct us_ledger_counts {
    int *holding, *running, *pending, *unnamed;
} us_ledger_counts;
int us_ledger_workload_counts(const us_ledger *l, const us_state *st, const us_ledger_counts *out);

/* Frees what l holds: l is then empty (counts_only stays). */
void us_ledger_free(us_ledger *l);

/* The AI view and background totals of the n nodes listed (node indices;
 * pos maps a node index to its place in the list, -1 when not listed) as
 * counting every pod of st would make them, into ai[n] and bg[n]: copied
 * from l and brought up to date with the journal's entries, which a cycle
 * adds to until it settles.  0; 1 when l cannot tell (not counted, the
 * nodes or a workload's kind changed since, or an entry it cannot follow):
 * the caller counts them itself, into ai and bg, which are then as they
 * were given (zeroed, if they were).  ai holds uses or zeroed memory
 * (us_use_copy: slots past each use's top are zero).
 *
 * held (may be NULL: every node is copied), [n]: per listed node, the
 * stamp (us_ledger.stamp) of the views ai and bg hold for it, copied
 * from l and not changed since, else 0.  A node whose stamp is what held
 * says is not copied again; held is brought up to date (0 where a journal
 * entry patched the copy).  When 1 is returned, the caller that counts the
 * views itself sets held to 0; whoever changes ai or bg after sets it to 0
 * there.  *copied (may be NULL): how many nodes were copied. */
int us_ledger_views(const us_ledger *l, const us_state *st, const int *nodes, size_t n,
                    const int *pos, us_use *ai, us_bg_total *bg, uint64_t *held, size_t *copied);

/* Each workload's pool as a number (wpool) while l has them for st's
 * workloads and nodes, else NULL; and the number of a pool, -1 when no
 * node has it (equal numbers >= 0: the same pool).  For the passes over
 * every workload that ask whether it is of a pool: a number read, not a
 * string compared. */
const int *us_ledger_workload_pools(const us_ledger *l, const us_state *st);
int us_ledger_pool_number(const us_ledger *l, const char *pool);

/* Does a pod with these fields hold room on its node physically (running
 * or terminating, not gone)?  What use[] counts, and what the cycle's
 * commit keeps it to. */
static inline bool us_ledger_holds_room(bool gone, int node, int state) {
    return !gone && node >= 0 && (state == US_POD_RUNNING || state == US_POD_RELEASING);
}

#endif
