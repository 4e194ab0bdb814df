/*
 * cyclecache.c — what one cycle leaves for the next (see cyclecache.h).
 * Pools are few (a handful of scheduling domains): a linear lookup.
 */
#include "cyclecache.h"

#include <stdlib.h>
#include <string.h>

#include "nodeclass.h"
#include "podview.h"
#include "state.h"

us_cycle_cache *us_cycle_cache_new(void) { return calloc(1, sizeof(us_cycle_cache)); }

void us_cycle_cache_free(us_cycle_cache *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->pools[i].pool);
        free(c->pools[i].node_list);
        us_order_free(&c->pools[i].nodes);
        us_order_free(&c->pools[i].bg_running);
        us_order_free(&c->pools[i].bg_pending);
        us_classes_free(c->pools[i].classes);
        if (c->pools[i].view) us_podview_free(c->pools[i].view);
        free(c->pools[i].view);
        free(c->pools[i].ai);
        free(c->pools[i].bg_total);
        free(c->pools[i].fits);
        free(c->pools[i].ai_held);
    }
    free(c->pools);
    us_ledger_free(&c->ledger);
    free(c);
}

us_pool_hints *us_cycle_cache_pool(us_cycle_cache *c, const char *pool) {
    if (!c) return NULL;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->pools[i].pool, pool) == 0) return &c->pools[i];
    char *copy = strdup(pool);
    if (!copy || us_grow((void **)&c->pools, &c->cap, c->n, sizeof *c->pools) < 0) {
        free(copy);
        return NULL;
    }
    us_pool_hints *h = &c->pools[c->n++];
    memset(h, 0, sizeof *h);
    h->pool = copy;
    return h;
}

void us_cycle_cache_changes_read(const us_cycle_cache *c, us_state *st) {
    uint64_t upto = us_state_changes_end(st);
    for (size_t i = 0; c && i < c->n; i++) {
        const struct us_podview *v = c->pools[i].view;
        if (v && v->valid && v->mark < upto) upto = v->mark;
    }
    us_state_changes_trim(st, upto);
}
