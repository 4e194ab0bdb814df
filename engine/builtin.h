/*
 * builtin.h — the default policies compiled in C: the same algorithms as
 * policies/fairshare.lua, placement.lua and background.lua.
 *
 * They are the fallback when a Lua policy fails or its result is rejected
 * (so a cycle always completes), and the yardstick the benchmark measures
 * the Lua policies against.  Pure functions of their input; thread-safe.
 */
#ifndef US_BUILTIN_H
#define US_BUILTIN_H

#include "policy.h"

/* KAI fair share: min(quota, demand) first, then the rest by queue-priority
 * bucket and over-quota weight, water-filling capped by demand and limit,
 * recursively down the queue tree.  Fills fair[q * US_NRES + r]. 0 or -1. */
int us_builtin_fairshare(const us_fs_input *in, double *fair, us_err *err);

/* Bin-packing: the fullest feasible node by GPU, then CPU. */
double us_builtin_score(const us_pod_view *pod, const us_node_view *node);

/* Keep every running background pod that fits on its node (in name order),
 * then place pending pods, in name order, on the fullest candidate with room. */
int us_builtin_reoffer(const us_bg_input *in, bool *keep, int *place, us_err *err);

#endif
