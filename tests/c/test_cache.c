/*
 * test_cache.c — serve's caches of objects by key, sorted and unordered,
 * against a plain table: the same answers after every put and drop, the
 * sorted one walked in key order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "check.h"

enum { KEYS = 2000, STEPS = 60000 };

static void churn(bool unordered) {
    static char keys[KEYS][32];
    static int in[KEYS];  /* -1: not in, else the number put */
    sv_cache c = {0};
    if (unordered) sv_cache_unordered(&c);
    unsigned long x = unordered ? 7 : 11;
    for (int i = 0; i < KEYS; i++) {
        snprintf(keys[i], sizeof keys[i], "ns/pod-%d", i);
        in[i] = -1;
    }
    int bad = 0;
    for (int step = 0; step < STEPS && !bad; step++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        int i = (int)((x >> 33) % KEYS), op = (int)((x >> 20) % 3);
        if (op < 2) {
            bad |= sv_cache_put(&c, keys[i], cJSON_CreateNumber(step), step) != 0;
            in[i] = step;
        } else {
            sv_cache_drop(&c, keys[i]);
            in[i] = -1;
        }
        const cJSON *o = sv_cache_lookup(&c, keys[i]);
        bad |= in[i] < 0 ? o != NULL : !o || o->valueint != in[i];
        bad |= sv_cache_has(&c, keys[i]) != (in[i] >= 0);
    }
    CHECK(!bad);
    size_t n = 0;
    for (int i = 0; i < KEYS; i++) {
        const cJSON *o = sv_cache_lookup(&c, keys[i]);
        n += in[i] >= 0;
        CHECK(in[i] < 0 ? o == NULL : o && o->valueint == in[i]);
    }
    CHECK(c.n == n);
    /* every entry is one of the keys, with its own object and time */
    for (size_t k = 0; k < c.n; k++) {
        int i = atoi(strchr(c.keys[k], '-') + 1);
        CHECK(in[i] >= 0 && c.objs[k]->valueint == in[i] && c.when[k] == in[i]);
        if (!unordered && k > 0) CHECK(strcmp(c.keys[k - 1], c.keys[k]) < 0);
    }
    sv_cache_clear(&c);
    CHECK(c.n == 0 && c.unordered == unordered && !sv_cache_has(&c, keys[0]));
    /* usable again after a clear */
    CHECK(sv_cache_put(&c, keys[1], cJSON_CreateTrue(), 0) == 0 && sv_cache_lookup(&c, keys[1]));
    sv_cache_clear(&c);
}

TEST(sorted_cache_churn) { churn(false); }
TEST(unordered_cache_churn) { churn(true); }

int main(void) {
    RUN(sorted_cache_churn);
    RUN(unordered_cache_churn);
    return check_report();
}
