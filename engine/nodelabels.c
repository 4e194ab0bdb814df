/*
 * nodelabels.c — the node labels that matter for scheduling (see
 * nodelabels.h).  Keys are gathered once per cycle into a sorted list
 * (kept with the rest: node classes compare it with the last cycle's); each
 * node's kept labels are a slice of one shared array of key/value pointers
 * into the state (nothing is copied, nothing outlives the cycle).
 */
#include "nodelabels.h"

#include <stdlib.h>
#include <string.h>

struct us_nodelabels {
    us_kv *items;      /* every node's kept labels, node after node */
    us_labels *of;     /* [n] slices of items */
    size_t n;
    const char **keys; /* the keys that matter, sorted, unique */
    size_t nkeys;
};

static int by_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool has_key(const char **keys, size_t nkeys, const char *key) {
    return bsearch(&key, keys, nkeys, sizeof *keys, by_str) != NULL;
}

/* The keys that matter, sorted and unique, in a malloc'd array. */
static const char **gather_keys(const us_state *st, const us_policy *pol, size_t *nkeys) {
    size_t cap = 0, k = 0;
    /* every workload's selector, but not one a control plane dropped
     * (us_workload.dropped: kept only until its gone pods are), whose
     * selector leaves with it as if it had left the array */
    for (size_t w = 0; w < st->nworkloads; w++) cap += st->workloads[w].node_selector.n;
    for (const us_policy *v = pol; v; v = us_policy_previous(v)) {
        size_t nl = 0;
        us_policy_labels(v, &nl);
        cap += nl;
    }
    const char **keys = malloc((cap ? cap : 1) * sizeof *keys);
    if (!keys) return NULL;
    for (size_t w = 0; w < st->nworkloads; w++) {
        if (st->workloads[w].dropped) continue;
        const us_labels *sel = &st->workloads[w].node_selector;
        for (size_t i = 0; i < sel->n; i++) keys[k++] = sel->items[i].key;
    }
    for (const us_policy *v = pol; v; v = us_policy_previous(v)) {
        size_t nl = 0;
        const char *const *l = us_policy_labels(v, &nl);
        for (size_t i = 0; i < nl; i++) keys[k++] = l[i];
    }
    qsort(keys, k, sizeof *keys, by_str);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || strcmp(keys[u - 1], keys[i]) != 0) keys[u++] = keys[i];
    *nkeys = u;
    return keys;
}

us_nodelabels *us_nodelabels_new(const us_state *st, const us_policy *pol, const int *nodes,
                                 size_t n) {
    us_nodelabels *l = calloc(1, sizeof *l);
    size_t nkeys = 0, total = 0;
    const char **keys = NULL;
    if (!l || !(keys = gather_keys(st, pol, &nkeys))) goto fail;
    l->n = n;
    if (!(l->of = calloc(n ? n : 1, sizeof *l->of))) goto fail;
    /* nothing selects on a label: every node keeps none (the slices are
     * empty), and the passes below would search an empty list per label */
    for (size_t i = 0; nkeys > 0 && i < n; i++) {
        const us_labels *all = &st->nodes[nodes[i]].labels;
        for (size_t j = 0; j < all->n; j++) total += has_key(keys, nkeys, all->items[j].key);
    }
    if (!(l->items = malloc((total ? total : 1) * sizeof *l->items))) goto fail;
    total = 0;
    for (size_t i = 0; i < n; i++) {
        const us_labels *all = &st->nodes[nodes[i]].labels;
        l->of[i].items = l->items + total;
        for (size_t j = 0; nkeys > 0 && j < all->n; j++)
            if (has_key(keys, nkeys, all->items[j].key)) l->items[total++] = all->items[j];
        l->of[i].n = (size_t)(l->items + total - l->of[i].items);
    }
    l->keys = keys;
    l->nkeys = nkeys;
    return l;
fail:
    free(keys);
    us_nodelabels_free(l);
    return NULL;
}

void us_nodelabels_free(us_nodelabels *l) {
    if (!l) return;
    free(l->items);
    free(l->of);
    free(l->keys);
    free(l);
}

const char *const *us_nodelabels_keys(const us_nodelabels *l, size_t *n) {
    *n = l->nkeys;
    return l->keys;
}

const us_labels *us_nodelabels_of(const us_nodelabels *l, size_t pos) { return &l->of[pos]; }
