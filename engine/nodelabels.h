/*
 * nodelabels.h — which node labels matter for scheduling, and each node's
 * labels cut down to them.
 *
 * A label matters when some workload's node selector names its key, or
 * when the policy in force (or the version it would fall back to) declares
 * that it reads it (`labels = {...}` in the table a policy file returns,
 * docs/policies.md).  Everything else — a unique kubernetes.io/hostname,
 * an instance id — cannot change a scheduling decision, so node classes
 * (nodeclass.c), the tie-break's interchangeable nodes (ties.c) and the
 * nodes policies see (placement.c, reoffer.c) all use these labels only:
 * a policy cannot read a label the class key ignores.
 *
 * Owned by the plan for one cycle; never changes the state.
 */
#ifndef US_NODELABELS_H
#define US_NODELABELS_H

#include "policy.h"
#include "state.h"

typedef struct us_nodelabels us_nodelabels;

/* The labels that matter of nodes[0..n) (state indices), in the order the
 * node lists them; NULL when memory runs out. */
us_nodelabels *us_nodelabels_new(const us_state *st, const us_policy *pol, const int *nodes,
                                 size_t n);
void us_nodelabels_free(us_nodelabels *l);

/* Labels that matter of the node at position pos (0..n). */
const us_labels *us_nodelabels_of(const us_nodelabels *l, size_t pos);
/* The keys that matter, sorted and unique; *n of them.  The strings are
 * the state's and the policies' (valid for the cycle). */
const char *const *us_nodelabels_keys(const us_nodelabels *l, size_t *n);

#endif
