/*
 * allocate.h — the allocate action (see allocate.c).
 */
#ifndef US_ALLOCATE_H
#define US_ALLOCATE_H

#include "plan.h"

int us_allocate(us_plan *p, us_err *err);

#endif
