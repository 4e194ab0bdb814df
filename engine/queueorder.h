/*
 * queueorder.h — which queue is served first, and which gives first, after
 * KAI's queue order (see queueorder.c).
 */
#ifndef US_QUEUEORDER_H
#define US_QUEUEORDER_H

#include "plan.h"

/* Is queue q over its fair share on some resource? */
bool us_qorder_over_fair(const us_plan *p, int q);

/* Would queue q stay within its quota on every resource with extra added?
 * An unlimited quota (-1) is never exceeded. */
bool us_qorder_within_quota(const us_plan *p, int q, us_res extra);

/* Dominant share of queue q with extra added: the largest (allocated +
 * extra) / fair share over resources; a resource held without any fair
 * share counts as far over. */
double us_qorder_share(const us_plan *p, int q, us_res extra);

/* The two queues that decide between leaves a and b (a != b): their
 * ancestors (or themselves) just below the deepest ancestor they share, or
 * their roots when they share none. */
void us_qorder_level(const us_plan *p, int a, int b, int *la, int *lb);

/* Order of two different queues a and b whose next jobs need ea and eb:
 * < 0 when a is served first, > 0 when b is.  Never 0 (the last tie-break
 * is the name of the deciding queue).  Pass zero extras to order queues by
 * what they hold only; the queue served last gives first. */
int us_qorder_compare(const us_plan *p, int a, us_res ea, int b, us_res eb);

#endif
