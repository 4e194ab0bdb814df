/*
 * ties.h — the least-displacement tie-break (us_cycle_opts.
 * background_aware_ties): once the AI plan of a pool is final, new AI pods
 * are moved, a node's worth at a time, between nodes that are
 * interchangeable for every AI pod of the cycle, onto the ones where they
 * displace the least background work.  See ties.c for why this can never
 * change an AI outcome.
 */
#ifndef US_TIES_H
#define US_TIES_H

#include "plan.h"

/* Rearrange p's new AI placements as above (a no-op unless the option is
 * on).  0, or -1 when memory runs out (err says so; the cycle fails). */
int us_ties_spare_background(us_plan *p, us_err *err);

/* How many running background pods at plan position pos would lose their
 * room beside an AI view of ai (keep-if-fits in name order beside the AI
 * end state, as the default background.lua decides: terminating pods are
 * gone by then). */
int us_ties_displaced(const us_plan *p, int pos, const us_use *ai);

#endif
