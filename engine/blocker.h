/*
 * blocker.h — what keeps a pod pending whatever the cluster's load: no node
 * of its pool, none matching its node selector, none whose taints it
 * tolerates, none large enough for its request (or its gang), or every one
 * that could hold it cordoned.  The pending report
 * (cycle.c) says so instead of "not enough free resources", which would
 * send a user looking for load that is not the cause.
 */
#ifndef US_BLOCKER_H
#define US_BLOCKER_H

#include <stddef.h>

#include "state.h"

typedef enum us_blocker {
    US_BLOCK_NONE,      /* some node could hold it once room is free */
    US_BLOCK_NO_POOL,   /* no node in its pool */
    US_BLOCK_SELECTOR,  /* no node of its pool matches its node selector */
    US_BLOCK_TOO_LARGE, /* no matching node could hold it even empty */
    US_BLOCK_CORDONED,  /* every node that could hold it is cordoned */
    US_BLOCK_GANG,      /* the matching nodes, even empty, hold fewer pods than its gang needs */
    US_BLOCK_TAINTS     /* every node matching its selector has a taint it does not tolerate */
} us_blocker;

/* Short names for annotations: "", "no-node-in-pool", "node-selector",
 * "request-too-large", "cordoned", "gang-too-large", "untolerated-taint". */
extern const char *const us_blocker_names[];

/* Why need pods of workload w at once (its gang's min_member when none of
 * it holds a node, else 1), pinned to node pin (or -1), can never be placed
 * as the nodes stand; when not US_BLOCK_NONE, a sentence saying so is
 * written to msg.  Looks at node capacity, labels and cordons only, never
 * at what runs. */
us_blocker us_blocker_find(const us_state *st, const us_workload *w, int pin, int need, char *msg,
                           size_t n);

#endif
