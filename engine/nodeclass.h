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
 * engine breaks ties by name itself).  A score whose call drew no random
 * number and logged nothing (us_policy_last_call_pure) is a function of
 * the two views alone, so it is kept for the next cycle too, while the
 * same placement version scores: a pod class of the same key there finds
 * it for each node class whose key still exists.
 *
 * Owned by the plan (us_plan.classes); built on first use, kept current by
 * plan.c as nodes change, and handed to the pool's cycle cache
 * (cyclecache.h) when the plan ends, for the next cycle's node classes.
 * Not thread-safe.
 */
#ifndef US_NODECLASS_H
#define US_NODECLASS_H

#include "plan.h"

typedef struct us_classes us_classes;

/* The node classes of every node of p, from the last cycle's *c (NULL:
 * none; taken over and freed): while the pool's nodes and their static
 * views are the same (the state's node version and node spec version, the
 * label keys that matter), each node whose use in the AI view is still
 * its class's keeps that class's key without one made and hashed, and the
 * classes are numbered as a fresh build numbers them (first appearance
 * by position), so the cycle decides the same either way; else built
 * afresh.  Pod classes start empty; the pure scores *c handed over
 * (us_classes_hand_over) are kept when the views held and p scores with
 * the version that made them.  0 with *c set; -1 when
 * memory runs out (*c NULL); -2 in checking builds when the kept classes
 * are not those found afresh (*broken says so, *c NULL). */
int us_classes_renew(us_classes **c, const us_plan *p, const char **broken);
void us_classes_free(us_classes *c);

/* p's plan ends and hands c to the next cycle: the pure scores of its
 * pod classes are copied out of the state (which may change before then),
 * with the id of the placement version that made them.  Best effort: when
 * memory runs out, nothing is kept.  c's pod classes are not used again. */
void us_classes_hand_over(us_classes *c, const us_plan *p);

/* Node at position pos changed in the AI view: move it to its new class.
 * 0, or -1 when memory runs out. */
int us_classes_node_changed(us_classes *c, const us_plan *p, int pos);

/* How many nodes kept the last cycle's class key when c was made
 * (us_classes_renew; 0 when built afresh). */
size_t us_classes_kept(const us_classes *c);

/* Ids of the classes that have members now, ascending; *n of them (ids
 * are never reused; a class left empty keeps its id and cached scores).  Valid
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
/* pure: the score is a function of the views alone, and may be kept for
 * the next cycle.  0, or -1 when memory runs out. */
int us_classes_set_score(us_classes *c, int pc, int nc, double score, bool pure);

/* Forget every cached score, and those kept from the last cycle (the
 * scoring policy changed mid-cycle). */
void us_classes_clear_scores(us_classes *c);

/* Scores found kept from the last cycle so far. */
size_t us_classes_scores_kept(const us_classes *c);

#endif
