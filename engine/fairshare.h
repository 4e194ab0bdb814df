/*
 * fairshare.h — the fair-share step of a cycle (see fairshare.c).
 */
#ifndef US_FAIRSHARE_H
#define US_FAIRSHARE_H

#include "plan.h"

/* Fill p->fair for every queue on the plan's pool; 0 or -1 (out of memory). */
int us_fairshare_compute(us_plan *p, us_err *err);

#endif
