/*
 * order.h — order hints: a sort that remembers the order it produced, so
 * the next sort of almost the same items costs about one comparison per
 * item instead of n log n.
 *
 * Items are ints (indices) that each carry a key naming the thing they
 * stand for across calls (a pod's seq, a node's index): indices may be
 * renumbered between calls, keys are what is remembered.  Before sorting,
 * the items whose keys were sorted last time are put in that order, the
 * others after them in the order given; then us_sort (stable, adaptive)
 * sorts the whole.  The hint changes only the cost, never the result: the
 * comparators are total orders, so the sorted array is the same whatever
 * order the items came in, and a stale or wrong hint (keys reused, names
 * changed) only makes the sort slower.  That is what lets caches built on
 * it be trusted without proving every change was marked.
 *
 * A us_order owns its memory (us_order_free).  Not thread-safe: one owner.
 */
#ifndef US_ORDER_H
#define US_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "sort.h"

typedef struct us_order {
    uint64_t *keys;   /* the keys of the last sort, in its order */
    size_t n, cap;
} us_order;

/* The key of item x (ctx: the sort's). */
typedef uint64_t (*us_order_key)(int x, void *ctx);

/* Sort items[0..n) (each >= 0) by cmp, arranging them by the remembered order first;
 * remember the result.  0, or -1 when memory runs out: items are then
 * still sorted (without the hint) and the hint is forgotten. */
int us_order_sort(us_order *o, int *items, size_t n, us_order_key key, us_sort_cmp cmp, void *ctx);

/* Forget the remembered order (the next sort is a full one). */
void us_order_forget(us_order *o);
void us_order_free(us_order *o);

#endif
