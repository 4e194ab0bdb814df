/*
 * test_droplog.c — the drop log (engine/droplog.h) maps positions through
 * compactions as the compactions moved the pods.
 *
 * A model array of pod ids goes through random rounds: pods appended,
 * pods dropped (a compaction that records what it drops, keeping the order
 * of the rest), now and then an unrecorded move (an undone append) that
 * clears the log.  Every position ever seen is kept with its generation;
 * after each round, for each that the log still reaches: forward gives
 * where its pod is now (or -1 when it left), back takes it there again,
 * and forward_end counts the pods of a prefix still there.  Deterministic
 * by seed.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "droplog.h"

static unsigned roll(uint64_t *s, unsigned n) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (unsigned)(*s % n);
}

/* where pod id p is at each generation seen: pos[g][p], -1 absent */
#define MAXGEN 64
#define MAXPODS 600

typedef struct model {
    int ids[MAXPODS];  /* the array now: pod ids */
    int n, next_id;
    int pos[MAXGEN][MAXPODS * 8];  /* by generation, pod id -> position */
    int npods_at[MAXGEN];
    uint64_t gen;
} model;

static void snapshot(model *m) {
    for (int p = 0; p < m->next_id; p++) m->pos[m->gen][p] = -1;
    for (int i = 0; i < m->n; i++) m->pos[m->gen][m->ids[i]] = i;
    m->npods_at[m->gen] = m->n;
}

static long followed, reached_not;

static void check_all(const model *m, const us_droplog *l) {
    for (uint64_t g = 0; g <= m->gen; g++) {
        if (!us_droplog_reaches(l, g, m->gen)) {
            reached_not++;
            continue;
        }
        for (int p = 0; p < m->next_id; p++) {
            int then = m->pos[g][p], now = m->pos[m->gen][p];
            if (then < 0) continue;
            CHECK(us_droplog_forward(l, g, then) == now);
            if (now >= 0) CHECK(us_droplog_back(l, g, now) == then);
            followed++;
        }
        /* every position now, a pod appended since g too, goes back and
         * forward to itself */
        for (int i = 0; i < m->n; i++) CHECK(us_droplog_forward(l, g, us_droplog_back(l, g, i)) == i);
        /* the prefix of the first k positions then: how many are left */
        for (int k = 0; k <= m->npods_at[g]; k++) {
            int left = 0;
            for (int p = 0; p < m->next_id; p++)
                left += m->pos[g][p] >= 0 && m->pos[g][p] < k && m->pos[m->gen][p] >= 0;
            CHECK(us_droplog_forward_end(l, g, k) == left);
        }
    }
}

TEST(positions_follow_compactions) {
    static model m;
    long cleared = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ULL;
        us_droplog l = {0};
        memset(&m, 0, sizeof m);
        memset(m.pos, 0xff, sizeof m.pos);  /* -1: a pod not there (yet) */
        snapshot(&m);
        while (m.gen + 1 < MAXGEN && m.next_id < MAXPODS * 8 - 40) {
            int add = (int)roll(&s, 30);
            for (int k = 0; k < add && m.n < MAXPODS; k++) m.ids[m.n++] = m.next_id++;
            if (roll(&s, 12) == 0) {
                /* an undone append: the generation moves without a record */
                if (m.n > 0) m.n -= 1 + (int)roll(&s, (unsigned)m.n);
                m.gen++;
                us_droplog_clear(&l);
                cleared++;
            } else {
                /* a compaction dropping some pods anywhere */
                us_droplog_begin(&l);
                int j = 0;
                for (int i = 0; i < m.n; i++) {
                    if (roll(&s, 4) == 0) {
                        us_droplog_add(&l, (size_t)i);
                        continue;
                    }
                    m.ids[j++] = m.ids[i];
                }
                bool dropped = j != m.n;
                m.n = j;
                if (dropped) m.gen++;
                us_droplog_end(&l, dropped, m.gen);
            }
            snapshot(&m);
            check_all(&m, &l);
        }
        us_droplog_free(&l);
    }
    printf("droplog: %ld positions followed, %ld (generation, now) pairs past the log, %ld logs "
           "cleared\n", followed, reached_not, cleared);
    /* all three happened: positions followed, the ring forgot old ones,
     * unrecorded moves cleared it */
    CHECK(followed > 10000);
    CHECK(reached_not > 100);
    CHECK(cleared > 10);
}

int main(void) {
    RUN(positions_follow_compactions);
    return check_report();
}
