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

/* What a removed key leaves in its slot, so that probes go on past it. */
static const char removed[] = "";

/* The slot of key (hash h), or NULL.  The low bits of h pick the first
 * slot, the high ones are kept to compare. */
static us_strmap_slot *find(const us_strmap *m, const char *key, uint64_t h) {
    if (!m->cap) return NULL;
    uint32_t hi = (uint32_t)(h >> 32);
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        us_strmap_slot *s = &m->slot[i];
        if (!s->key) return NULL;
        if (s->key != removed && s->hash == hi && strcmp(s->key, key) == 0) return s;
    }
}

/* The slot a new key of hash h takes: the first removed or empty one. */
static us_strmap_slot *free_slot(const us_strmap *m, uint64_t h) {
    size_t i = h & (m->cap - 1);
    while (m->slot[i].key && m->slot[i].key != removed) i = (i + 1) & (m->cap - 1);
    return &m->slot[i];
}

static bool too_full(size_t n, size_t cap) { return 4 * n > 3 * cap; }

/* Every key moved to cap slots; the removed ones' slots are freed. */
static int rebuild(us_strmap *m, size_t cap) {
    us_strmap g = {calloc(cap, sizeof *g.slot), cap, m->n, 0};
    if (!g.slot) return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i].key && m->slot[i].key != removed)
            *free_slot(&g, us_name_hash(m->slot[i].key)) = m->slot[i];
    free(m->slot);
    *m = g;
    return 0;
}

int us_strmap_reserve(us_strmap *m, size_t n) {
    size_t cap = 64;
    while (too_full(n, cap)) cap *= 2;
    return cap <= m->cap ? 0 : rebuild(m, cap);
}

/* Room for one more key: grown when the live keys fill it, rebuilt in
 * place when removed ones do. */
static int room_for_one(us_strmap *m) {
    if (!too_full(m->n + m->ntomb + 1, m->cap)) return 0;
    if (too_full(m->n + 1, m->cap) || !m->cap) return us_strmap_reserve(m, m->cap ? m->cap : 32);
    return rebuild(m, m->cap);
}

int us_strmap_add(us_strmap *m, const char *key, int value) {
    uint64_t h = us_name_hash(key);
    if (find(m, key, h)) return 0;
    if (room_for_one(m) < 0) return -1;
    us_strmap_slot *s = free_slot(m, h);
    if (s->key == removed) m->ntomb--;
    *s = (us_strmap_slot){key, (uint32_t)(h >> 32), value};
    m->n++;
    return 1;
}

int us_strmap_set(us_strmap *m, const char *key, int value) {
    us_strmap_slot *s = find(m, key, us_name_hash(key));
    if (!s) return us_strmap_add(m, key, value) < 0 ? -1 : 0;
    s->key = key;
    s->value = value;
    return 0;
}

int us_strmap_get(const us_strmap *m, const char *key) {
    const us_strmap_slot *s = find(m, key, us_name_hash(key));
    return s ? s->value : -1;
}

bool us_strmap_del(us_strmap *m, const char *key) {
    us_strmap_slot *s = find(m, key, us_name_hash(key));
    if (!s) return false;
    s->key = removed;
    m->n--;
    m->ntomb++;
    return true;
}

void us_strmap_free(us_strmap *m) {
    free(m->slot);
    memset(m, 0, sizeof *m);
}
