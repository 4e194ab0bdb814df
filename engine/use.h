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

#include "state.h"

typedef struct us_use {
    us_res used;
    int whole;                        /* devices taken by whole-GPU pods */
    uint16_t shared[US_MAX_GPUS];     /* milli-GPU used on shared device slots */
} us_use;

int us_use_free_gpus(const us_use *u, const us_node *n);
/* Does req fit?  slot >= 0 asks for that shared slot (fractional pods). */
bool us_use_fits(const us_use *u, const us_node *n, us_res req, int slot);
/* Take req; returns the shared slot used (-1 when not fractional).  The
 * caller checked us_use_fits.  slot < 0 picks the fullest slot with room,
 * then the lowest free one. */
int us_use_add(us_use *u, const us_node *n, us_res req, int slot);
void us_use_remove(us_use *u, us_res req, int slot);

#endif
