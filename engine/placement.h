/*
 * placement.h — choosing a node for one AI pod in the plan: the C core
 * filters feasible nodes, placement.lua scores them, the highest score wins.
 */
#ifndef US_PLACEMENT_H
#define US_PLACEMENT_H

#include "plan.h"

/* Can pod go on node at all, ignoring resources?  (Present, not cordoned,
 * node selector, daemonset pin.) */
bool us_place_allowed(const us_plan *p, int pod, int node);

/* The best node for pod in the AI view, or -1 when none fits.  Returns 0,
 * or -1 when memory runs out. */
int us_place_choose(us_plan *p, int pod, int *node, us_err *err);


#endif
