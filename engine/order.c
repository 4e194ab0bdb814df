/*
 * order.c — order hints (see order.h).  The arrangement is one hash of
 * this call's keys and one walk of the remembered ones: linear, whatever
 * changed.
 */
#include "order.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static size_t mix(uint64_t k) { /* splitmix64's finaliser */
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ULL;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebULL;
    k ^= k >> 31;
    return (size_t)k;
}

void us_order_forget(us_order *o) { o->n = 0; }

void us_order_free(us_order *o) {
    free(o->keys);
    memset(o, 0, sizeof *o);
}

/* Put items in the remembered order, newcomers after in the order given;
 * false when memory runs out (items untouched).  The scratch lives for the
 * call only: what is kept between calls is the keys, 8 bytes an item. */
static bool arrange(const us_order *o, int *items, size_t n, us_order_key key, void *ctx) {
    size_t want = 16;
    if (n > INT32_MAX / 2) return false;
    while (want < 2 * n) want *= 2;
    size_t mask = want - 1, m = 0;
    /* a slot holds an item's position, -1 when empty, -2 once taken */
    int32_t *slots = malloc(want * sizeof *slots);
    int *out = malloc((n ? n : 1) * sizeof *out);
    if (!slots || !out) {
        free(slots);
        free(out);
        return false;
    }
    memset(slots, 0xff, want * sizeof *slots);
    for (size_t i = 0; i < n; i++) {
        size_t h = mix(key(items[i], ctx)) & mask;
        while (slots[h] != -1) h = (h + 1) & mask;
        slots[h] = (int32_t)i;
    }
    for (size_t r = 0; r < o->n; r++) {
        uint64_t k = o->keys[r];
        for (size_t h = mix(k) & mask; slots[h] != -1; h = (h + 1) & mask) {
            if (slots[h] >= 0 && key(items[slots[h]], ctx) == k) {
                out[m++] = items[slots[h]];
                items[slots[h]] = -1 - items[slots[h]]; /* taken (items are >= 0) */
                slots[h] = -2;
                break;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        if (items[i] >= 0) out[m++] = items[i];
    memcpy(items, out, n * sizeof *items);
    free(slots);
    free(out);
    return true;
}

int us_order_sort(us_order *o, int *items, size_t n, us_order_key key, us_sort_cmp cmp, void *ctx) {
    if (o->n > 0) (void)arrange(o, items, n, key, ctx); /* without memory: no hint, same result */
    us_sort(items, n, sizeof *items, cmp, ctx);
    if (n > o->cap) {
        uint64_t *k = malloc(n * sizeof *k);
        if (!k) {
            us_order_forget(o);
            return -1;
        }
        free(o->keys);
        o->keys = k;
        o->cap = n;
    }
    for (size_t i = 0; i < n; i++) o->keys[i] = key(items[i], ctx);
    o->n = n;
    return 0;
}
