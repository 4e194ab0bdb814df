/*
 * apiprofile.h — the whole profile of an engine handle's last cycle
 * (cycle.h, us_cycle_profile), for the benchmark and the tests: what the
 * public us_engine_cycle_phase and us_engine_cycle_reuse tell, and what
 * they do not (nodes whose views were kept, pods counted again); and the
 * one setting the tests vary that must change nothing but the cost.  Not
 * part of the public API: its fields change with the engine, so it is
 * linked only from the static library.
 *
 * The profile belongs to the handle and is overwritten by its next cycle;
 * the same thread rules as every call on the handle (understory.h).
 */
#ifndef US_APIPROFILE_H
#define US_APIPROFILE_H

#include "cycle.h"
#include "understory.h"

/* The last cycle's profile (all 0 before the first), or NULL when e is. */
const us_cycle_profile *us_engine_profile(const us_engine *e);

/* When the pods gone are dropped from e's arrays (us_state.gone_share: 0
 * at once, 1 only once every pod is gone, US_GONE_SHARE by default).
 * Nothing when e is NULL. */
void us_engine_set_gone_share(us_engine *e, unsigned share);

#endif
