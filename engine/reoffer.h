/*
 * reoffer.h — background re-offer: after AI placement, what is left is
 * offered back to background pods (see reoffer.c).
 */
#ifndef US_REOFFER_H
#define US_REOFFER_H

#include "plan.h"

typedef struct us_reoffer {
    int *running;      /* running background pods offered to the policy,
                          by name: those on nodes the AI plan changed.  The
                          others stay, undisturbed, and are not listed */
    bool *keep;        /* [nrunning] still fits: stays, undisturbed */
    size_t nrunning;
    int *pending;      /* pending background pods, by name */
    int *place;        /* [npending] node index (state) or -1 */
    size_t npending;
} us_reoffer;

/* Decide which running background pods stay and where pending ones go. */
int us_reoffer_run(us_plan *p, us_reoffer *out, us_err *err);
void us_reoffer_free(us_reoffer *r);

#endif
