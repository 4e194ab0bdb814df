/*
 * cache.h — objects by key, in one array kept sorted by key: lookups are a
 * binary search, and walking the array visits the keys in one order
 * (determinism: a sync walks them the same way every time).  Keys are
 * copied; objects (cJSON trees) are owned once put.  An insertion moves
 * the entries after it, which an informer's initial list (sorted by key,
 * as the API server lists) never does, but a watch adding keys in any
 * order does: at a million pods that was a millisecond a pod.  So a cache
 * that is never walked, only looked up (the pods by key), is made
 * unordered (sv_cache_unordered): its keys in no order, found through a
 * hash map (engine/strmap.h), an insertion or a removal in constant time.
 *
 * Plain values of their owner; not thread-safe (serve runs on one loop).
 */
#ifndef SV_CACHE_H
#define SV_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

#include "strmap.h"

typedef struct sv_cache {
    char **keys;
    cJSON **objs;
    double *when; /* a time per key (the assumed binds'); unused by object caches */
    size_t n, cap;
    bool unordered;   /* keys in no order, found through index: never walk it */
    us_strmap index;  /* unordered: key -> its position */
} sv_cache;

/* Make the empty cache c unordered, for good (sv_cache_clear keeps it so). */
void sv_cache_unordered(sv_cache *c);

/* The index of key (*found), or where it would go (unordered: the end). */
long sv_cache_find(const sv_cache *c, const char *key, bool *found);
bool sv_cache_has(const sv_cache *c, const char *key);
/* key's object, or NULL. */
cJSON *sv_cache_lookup(const sv_cache *c, const char *key);
/* Put key (copied) with obj (owned) and t; replaces what was there.  -1
 * when out of memory (obj freed). */
int sv_cache_put(sv_cache *c, const char *key, cJSON *obj, double t);
void sv_cache_drop_at(sv_cache *c, size_t i);
void sv_cache_drop(sv_cache *c, const char *key);
/* Everything dropped, the arrays freed: c is empty again. */
void sv_cache_clear(sv_cache *c);

#endif
