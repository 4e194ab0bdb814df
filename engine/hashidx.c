/*
 * hashidx.c — ids by hash, and the hashes of the engine's keys (see
 * hashidx.h).
 */
#include "hashidx.h"

#include <stdlib.h>
#include <string.h>

static bool live(const us_hashidx *t, const us_hashidx_slot *s) { return s->epoch == t->epoch; }

int us_hashidx_find(const us_hashidx *t, uint64_t hash, us_hashidx_eq eq, const void *key, void *ctx) {
    if (t->n == 0) return -1;
    size_t mask = t->cap - 1;
    for (size_t h = hash & mask; live(t, &t->slot[h]); h = (h + 1) & mask)
        if (t->slot[h].hash == hash && eq(t->slot[h].id, key, ctx)) return t->slot[h].id;
    return -1;
}

static void put(us_hashidx_slot *slot, size_t cap, uint32_t epoch, uint64_t hash, int id) {
    size_t mask = cap - 1, h = hash & mask;
    while (slot[h].epoch == epoch) h = (h + 1) & mask;
    slot[h] = (us_hashidx_slot){hash, epoch, id};
}

int us_hashidx_add(us_hashidx *t, uint64_t hash, int id) {
    if (t->epoch == 0) t->epoch = 1;  /* a zeroed table: its zeroed slots are empty */
    if (2 * (t->n + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        /* calloc: epoch 0 is never a live table's, so every slot is empty */
        us_hashidx_slot *slot = calloc(cap, sizeof *slot);
        if (!slot) return -1;
        for (size_t k = 0; k < t->cap; k++)
            if (live(t, &t->slot[k])) put(slot, cap, t->epoch, t->slot[k].hash, t->slot[k].id);
        free(t->slot);
        t->slot = slot;
        t->cap = cap;
    }
    put(t->slot, t->cap, t->epoch, hash, id);
    t->n++;
    return 0;
}

void us_hashidx_clear(us_hashidx *t) {
    t->n = 0;
    if (++t->epoch == 0) {
        /* after 2^32 clears the epochs come round: start the slots afresh */
        if (t->slot) memset(t->slot, 0, t->cap * sizeof *t->slot);
        t->epoch = 1;
    }
}

void us_hashidx_free(us_hashidx *t) {
    free(t->slot);
    memset(t, 0, sizeof *t);
}

/* ---- hashes --------------------------------------------------------------- */

uint64_t us_hash_bytes(uint64_t h, const void *data, size_t n) {
    const unsigned char *s = data;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    return h;
}

/* The shift folds high bits down, as a table's slot is the hash's low bits
 * and memory sizes differ only in high ones.  A tail of fewer than 8 bytes
 * is one more word, zero-padded, with its length in the top byte: byte by
 * byte it was a chain of up to 7 dependent multiplications, most of what
 * hashing a node's class key cost (nodeclass.c, every node every cycle). */
static inline uint64_t mix_word(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 32);
}

uint64_t us_hash_words(uint64_t h, const void *data, size_t n) {
    const unsigned char *s = data;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, sizeof w);
        h = mix_word(h, w);
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, s + i, n - i);
        h = mix_word(h, w ^ ((uint64_t)(n - i) << 56));
    }
    return h;
}

/* A word at a time: label keys and values are hashed for every node of a
 * large cluster each cycle (node classes), and byte by byte that was a
 * tenth of a quiet cycle's class building. */
uint64_t us_hash_str(uint64_t h, const char *s) { return us_hash_words(h, s, strlen(s) + 1); }

uint64_t us_hash_labels(uint64_t h, const us_labels *l) {
    for (size_t i = 0; i < l->n; i++) h = us_hash_str(us_hash_str(h, l->items[i].key), l->items[i].value);
    return us_hash_words(h, &l->n, sizeof l->n);
}

uint64_t us_hash_taints(uint64_t h, const us_taints *t) {
    for (size_t i = 0; i < t->n; i++)
        h = us_hash_bytes(us_hash_str(us_hash_str(h, t->items[i].key), t->items[i].value),
                          &t->items[i].effect, sizeof t->items[i].effect);
    return us_hash_words(h, &t->n, sizeof t->n);
}

uint64_t us_hash_tolerations(uint64_t h, const us_tolerations *t) {
    for (size_t i = 0; i < t->n; i++) {
        const us_toleration_item *x = &t->items[i];
        unsigned char exists = x->exists;
        h = us_hash_bytes(us_hash_str(us_hash_str(h, x->key), x->value), &exists, 1);
        h = us_hash_bytes(h, &x->effect, sizeof x->effect);
    }
    return us_hash_words(h, &t->n, sizeof t->n);
}

/* MurmurHash3's finaliser */
uint64_t us_hash_finish(uint64_t h) {
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    return h ^ (h >> 33);
}
