/*
 * reload.h — hot reload of a policy directory, checked before it goes live.
 *
 * A reload compiles the directory into a fresh Lua state, checks the
 * required functions and the result contract, and dry-runs a full cycle on
 * a copy of the current state within budget.  Only a policy that passes all
 * of it is handed back; the caller swaps it in between cycles:
 *
 *     us_policy *fresh;
 *     if (us_reload_check(st, now, dir, &limits, &opts, &fresh, &err) == 0) {
 *         us_policy_set_previous(fresh, current);   // fresh owns current now
 *         current = fresh;
 *     }                                             // else current stays
 *
 * The state is never modified.  Not thread-safe.
 */
#ifndef US_RELOAD_H
#define US_RELOAD_H

#include "cycle.h"
#include "policy.h"
#include "state.h"

/* 0 and *out (owned by the caller) when dir passes every check; -1 with err
 * saying why (file:line where known) otherwise, and nothing allocated. */
int us_reload_check(const us_state *st, double now, const char *dir,
                    const us_policy_limits *lim, const us_cycle_opts *o,
                    us_policy **out, us_err *err);

#endif
