/*
 * test_queues.c — KAI Queue objects into the engine's queue tree
 * (serve/queues.c), with a real engine: a queue whose parent has not come
 * yet waits for it and goes in when it comes, whatever order the informer
 * lists them in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "check.h"
#include "queues.h"
#include "understory.h"

/* Queue "q<i>" (child of "q<parent>", a root when parent < 0) as the API
 * shows it. */
static void send_queue(sv_queues *q, sv_event ev, int i, int parent, int quota) {
    char text[256];
    if (parent >= 0)
        snprintf(text, sizeof text,
                 "{\"metadata\":{\"name\":\"q%d\"},\"spec\":{\"parentQueue\":\"q%d\","
                 "\"resources\":{\"gpu\":{\"quota\":%d}}}}", i, parent, quota);
    else
        snprintf(text, sizeof text,
                 "{\"metadata\":{\"name\":\"q%d\"},\"spec\":{\"resources\":{\"gpu\":{\"quota\":%d}}}}", i, quota);
    cJSON *o = cJSON_Parse(text);
    CHECK(o != NULL);
    if (o) sv_queues_event(q, ev, o);
    cJSON_Delete(o);
}

/* The engine holds exactly the queues want[i] says, each under parent[i]. */
static bool tree_is(const us_engine *e, const bool *want, const int *parent, int n) {
    size_t have = 0, wanted = 0;
    bool ok = true;
    for (int i = 0; i < n; i++) wanted += want[i];
    for (size_t k = 0; k < us_engine_queue_count(e); k++) {
        us_queue_info x;
        int i = -1, p = -1;
        if (us_engine_queue(e, k, &x) != US_OK || sscanf(x.name, "q%d", &i) != 1 || i < 0 || i >= n || !want[i]) {
            ok = false;
            continue;
        }
        have++;
        if (x.parent && sscanf(x.parent, "q%d", &p) != 1) p = -2;
        if (p != parent[i]) {
            fprintf(stderr, "  queue %s under %s, not q%d\n", x.name, x.parent ? x.parent : "nothing", parent[i]);
            ok = false;
        }
    }
    return ok && have == wanted;
}

TEST(a_chain_listed_leaves_first_goes_in_whole_when_its_root_comes) {
    enum { N = 300 };
    us_engine *e = NULL;
    us_error err;
    CHECK(us_engine_create(NULL, &e, &err) == US_OK);
    sv_queues *q = sv_queues_new(e);
    CHECK(q != NULL);
    static int parent[N];
    static bool want[N];
    for (int i = N - 1; i >= 1; i--) { /* q<i> under q<i-1>, deepest first */
        parent[i] = i - 1;
        want[i] = true;
        send_queue(q, SV_ADDED, i, i - 1, 0);
    }
    CHECK(sv_queues_waiting(q) == N - 1);
    CHECK(us_engine_queue_count(e) == 0);
    parent[0] = -1;
    want[0] = true;
    send_queue(q, SV_ADDED, 0, -1, 8);
    CHECK(sv_queues_waiting(q) == 0);
    CHECK(tree_is(e, want, parent, N));
    sv_queues_free(q);
    us_engine_destroy(e);
}

/* Random trees listed in random orders, some queues sent again, some
 * leaves deleted: in the end every queue is in, under its parent, and
 * none waits. */
TEST(random_trees_in_any_order_end_whole) {
    enum { N = 200 };
    for (unsigned seed = 1; seed <= 20; seed++) {
        unsigned x = seed * 2654435761u;
        us_engine *e = NULL;
        us_error err;
        CHECK(us_engine_create(NULL, &e, &err) == US_OK);
        sv_queues *q = sv_queues_new(e);
        int parent[N], order[N];
        bool want[N], sent[N];
        for (int i = 0; i < N; i++) {
            x = x * 1103515245u + 12345u;
            parent[i] = i == 0 ? -1 : (int)((x >> 8) % (unsigned)i); /* q0 the root */
            order[i] = i;
            want[i] = sent[i] = false;
        }
        for (int i = N - 1; i > 0; i--) {
            x = x * 1103515245u + 12345u;
            int j = (int)((x >> 8) % (unsigned)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int k = 0; k < N; k++) {
            int i = order[k];
            send_queue(q, SV_ADDED, i, parent[i], 0);
            sent[i] = want[i] = true;
            x = x * 1103515245u + 12345u;
            /* now and then a queue listed before is sent again (its quota changed) */
            int a = order[(x >> 8) % (unsigned)(k + 1)];
            if ((x >> 4) % 5 == 0) send_queue(q, SV_MODIFIED, a, parent[a], 1);
        }
        /* leaves deleted: no queue is under them */
        for (int i = N - 1; i > 0; i--) {
            bool leaf = true;
            for (int c = i + 1; c < N && leaf; c++) leaf = !(want[c] && parent[c] == i);
            x = x * 1103515245u + 12345u;
            if (leaf && (x >> 8) % 4 == 0) {
                send_queue(q, SV_DELETED, i, parent[i], 0);
                want[i] = false;
            }
        }
        CHECK(sv_queues_waiting(q) == 0);
        bool ok = tree_is(e, want, parent, N);
        if (!ok) fprintf(stderr, "  seed %u\n", seed);
        CHECK(ok);
        sv_queues_free(q);
        us_engine_destroy(e);
    }
}

int main(void) {
    RUN(a_chain_listed_leaves_first_goes_in_whole_when_its_root_comes);
    RUN(random_trees_in_any_order_end_whole);
    return check_report();
}
