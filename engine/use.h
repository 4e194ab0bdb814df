/*
 * use.h — how full one node is: resource sums plus its GPU devices, counted
 * whole, or shared slot by slot by fractional pods (whose fractions on one
 * device sum to at most one; a device in fractional use is not free for a
 * whole-GPU pod).
 *
 * A us_use is a plain value: the plan keeps one per node for the AI view,
 * the commit one for what physically runs, the loader one for pre-existing
 * pods.  Pure functions; thread-safe.
 */
#ifndef US_USE_H
#define US_USE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "state.h"

typedef struct us_use {
    us_res used;
    int whole;                        /* devices taken by whole-GPU pods */
    uint16_t shared[US_MAX_GPUS];     /* milli-GPU used on shared device slots */
    /* slots from top on are zero (us_use_add and us_use_remove keep it so;
     * a zeroed use has top 0): a copy need not move the 128 bytes of
     * shared slots most nodes never use (us_use_copy).  Not part of the
     * use's value: us_use_equal and a class key leave it out, so it sits
     * past the slots, in what was the struct's tail padding */
    uint8_t top;
} us_use;

/* Same use, field by field (top and the tail padding are not compared). */
static inline bool us_use_equal(const us_use *a, const us_use *b) {
    return memcmp(&a->used, &b->used, sizeof a->used) == 0 && a->whole == b->whole &&
           memcmp(a->shared, b->shared, sizeof a->shared) == 0;
}

/* Are u's slots from its top on zero, as us_use_copy needs?  Checking
 * builds hold every kept use to it (invariants "ledger", "ai-view"). */
static inline bool us_use_top_holds(const us_use *u) {
    if (u->top > US_MAX_GPUS) return false;
    for (int i = u->top; i < US_MAX_GPUS; i++)
        if (u->shared[i]) return false;
    return true;
}

/* *dst = *src, moving only the slots either may have in use: dst must be a
 * use (or zeroed memory), its slots from its top on zero.  A plan copies
 * a use per node each cycle; whole, the copies were most of what a quiet
 * cycle at 130,000 nodes spent building its AI view. */
static inline void us_use_copy(us_use *dst, const us_use *src) {
    dst->used = src->used;
    dst->whole = src->whole;
    memcpy(dst->shared, src->shared, src->top * sizeof *src->shared);
    if (dst->top > src->top)
        memset(dst->shared + src->top, 0, (size_t)(dst->top - src->top) * sizeof *dst->shared);
    dst->top = src->top;
}

int us_use_free_gpus(const us_use *u, const us_node *n);
/* Does req fit?  slot >= 0 asks for that shared slot (fractional pods). */
bool us_use_fits(const us_use *u, const us_node *n, us_res req, int slot);
/* Take req; returns the shared slot used (-1 when not fractional).  The
 * caller checked us_use_fits.  slot < 0 picks the fullest slot with room,
 * then the lowest free one. */
int us_use_add(us_use *u, const us_node *n, us_res req, int slot);
void us_use_remove(us_use *u, us_res req, int slot);

/* What a node's running background pods take, summed (the re-offer's
 * totals, us_plan.bg_total): whole-GPU requests as us_usesum sums them,
 * fractional pods only counted (each takes a slot that depends on the pods
 * before it, so the re-offer adds them one by one). */
typedef struct us_bg_total {
    us_res whole;    /* requests of its whole-GPU pods, summed */
    int gpus;        /* the devices they take */
    int pods;        /* pods, fractional ones included */
    int fractional;  /* pods sharing a device */
} us_bg_total;

/* A pod's request into (sign 1) or out of (-1) a total.  False when the
 * total is saturated after, or was before (then nothing is taken out): a
 * saturated sum cannot be taken back. */
static inline bool us_bg_total_saturated(const us_bg_total *t) {
    for (int r = 0; r < US_NRES; r++)
        if (t->whole.v[r] == INT64_MAX) return true;
    return false;
}
static inline bool us_bg_total_add(us_bg_total *t, us_res req, int sign) {
    bool was_saturated = us_bg_total_saturated(t);
    if (sign < 0 && was_saturated) return false;
    t->pods += sign;
    if (us_req_is_fractional(req)) {
        t->fractional += sign;
        return !was_saturated;
    }
    t->whole = sign > 0 ? us_res_add(t->whole, req) : us_res_sub(t->whole, req);
    t->gpus += sign * us_req_whole_gpus(req);
    return !was_saturated && !us_bg_total_saturated(t);
}

#endif
