/*
 * test_strmap.c — the map of names behind the controllers' taken names, the
 * harvest's pods by name and the API's lookups: against a plain list.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "strmap.h"

/* Names that differ only in their digits, as generated pod names do. */
static void name_of(char *buf, size_t len, int i) { snprintf(buf, len, "burn-%d-%d", i % 977, i); }

TEST(every_key_found_with_its_first_value_and_no_other) {
    enum { N = 20000 };
    static char names[N][32];
    us_strmap m = {0};
    for (int i = 0; i < N; i++) {
        name_of(names[i], sizeof names[i], i);
        CHECK(us_strmap_add(&m, names[i], i) == 1);
    }
    CHECK(m.n == N);
    CHECK(4 * m.n <= 3 * m.cap); /* grown, never over three quarters full */
    for (int i = 0; i < N; i++) {
        char other[32];
        name_of(other, sizeof other, i);  /* equal text, another string */
        CHECK(us_strmap_get(&m, other) == i);
        /* adding a name again keeps its first value */
        CHECK(us_strmap_add(&m, other, N + i) == 0);
        CHECK(us_strmap_get(&m, names[i]) == i);
    }
    CHECK(m.n == N);
    CHECK(us_strmap_get(&m, "burn-0") == -1);
    CHECK(us_strmap_get(&m, "") == -1);
    CHECK(us_strmap_get(&m, "burn-1-1 ") == -1);
    us_strmap_free(&m);
    CHECK(m.cap == 0 && m.n == 0 && us_strmap_get(&m, names[0]) == -1);
}

TEST(reserve_keeps_what_is_there_and_sizes_once) {
    us_strmap m = {0};
    CHECK(us_strmap_get(&m, "a") == -1);  /* empty, never allocated */
    CHECK(us_strmap_add(&m, "a", 7) == 1);
    CHECK(us_strmap_add(&m, "b", 8) == 1);
    CHECK(us_strmap_reserve(&m, 100000) == 0);
    size_t cap = m.cap;
    CHECK(4 * 100000 <= 3 * cap);
    CHECK(us_strmap_get(&m, "a") == 7 && us_strmap_get(&m, "b") == 8);
    char (*names)[16] = malloc(100000 * sizeof *names);
    for (int i = 0; names && i < 99998; i++) {
        snprintf(names[i], sizeof names[i], "n%d", i);
        CHECK(us_strmap_add(&m, names[i], i) == 1);
    }
    CHECK(m.cap == cap);  /* no growth within what was reserved */
    CHECK(us_strmap_reserve(&m, 10) == 0 && m.cap == cap);  /* never shrinks */
    CHECK(us_strmap_get(&m, "n99997") == 99997 && us_strmap_get(&m, "a") == 7);
    free(names);
    us_strmap_free(&m);
}

TEST(the_hash_spreads_names_that_differ_in_digits) {
    /* the slot is the hash's low bits and the tag compared before strcmp
     * its high half: 4096 generated names over 8192 slots leave no slot
     * with more than a handful, and no two names share a tag */
    enum { SLOTS = 8192, N = 4096 };
    static int count[SLOTS];
    static unsigned tags[N];
    int worst = 0, same_tag = 0;
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "train-%d", i);
        uint64_t h = us_name_hash(name);
        int c = ++count[h & (SLOTS - 1)];
        if (c > worst) worst = c;
        tags[i] = (unsigned)(h >> 32);
        for (int j = 0; j < i; j++) same_tag += tags[j] == tags[i];
    }
    CHECK(worst <= 8);
    CHECK(same_tag == 0);
}

/* Adds, replacements and removals in a random order, against a plain
 * table of which names are in and with what value: the map must answer as
 * the table does after every step, and its counts must add up (removed
 * slots are reused or freed, so a long churn never fills it). */
TEST(random_churn_answers_as_a_plain_table) {
    enum { NAMES = 3000, STEPS = 200000 };
    static char names[NAMES][24];
    static int value[NAMES];  /* -1: not in */
    us_strmap m = {0};
    unsigned long x = 12345;
    for (int i = 0; i < NAMES; i++) {
        snprintf(names[i], sizeof names[i], "pod-%d", i);
        value[i] = -1;
    }
    int bad = 0;
    for (int step = 0; step < STEPS && !bad; step++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        int i = (int)((x >> 33) % NAMES), op = (int)((x >> 20) % 4);
        if (op == 0) {
            int rc = us_strmap_add(&m, names[i], step);
            bad |= rc != (value[i] < 0 ? 1 : 0);
            if (value[i] < 0) value[i] = step;
        } else if (op == 1) {
            bad |= us_strmap_set(&m, names[i], step) != 0;
            value[i] = step;
        } else if (op == 2) {
            bad |= us_strmap_del(&m, names[i]) != (value[i] >= 0);
            value[i] = -1;
        }
        bad |= us_strmap_get(&m, names[i]) != value[i];
        bad |= 4 * (m.n + m.ntomb) > 3 * m.cap;
    }
    CHECK(!bad);
    size_t in = 0;
    for (int i = 0; i < NAMES; i++) {
        in += value[i] >= 0;
        CHECK(us_strmap_get(&m, names[i]) == value[i]);
    }
    CHECK(m.n == in);
    CHECK(m.cap <= 8192);  /* 3,000 names: removed slots did not make it grow */
    us_strmap_free(&m);
}

int main(void) {
    RUN(every_key_found_with_its_first_value_and_no_other);
    RUN(reserve_keeps_what_is_there_and_sizes_once);
    RUN(the_hash_spreads_names_that_differ_in_digits);
    RUN(random_churn_answers_as_a_plain_table);
    return check_report();
}
