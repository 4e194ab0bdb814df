/*
 * test_rollup.c — the readable account's rollup: which workload a
 * decision's pod belongs to, found by name lookups, against the plain scan
 * of every workload it replaced, on random names full of dashes, repeated
 * workload names and DaemonSets whose pods end in node names; and a
 * cycle's decisions grouped per workload as before.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rollup.h"

typedef struct rng {
    uint64_t s;
} rng;

static int pick(rng *r, int n) {
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return (int)(r->s % (uint64_t)n);
}

/* The scan the lookups replaced: the longest workload name followed by
 * '-' and digits (or, for a DaemonSet, a node's name); the first of equal
 * names that matches. */
static bool all_digits(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

static int model_workload_of(const us_state *st, const char *pod) {
    int best = -1;
    size_t best_len = 0;
    for (size_t w = 0; w < st->nworkloads; w++) {
        const us_workload *wl = &st->workloads[w];
        size_t len = strlen(wl->name);
        if (strncmp(pod, wl->name, len) != 0 || pod[len] != '-') continue;
        const char *rest = pod + len + 1;
        bool match = false;
        if (wl->controller == US_CTRL_DAEMONSET)
            for (size_t n = 0; n < st->nnodes && !match; n++) match = strcmp(rest, st->nodes[n].name) == 0;
        else
            match = all_digits(rest);
        if (match && (best < 0 || len > best_len)) {
            best = (int)w;
            best_len = len;
        }
    }
    return best;
}

/* Names of one to three parts joined by '-', from a small alphabet, so
 * that prefixes of one another and digits-only parts are common. */
static void random_name(rng *r, char *buf, size_t len) {
    static const char *parts[] = {"a", "b", "1", "2", "a1", "burn", "n1", "10"};
    int n = 1 + pick(r, 3);
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i) strncat(buf, "-", len - strlen(buf) - 1);
        strncat(buf, parts[pick(r, 8)], len - strlen(buf) - 1);
    }
}

TEST(a_pods_workload_is_the_one_the_scan_of_every_workload_finds) {
    int checked = 0, found = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rng r = {seed * 0x9E3779B97F4A7C15ULL};
        us_state st;
        us_state_init(&st);
        char name[64];
        int nn = 1 + pick(&r, 5), nw = 1 + pick(&r, 8);
        for (int i = 0; i < nn; i++) {
            us_node n = {0};
            random_name(&r, name, sizeof name);
            n.name = strdup(name);
            CHECK(n.name && us_state_add_node(&st, &n) >= 0);
        }
        for (int i = 0; i < nw; i++) {
            us_workload w = {0};
            random_name(&r, name, sizeof name);
            w.name = strdup(name);  /* repeats happen: a removed workload and its successor */
            w.controller = pick(&r, 3) == 0 ? US_CTRL_DAEMONSET : US_CTRL_JOB;
            CHECK(w.name && us_state_add_workload(&st, &w) >= 0);
        }
        us_rollup_names *ix = us_rollup_names_new(&st);
        CHECK(ix != NULL);
        for (int k = 0; ix && k < 200; k++) {
            char pod[160], tail[64];
            /* a workload's name (or a random one), '-', then digits, a node
             * name or another random name */
            if (pick(&r, 4)) snprintf(pod, 64, "%s", st.workloads[pick(&r, nw)].name);
            else random_name(&r, pod, 64);
            int t = pick(&r, 3);
            if (t == 0) snprintf(tail, sizeof tail, "%d", pick(&r, 30));
            else if (t == 1) snprintf(tail, sizeof tail, "%s", st.nodes[pick(&r, nn)].name);
            else random_name(&r, tail, sizeof tail);
            strcat(pod, "-");
            strcat(pod, tail);
            int want = model_workload_of(&st, pod), got = us_rollup_workload_of(ix, pod);
            if (got != want) printf("  seed %llu: pod \"%s\": %d, the scan finds %d\n", (unsigned long long)seed, pod, got, want);
            CHECK(got == want);
            checked++;
            found += want >= 0;
        }
        CHECK(us_rollup_workload_of(ix, NULL) == -1);
        us_rollup_names_free(ix);
        us_state_free(&st);
    }
    /* both outcomes were exercised, not only misses */
    CHECK(found > checked / 4 && found < checked);
}

TEST(a_long_pod_name_is_looked_up_whole) {
    us_state st;
    us_state_init(&st);
    char big[600];
    memset(big, 'x', 500);
    big[500] = '\0';
    us_workload w = {0};
    w.name = strdup(big);
    w.controller = US_CTRL_JOB;
    CHECK(w.name && us_state_add_workload(&st, &w) >= 0);
    us_rollup_names *ix = us_rollup_names_new(&st);
    CHECK(ix != NULL);
    strcat(big, "-12");
    if (ix) CHECK(us_rollup_workload_of(ix, big) == 0);
    us_rollup_names_free(ix);
    us_state_free(&st);
}

int main(void) {
    RUN(a_pods_workload_is_the_one_the_scan_of_every_workload_finds);
    RUN(a_long_pod_name_is_looked_up_whole);
    return check_report();
}
