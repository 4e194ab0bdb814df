/*
 * cache.c — objects by key, in a sorted array, or in an unordered one
 * with a hash map of positions (see cache.h).
 */
#include "cache.h"

#include <stdlib.h>
#include <string.h>

void sv_cache_unordered(sv_cache *c) { c->unordered = true; }

long sv_cache_find(const sv_cache *c, const char *key, bool *found) {
    if (c->unordered) {
        int i = us_strmap_get(&c->index, key);
        *found = i >= 0;
        return i >= 0 ? i : (long)c->n;
    }
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int r = strcmp(c->keys[mid], key);
        if (r == 0) {
            *found = true;
            return (long)mid;
        }
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    *found = false;
    return (long)lo;
}

bool sv_cache_has(const sv_cache *c, const char *key) {
    bool f;
    sv_cache_find(c, key, &f);
    return f;
}

cJSON *sv_cache_lookup(const sv_cache *c, const char *key) {
    bool f;
    long i = sv_cache_find(c, key, &f);
    return f ? c->objs[i] : NULL;
}

/* Put key (copied) with obj (owned) and t; replaces what was there.  -1
 * when out of memory (obj freed). */
int sv_cache_put(sv_cache *c, const char *key, cJSON *obj, double t) {
    bool f;
    long i = sv_cache_find(c, key, &f);
    if (f) {
        cJSON_Delete(c->objs[i]);
        c->objs[i] = obj;
        c->when[i] = t;
        return 0;
    }
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 16;
        char **k = realloc(c->keys, ncap * sizeof *k);
        if (k) c->keys = k;
        cJSON **o = realloc(c->objs, ncap * sizeof *o);
        if (o) c->objs = o;
        double *w = realloc(c->when, ncap * sizeof *w);
        if (w) c->when = w;
        if (!k || !o || !w) goto nomem;
        c->cap = ncap;
    }
    char *copy = strdup(key);
    if (!copy) goto nomem;
    if (c->unordered && us_strmap_add(&c->index, copy, (int)c->n) < 0) {
        free(copy);
        goto nomem;
    }
    size_t m = c->n - (size_t)i;
    memmove(c->keys + i + 1, c->keys + i, m * sizeof *c->keys);
    memmove(c->objs + i + 1, c->objs + i, m * sizeof *c->objs);
    memmove(c->when + i + 1, c->when + i, m * sizeof *c->when);
    c->keys[i] = copy;
    c->objs[i] = obj;
    c->when[i] = t;
    c->n++;
    return 0;
nomem:
    cJSON_Delete(obj);
    return -1;
}

void sv_cache_drop_at(sv_cache *c, size_t i) {
    if (c->unordered) {
        /* the last entry takes its place: its key is there already, so
         * setting its position allocates nothing */
        us_strmap_del(&c->index, c->keys[i]);
        free(c->keys[i]);
        cJSON_Delete(c->objs[i]);
        size_t last = --c->n;
        if (i != last) {
            c->keys[i] = c->keys[last];
            c->objs[i] = c->objs[last];
            c->when[i] = c->when[last];
            (void)us_strmap_set(&c->index, c->keys[i], (int)i);
        }
        return;
    }
    free(c->keys[i]);
    cJSON_Delete(c->objs[i]);
    size_t m = c->n - i - 1;
    memmove(c->keys + i, c->keys + i + 1, m * sizeof *c->keys);
    memmove(c->objs + i, c->objs + i + 1, m * sizeof *c->objs);
    memmove(c->when + i, c->when + i + 1, m * sizeof *c->when);
    c->n--;
}

void sv_cache_drop(sv_cache *c, const char *key) {
    bool f;
    long i = sv_cache_find(c, key, &f);
    if (f) sv_cache_drop_at(c, (size_t)i);
}

void sv_cache_clear(sv_cache *c) {
    bool unordered = c->unordered;
    for (size_t i = 0; i < c->n; i++) {
        free(c->keys[i]);
        cJSON_Delete(c->objs[i]);
    }
    free(c->keys);
    free(c->objs);
    free(c->when);
    us_strmap_free(&c->index);
    memset(c, 0, sizeof *c);
    c->unordered = unordered;
}
