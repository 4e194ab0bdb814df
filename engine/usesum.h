/*
 * usesum.h — adding many pods' requests to node uses in one pass over the
 * pods, without a cache miss per pod.
 *
 * A pass in pod order reaches nodes at random, and a node's us_use is
 * 160 bytes (a slot count per device): one addition per pod into whole
 * uses was most of what a large quiet cycle spent building them.  Whole-GPU
 * requests (nearly every pod's) are summed instead in a small per-node
 * array and reach the uses once per node (us_usesum_flush_all).  A
 * fractional request takes a device slot that depends on what its node
 * already holds, so its node's sum is added first: each use comes out as
 * if every request had been added in turn (requests are never negative, so
 * sums saturate the same in any grouping).
 *
 * A us_usesum adds every request to one or more arrays of uses alike (the
 * targets, indexed the same way).  It owns its sums, not the targets.  Not
 * thread-safe: one pass, one owner.
 */
#ifndef US_USESUM_H
#define US_USESUM_H

#include <stddef.h>

#include "use.h"

#define US_USESUM_MAX_TARGETS 4

typedef struct us_usesum {
    struct us_usesum_node *sum;  /* [n] what is not yet added */
    us_use *target[US_USESUM_MAX_TARGETS];
    int ntargets;
    size_t n;
} us_usesum;

/* Sums for n uses, added to each of the ntargets arrays (n uses each).
 * 0, or -1 when memory runs out (nothing to free then). */
int us_usesum_init(us_usesum *s, size_t n, us_use *const *targets, int ntargets);
/* Add req to use k of every target (node n is its node).  A fractional
 * request is added at once, to each target as us_use_add(use, n, req,
 * slot) adds it; returns the slot it took in the first target, -1 for a
 * whole request. */
int us_usesum_add(us_usesum *s, size_t k, const us_node *n, us_res req, int slot);
/* Add what is summed to the targets; the sums start again from nothing. */
void us_usesum_flush_all(us_usesum *s);
void us_usesum_free(us_usesum *s);

#endif
