/*
 * poolpods.c — the pods each node pool's snapshot reads (see poolpods.h).
 */
#include "poolpods.h"

#include <stdlib.h>
#include <string.h>

#include "strmap.h"

void us_pool_pods_free(us_pool_pods *pp) {
    for (size_t k = 0; pp->lists && k < pp->npools; k++) free(pp->lists[k].pods);
    free(pp->lists);
    memset(pp, 0, sizeof *pp);
}

/* Each node's and each workload's pool as its place in pools (-1: none of
 * them, or a removed node), into npos and wpos: from the ledger's pool
 * numbers when it has them for st, else by name (a run of nodes or
 * workloads of one pool compares one name).  0, or -1 (memory). */
static int pool_places(const us_state *st, const us_ledger *l, const char *const *pools, size_t n,
                       int *npos, int *wpos) {
    const int *wpool = us_ledger_workload_pools(l, st);
    if (wpool) {
        /* the ledger numbers pools its own way: its number -> place */
        int *place = malloc((l->npools ? l->npools : 1) * sizeof *place);
        if (!place) return -1;
        for (size_t k = 0; k < l->npools; k++) place[k] = -1;
        for (size_t k = 0; k < n; k++) {
            int num = us_ledger_pool_number(l, pools[k]);
            if (num >= 0) place[num] = (int)k;
        }
        for (size_t i = 0; i < st->nnodes; i++) npos[i] = l->npool[i] < 0 ? -1 : place[l->npool[i]];
        for (size_t w = 0; w < st->nworkloads; w++) wpos[w] = wpool[w] < 0 ? -1 : place[wpool[w]];
        free(place);
        /* a workload of a pool without nodes has no ledger number: by name */
        for (size_t w = 0; w < st->nworkloads; w++) {
            if (wpool[w] >= 0) continue;
            for (size_t k = 0; k < n && wpos[w] < 0; k++)
                if (strcmp(st->workloads[w].pool, pools[k]) == 0) wpos[w] = (int)k;
        }
        return 0;
    }
    us_strmap names = {0};
    int rc = us_strmap_reserve(&names, n);
    for (size_t k = 0; k < n && rc == 0; k++)  /* 1: added (each name comes once) */
        rc = us_strmap_add(&names, pools[k], (int)k) < 0 ? -1 : 0;
    const char *last = NULL;
    int at = -1;
    for (size_t i = 0; i < st->nnodes && rc == 0; i++) {
        const char *pool = st->nodes[i].pool;
        if (!last || strcmp(pool, last) != 0) at = us_strmap_get(&names, last = pool);
        npos[i] = st->nodes[i].removed ? -1 : at;
    }
    last = NULL;
    for (size_t w = 0; w < st->nworkloads && rc == 0; w++) {
        const char *pool = st->workloads[w].pool;
        if (!last || strcmp(pool, last) != 0) at = us_strmap_get(&names, last = pool);
        wpos[w] = at;
    }
    us_strmap_free(&names);
    return rc < 0 ? -1 : 0;
}

/* Pod i joins list x (pods come in order: x stays ascending). */
static int join(us_pod_list *x, size_t i) {
    if (us_grow((void **)&x->pods, &x->cap, x->n, sizeof *x->pods) < 0) return -1;
    x->pods[x->n++] = (int)i;
    return 0;
}

int us_pool_pods_make(us_pool_pods *pp, const us_state *st, const us_ledger *l,
                      const char *const *pools, size_t n) {
    memset(pp, 0, sizeof *pp);
    if (n < 2) return 0;
    int *npos = malloc((st->nnodes ? st->nnodes : 1) * sizeof *npos);
    int *wpos = malloc((st->nworkloads ? st->nworkloads : 1) * sizeof *wpos);
    pp->lists = calloc(n, sizeof *pp->lists);
    int rc = npos && wpos && pp->lists ? pool_places(st, l, pools, n, npos, wpos) : -1;
    if (rc == 0) pp->npools = n;
    /* one pass: each pod joins its workload's pool, and its node's when
     * another */
    for (size_t i = 0; i < st->npods && rc == 0; i++) {
        const us_pod *pd = &st->pods[i];
        int a = wpos[pd->workload], b = pd->node >= 0 ? npos[pd->node] : -1;
        if (a >= 0) rc = join(&pp->lists[a], i);
        if (rc == 0 && b >= 0 && b != a) rc = join(&pp->lists[b], i);
    }
    free(npos);
    free(wpos);
    if (rc < 0) {
        us_pool_pods_free(pp);
        return -1;
    }
    pp->npods = st->npods;
    pp->generation = st->generation;
    return 0;
}

bool us_pool_pods_set(const us_pool_pods *pp, const us_state *st, size_t k, us_pod_set *set) {
    if (!pp->lists || k >= pp->npools || pp->generation != st->generation || st->npods < pp->npods)
        return false;
    set->pods = pp->lists[k].pods;
    set->n = pp->lists[k].n;
    set->from = pp->npods;
    return true;
}
