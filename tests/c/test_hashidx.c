/*
 * test_hashidx.c — ids by hash (the pod classes', failed victim searches'
 * and re-offer groups' tables): against a plain scan of the keys, with
 * hashes that collide on purpose, clears between rounds, and the epoch
 * coming round; and the key hashes: equal keys hash the same, keys that
 * differ in one part hash apart.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hashidx.h"

typedef struct keys {
    int v[4096];
    int n;
} keys;

static bool same_value(int id, const void *key, void *ctx) {
    const keys *k = ctx;
    return k->v[id] == *(const int *)key;
}

/* A weak hash on purpose: many distinct keys share it, so equality decides. */
static uint64_t weak(int v) { return (uint64_t)(v % 37); }

static int scan(const keys *k, int v) {
    for (int i = 0; i < k->n; i++)
        if (k->v[i] == v) return i;
    return -1;
}

TEST(finds_what_a_scan_finds_through_collisions_and_clears) {
    uint64_t r = 88172645463325252ULL;
    us_hashidx t = {0};
    keys k;
    CHECK(us_hashidx_find(&t, 5, same_value, &(int){5}, &k) == -1); /* zeroed: empty */
    for (int round = 0; round < 20; round++) {
        k.n = 0;
        us_hashidx_clear(&t);
        CHECK(t.n == 0);
        int adds = 1 + round * 200;
        for (int i = 0; i < 3 * adds; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            int v = (int)(r % (uint64_t)(2 * adds));
            int want = scan(&k, v);
            uint64_t h = round % 2 ? weak(v) : us_hash_finish(us_hash_words(US_HASH_SEED, &v, sizeof v));
            int got = us_hashidx_find(&t, h, same_value, &v, &k);
            if (got != want) printf("  round %d: value %d: found %d, a scan finds %d\n", round, v, got, want);
            CHECK(got == want);
            if (want < 0 && k.n < (int)(sizeof k.v / sizeof k.v[0])) {
                CHECK(us_hashidx_add(&t, h, k.n) == 0);
                k.v[k.n++] = v;
            }
        }
        CHECK(t.n == (size_t)k.n);
        CHECK(2 * t.n <= t.cap); /* grown, never over half full */
    }
    us_hashidx_free(&t);
    CHECK(t.cap == 0 && t.n == 0);
}

TEST(a_clear_empties_the_table_even_when_the_epoch_comes_round) {
    us_hashidx t = {0};
    keys k = {{7, 8}, 2};
    CHECK(us_hashidx_add(&t, 1, 0) == 0); /* written in epoch 1 */
    CHECK(us_hashidx_find(&t, 1, same_value, &(int){7}, &k) == 0);
    us_hashidx_clear(&t);
    CHECK(us_hashidx_find(&t, 1, same_value, &(int){7}, &k) == -1);
    t.epoch = UINT32_MAX - 1; /* as after 2^32 - 3 more clears */
    us_hashidx_clear(&t);
    CHECK(t.epoch == UINT32_MAX && t.n == 0);
    CHECK(us_hashidx_add(&t, 2, 1) == 0);
    CHECK(us_hashidx_find(&t, 2, same_value, &(int){8}, &k) == 1);
    us_hashidx_clear(&t); /* comes round to epoch 1: every slot wiped */
    CHECK(t.epoch == 1 && t.n == 0);
    for (size_t s = 0; s < t.cap; s++) CHECK(t.slot[s].epoch == 0);
    CHECK(us_hashidx_find(&t, 2, same_value, &(int){8}, &k) == -1);
    /* the slot written in the first epoch 1 did not come back with it */
    CHECK(us_hashidx_find(&t, 1, same_value, &(int){7}, &k) == -1);
    CHECK(us_hashidx_add(&t, 1, 1) == 0);
    CHECK(us_hashidx_find(&t, 1, same_value, &(int){8}, &k) == 1);
    us_hashidx_free(&t);
}

static uint64_t hl(const us_labels *l) { return us_hash_finish(us_hash_labels(US_HASH_SEED, l)); }
static uint64_t ht(const us_tolerations *t) { return us_hash_finish(us_hash_tolerations(US_HASH_SEED, t)); }

TEST(equal_keys_hash_the_same_and_one_part_changed_hashes_apart) {
    char ka[] = "zone", va[] = "a", kb[] = "zone", vb[] = "a", vc[] = "b", kd[] = "zon", ve[] = "ea";
    us_kv a[] = {{ka, va}}, b[] = {{kb, vb}}, c[] = {{ka, vc}}, d[] = {{kd, ve}};
    us_labels la = {a, 1}, lb = {b, 1}, lc = {c, 1}, ld = {d, 1}, none = {NULL, 0};
    CHECK(hl(&la) == hl(&lb)); /* equal text in other strings */
    CHECK(hl(&la) != hl(&lc));
    CHECK(hl(&la) != hl(&ld)); /* "zone"="a" is not "zon"="ea": the parts are delimited */
    CHECK(hl(&la) != hl(&none));
    char key[] = "gpu", val[] = "", val2[] = "only";
    us_toleration_item x = {key, val, true, US_EFFECT_ANY}, y = {key, val, false, US_EFFECT_ANY},
                       z = {key, val2, false, US_EFFECT_ANY};
    us_tolerations tx = {&x, 1}, ty = {&y, 1}, tz = {&z, 1}, tx2 = {&x, 1};
    CHECK(ht(&tx) == ht(&tx2));
    CHECK(ht(&tx) != ht(&ty)); /* Exists is not Equal */
    CHECK(ht(&ty) != ht(&tz));
}

int main(void) {
    RUN(finds_what_a_scan_finds_through_collisions_and_clears);
    RUN(a_clear_empties_the_table_even_when_the_epoch_comes_round);
    RUN(equal_keys_hash_the_same_and_one_part_changed_hashes_apart);
    return check_report();
}
