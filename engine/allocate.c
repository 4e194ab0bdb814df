/*
 * allocate.c — the allocate action: place pending AI jobs on free resources
 * of the AI view, without evicting anything.  A gang is placed all or
 * nothing up to min_member; pods beyond it are elastic and placed one at a
 * time while they fit.  Jobs are served in queue order (gang.c).
 */
#include "allocate.h"

#include "gang.h"

static int allocate_job(us_plan *p, int w, us_err *err) {
    bool ok = true;
    int missing = us_gang_missing(p, w);
    if (missing > 0 && us_gang_try(p, w, missing, US_ACT_ALLOCATE, &ok, err) < 0) return -1;
    while (ok && us_gang_missing(p, w) == 0)
        if (us_gang_try(p, w, 1, US_ACT_ALLOCATE, &ok, err) < 0) return -1;
    return 0;
}

int us_allocate(us_plan *p, us_err *err) { return us_gang_serve_in_order(p, allocate_job, err); }
