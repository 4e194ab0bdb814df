/*
 * strmap.c — strings to ints (see strmap.h).  Linear probing.
 */
#include "strmap.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a, then mixed: a product carries only upward, so without the mix
 * the low bits a table indexes by depend only on the low bits of each
 * byte, and names that differ in their digits crowd together. */
uint64_t us_name_hash(const char *s) {
    uint64_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdu;
    return h ^ (h >> 33);
}

/* The slot of key (hash h): its own, or the empty one it would take.  The
 * low bits of h pick the first slot, the high ones are kept to compare. */
static us_strmap_slot *find(const us_strmap *m, const char *key, uint64_t h) {
    size_t i = h & (m->cap - 1);
    uint32_t hi = (uint32_t)(h >> 32);
    while (m->slot[i].key && (m->slot[i].hash != hi || strcmp(m->slot[i].key, key) != 0))
        i = (i + 1) & (m->cap - 1);
    return &m->slot[i];
}

static bool too_full(size_t n, size_t cap) { return 4 * n > 3 * cap; }

int us_strmap_reserve(us_strmap *m, size_t n) {
    size_t cap = 64;
    while (too_full(n, cap)) cap *= 2;
    if (cap <= m->cap) return 0;
    us_strmap g = {calloc(cap, sizeof *g.slot), cap, m->n};
    if (!g.slot) return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i].key) *find(&g, m->slot[i].key, us_name_hash(m->slot[i].key)) = m->slot[i];
    free(m->slot);
    *m = g;
    return 0;
}

int us_strmap_add(us_strmap *m, const char *key, int value) {
    if (too_full(m->n + 1, m->cap) && us_strmap_reserve(m, m->cap ? m->cap : 32) < 0) return -1;
    uint64_t h = us_name_hash(key);
    us_strmap_slot *s = find(m, key, h);
    if (s->key) return 0;
    *s = (us_strmap_slot){key, (uint32_t)(h >> 32), value};
    m->n++;
    return 1;
}

int us_strmap_get(const us_strmap *m, const char *key) {
    if (!m->cap) return -1;
    const us_strmap_slot *s = find(m, key, us_name_hash(key));
    return s->key ? s->value : -1;
}

void us_strmap_free(us_strmap *m) {
    free(m->slot);
    memset(m, 0, sizeof *m);
}
