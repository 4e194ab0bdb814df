/*
 * poolpods.h — the pods each node pool's snapshot reads, found in one
 * pass over the pods for all pools of a cycle.
 *
 * A pool's snapshot (plan.c) reads a pod only for what it says about the
 * pool: a pod of one of the pool's workloads, or a pod on one of its
 * nodes; any other pod adds nothing to its plan.  With one pool every pod
 * is the pool's, and the snapshot reads them all; with several, each
 * snapshot passing over every pod made a cycle cost pools x pods.  This
 * lists, per pool, the pods of its workloads and on its nodes, in pod
 * order, from one pass at the cycle's start.  A pool's commit only
 * appends pods (recreated incarnations), so a later pool's snapshot reads
 * its list and then every pod appended since; a compaction between (the
 * state's generation moved) voids the lists, and the snapshot reads every
 * pod again.
 *
 * Owned by the cycle that built it; not thread-safe.
 */
#ifndef US_POOLPODS_H
#define US_POOLPODS_H

#include <stddef.h>
#include <stdint.h>

#include "ledger.h"
#include "state.h"

/* The pods a snapshot reads, in pod order: pods[0..n), then every pod
 * from `from` on (appended since the list was made). */
typedef struct us_pod_set {
    const int *pods;
    size_t n, from;
} us_pod_set;

/* The x-th pod a snapshot reads: of set, or of every pod when set is NULL. */
static inline size_t us_pod_set_at(const us_pod_set *set, size_t x) {
    if (!set) return x;
    return x < set->n ? (size_t)set->pods[x] : set->from + (x - set->n);
}

typedef struct us_pod_list {
    int *pods;            /* ascending */
    size_t n, cap;
} us_pod_list;

typedef struct us_pool_pods {
    size_t npools;
    us_pod_list *lists;   /* [npools] each pool's pods */
    size_t npods;         /* st->npods when made */
    uint64_t generation;  /* st->generation when made */
} us_pool_pods;

/* The lists for the n pools named (each name once), from one pass over
 * st's pods; l, when it has pool numbers for st (us_ledger_workload_pools),
 * saves comparing names.  Nothing is made for fewer than two pools (pp
 * stays empty: every snapshot reads every pod).  0, or -1 when memory
 * runs out (pp empty). */
int us_pool_pods_make(us_pool_pods *pp, const us_state *st, const us_ledger *l,
                      const char *const *pools, size_t n);

/* Pool k's set, into *set; false when every pod must be read (no lists,
 * or pods moved since they were made). */
bool us_pool_pods_set(const us_pool_pods *pp, const us_state *st, size_t k, us_pod_set *set);

void us_pool_pods_free(us_pool_pods *pp);

#endif
