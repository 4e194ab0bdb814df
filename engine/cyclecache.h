/*
 * cyclecache.h — what one cycle leaves for the next, so that a cycle after
 * a small change costs less than the first: the ledger of what holds each
 * node (ledger.h), and per node pool, the order of its nodes by name and
 * of its background pods by name (order hints, order.h).
 *
 * Everything kept here changes only what a cycle costs, never what it
 * decides.  Four kinds of thing are kept.  The ledger, followed through
 * the state's journal of changed pods; checking builds count every pod
 * after each sync and hold the ledger to it (invariant "ledger").  Order
 * hints: a hint that no
 * longer matches the state (pods added, removed or moved, nodes renamed,
 * indices renumbered by the API's tidying) only makes the next sort
 * longer.  And a pool's node list itself (and whether it has nodes at
 * all), kept with the state's node
 * version: every change a list depends on (a node added, removed or back,
 * the nodes renumbered) moves the version (us_state_nodes_changed), and
 * checking builds (-DUS_CHECK_INVARIANTS) list the nodes afresh each cycle
 * and hold the kept list to it (invariant "node-list").  And a pool's node
 * classes (nodeclass.h), kept with the node version, the node spec version
 * and the label keys that matter: a node whose use in the AI view did not
 * change keeps its class without its key made and hashed again; checking
 * builds find the classes afresh and hold the kept ones to them
 * (invariant "node-classes").  With them, the placement scores that are
 * a function of the views alone, from the version that still scores
 * (us_classes_hand_over).  A cycle run
 * without a cache
 * (us_cycle_opts.cache NULL: `--full-cycles`, us_engine_options.full_cycles)
 * recomputes everything and decides the same, byte for byte; make test
 * proves it (tests/cli/full-cycles.sh, tests/c/test_incremental.c).
 *
 * Owned by whoever runs the cycles (the simulator, an engine handle);
 * not thread-safe: one owner, one cycle at a time.
 */
#ifndef US_CYCLECACHE_H
#define US_CYCLECACHE_H

#include "ledger.h"
#include "order.h"

typedef struct us_pool_hints {
    char *pool;
    /* the pool's nodes by name, as the last cycle listed them, and the
     * state's node version then (us_state.nodes_version): while it holds,
     * the list is the list, and is reused without a sort */
    int *node_list;
    size_t nnode_list, cap_node_list;
    uint64_t nodes_version;  /* 0: no list */
    us_order nodes;       /* the pool's nodes by name (key: node index) */
    us_order bg_running;  /* its running background pods by name (key: pod seq) */
    us_order bg_pending;  /* its pending background pods by name (key: pod seq) */
    bool has_nodes;       /* some node is in the pool, removed or not (read
                             while us_cycle_cache.node_pools_version holds) */
    /* the node classes the pool's last plan ended with (nodeclass.h): the
     * next plan's are found from them (us_classes_renew), or afresh when
     * the nodes or their static views changed; NULL: none */
    struct us_classes *classes;
    /* what the pool's last snapshot read from the pods (podview.h), and
     * followed from there; NULL: none yet */
    struct us_podview *view;
    /* the arrays of the pool's last plan's AI view and background totals
     * (us_plan.ai, .bg_total; ncap nodes each), handed to the next plan:
     * their pages are mapped already (a fresh array of 130,000 uses was a
     * few thousand page faults a cycle) and every use in ai is one
     * (us_use_copy); NULL: none */
    us_use *ai;
    us_bg_total *bg_total;
    size_t ncap;
    /* and by position in the pool's node list of state node version
     * ai_nodes_version, the ledger's stamp (ledger.h) of the views ai and
     * bg_total hold, copied from the ledger and not changed by the plan
     * since (us_plan.ai_held), 0: not known: the next snapshot copies only
     * the nodes whose views changed */
    uint64_t *ai_held;
    uint64_t ai_nodes_version;
    /* the re-offer's verdicts on nodes its plan left alone (reoffer.c):
     * by position in the pool's node list of state node spec version
     * fits_version (nfits positions: the nodes and their capacities as
     * they were), the ledger's stamp (ledger.h) of a node's views when its
     * background pods were found to fit beside its AI view; 0: not known.
     * Equal stamps, equal views: the same verdict */
    uint64_t *fits;
    size_t nfits;
    uint64_t fits_version;
} us_pool_hints;

typedef struct us_cycle_cache {
    us_pool_hints *pools;
    size_t n, cap;
    us_ledger ledger;  /* every pool's nodes and workloads (ledger.h) */
    /* the state's node version when the pools' has_nodes were set: a
     * node's pool never changes, so while the version holds they say
     * which pools have nodes without reading every node's (a cache miss
     * per node); 0: not known */
    uint64_t node_pools_version;
} us_cycle_cache;

/* A new empty cache, or NULL when memory runs out. */
us_cycle_cache *us_cycle_cache_new(void);
void us_cycle_cache_free(us_cycle_cache *c);
/* The hints of one pool (created empty the first time), or NULL when c is
 * NULL or memory runs out: the cycle then runs without hints. */
us_pool_hints *us_cycle_cache_pool(us_cycle_cache *c, const char *pool);
/* The state's log of changed pods (us_state.changes) drops what every
 * pool's kept view of the pods has read.  c may be NULL (all is read). */
void us_cycle_cache_changes_read(const us_cycle_cache *c, us_state *st);

#endif
