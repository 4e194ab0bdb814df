/*
 * nodeclass.h — equivalence classes that keep placement near linear.
 *
 * Two nodes whose views are the same but for their names (the labels that
 * matter — nodelabels.h —, taints, capacity, use in the AI view, cordon)
 * are in one
 * node class; two pods whose views are the same but for their names
 * (requests, labels, priority, queue, node selector) are in one pod class.
 * The placement policy scores a (pod class, node class) pair once; the
 * score is cached for the rest of the cycle, and a node that changes moves
 * to the class of its new state, so only changed nodes are ever re-scored.
 * This is why a policy's score must not depend on node or pod names (the
 * engine breaks ties by name itself).
 *
 * Owned by the plan (us_plan.classes); built on first use, kept current by
 * plan.c as nodes change.  Not thread-safe.
 */
#ifndef US_NODECLASS_H
#define US_NODECLASS_H

#include "plan.h"

typedef struct us_classes us_classes;

/* Build the node classes of every node of p; NULL when memory runs out. */
us_classes *us_classes_new(const us_plan *p);
void us_classes_free(us_classes *c);

/* Node at position pos changed in the AI view: move it to its new class.
 * 0, or -1 when memory runs out. */
int us_classes_node_changed(us_classes *c, const us_plan *p, int pos);

/* Number of node classes so far (ids are 0..n-1 and never reused). */
int us_classes_count(const us_classes *c);
/* Ids of the classes that have members now, ascending; *n of them.  Valid
 * until the next change.  Placement scans these, never dead ids: a class
 * is keyed on use, so ids pile up as nodes fill. */
const int *us_classes_live(const us_classes *c, int *n);
/* The member with the lowest position (name order) of class id, or -1
 * when the class is empty now. */
int us_classes_first(us_classes *c, int id);

/* The pod class of pod's workload; -1 when memory runs out. */
int us_classes_pod_class(us_classes *c, const us_plan *p, int pod);

/* Cached score of (pod class, node class); false when not scored yet. */
bool us_classes_score(us_classes *c, int pc, int nc, double *score);
int us_classes_set_score(us_classes *c, int pc, int nc, double score);

/* Forget every cached score (the scoring policy changed mid-cycle). */
void us_classes_clear_scores(us_classes *c);

#endif
