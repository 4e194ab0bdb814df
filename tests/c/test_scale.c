/*
 * test_scale.c — valid input at sizes where a quadratic path would never
 * finish (issue 13): a workload scaled from 300,000 replicas to 1, a queue
 * chain 100,000 deep loaded from a scenario, a chain of 4,000 queues built
 * one upsert at a time through the API.  Each checks what the result must
 * be, against the plain definition (the oldest running pod survives; a
 * queue's depth is the length of its walk to the root).
 *
 * The binary stops itself after LIVENESS_SECONDS: today's quadratic paths
 * take minutes to hours here, the linear ones about a second.  That is a
 * bound on hanging, not a benchmark (make bench has the figures).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "scenario.h"
#include "state.h"
#include "understory.h"

#define LIVENESS_SECONDS 120

/* Depth by definition: the number of steps up to the root. */
static int walk_depth(const us_state *st, int q) {
    int d = 0;
    for (int p = st->queues[q].parent; p >= 0; p = st->queues[p].parent) d++;
    return d;
}

TEST(scale_down_300000_to_1_keeps_the_oldest_running_pod) {
    us_engine *e = NULL;
    us_error err;
    us_node_spec n = {0};
    us_queue_spec q;
    us_workload_spec w;
    us_pod_info p;
    size_t running = 0;
    const char *oldest = NULL;
    CHECK(us_engine_create(NULL, &e, &err) == US_OK);
    if (!e) return;
    n.name = "n1";
    n.capacity = (us_resources){8, 64000, 1LL << 40};
    CHECK(us_engine_upsert_node(e, &n, &err) == US_OK);
    us_queue_spec_init(&q);
    q.name = "q";
    q.quota.gpu = 8;
    CHECK(us_engine_upsert_queue(e, &q, &err) == US_OK);
    us_workload_spec_init(&w);
    w.name = "w";
    w.queue = "q";
    w.replicas = 300000;
    w.min_member = 1; /* not a gang: 8 run, the rest wait */
    w.requests = (us_resources){1, 100, 1 << 20};
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(us_engine_pod_count(e) == 300000);
    /* pods are listed in creation order: the first running one is the oldest */
    for (size_t i = 0; i < us_engine_pod_count(e); i++)
        if (us_engine_pod(e, i, &p) == US_OK && p.phase == US_PHASE_RUNNING && running++ == 0)
            oldest = p.name;
    CHECK(running == 8);
    char *keep = oldest ? strdup(oldest) : NULL;
    w.replicas = 1;
    CHECK(us_engine_upsert_workload(e, &w, 1, &err) == US_OK);
    /* the 299,992 pending pods vanish, 7 of the running terminate */
    running = 0;
    size_t releasing = 0, other = 0;
    for (size_t i = 0; i < us_engine_pod_count(e); i++) {
        if (us_engine_pod(e, i, &p) != US_OK) continue;
        if (p.phase == US_PHASE_RUNNING) {
            running++;
            CHECK_STR(p.name, keep);
        } else if (p.phase == US_PHASE_RELEASING) {
            releasing++;
        } else {
            other++;
        }
    }
    CHECK(running == 1 && releasing == 7 && other == 0);
    free(keep);
    us_engine_destroy(e);
}

TEST(queue_chain_100000_deep_loads_with_its_depths) {
    size_t n = 100000, cap = n * 64 + 256, len = 0;
    char *json = malloc(cap);
    us_scenario sc;
    us_err err = {0};
    if (!json) {
        CHECK(0);
        return;
    }
    len += (size_t)snprintf(json + len, cap - len,
                            "{\"name\": \"chain\", \"nodes\": [], \"workloads\": [], \"queues\": [");
    /* listed leaf first, so that no queue's parent comes before it */
    for (size_t i = n; i-- > 0;) {
        if (i + 1 < n) json[len++] = ',';
        if (i == 0) len += (size_t)snprintf(json + len, cap - len, "{\"name\": \"q0\"}");
        else len += (size_t)snprintf(json + len, cap - len, "{\"name\": \"q%zu\", \"parent\": \"q%zu\"}", i, i - 1);
    }
    len += (size_t)snprintf(json + len, cap - len, "]}");
    CHECK(us_scenario_load_string(&sc, json, len, NULL, &err) == 0);
    free(json);
    if (err.msg[0]) fprintf(stderr, "  %s\n", err.msg);
    CHECK(sc.state.nqueues == n);
    /* q<i> is listed at n - 1 - i and is i deep; only the deepest is a leaf */
    for (size_t k = 0; k < sc.state.nqueues; k++) {
        const us_queue *q = &sc.state.queues[k];
        if (q->depth != (int)(n - 1 - k) || q->leaf != (k == 0)) {
            CHECK(q->depth == (int)(n - 1 - k) && q->leaf == (k == 0));
            break;
        }
    }
    /* the definition, on a sample (the walk itself is quadratic overall) */
    for (size_t k = 0; k < sc.state.nqueues; k += 9973)
        CHECK(sc.state.queues[k].depth == walk_depth(&sc.state, (int)k));
    us_scenario_free(&sc);
}

/* Depths match the definition on random forests, listed in any order. */
TEST(queue_depths_match_the_walk_on_random_forests) {
    unsigned seed = 13;
    for (int round = 0; round < 200; round++) {
        us_state st;
        size_t n = 1 + (size_t)(rand_r(&seed) % 60);
        int *order = malloc(n * sizeof *order);
        us_state_init(&st);
        if (!order) {
            CHECK(0);
            return;
        }
        /* a random tree over a random permutation: parent earlier in the
         * permutation, so no cycles; the state lists queues in index order */
        for (size_t i = 0; i < n; i++) order[i] = (int)i;
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)rand_r(&seed) % i;
            int t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
        for (size_t i = 0; i < n; i++) {
            us_queue q;
            char name[32];
            memset(&q, 0, sizeof q);
            snprintf(name, sizeof name, "q%zu", i);
            q.name = strdup(name);
            q.parent = -1;
            if (!q.name || us_state_add_queue(&st, &q) < 0) {
                CHECK(0);
                break;
            }
        }
        for (size_t i = 1; i < n && st.nqueues == n; i++)
            if (rand_r(&seed) % 4)
                st.queues[order[i]].parent = order[(size_t)rand_r(&seed) % i];
        us_state_derive_queues(&st);
        for (size_t i = 0; i < st.nqueues; i++) {
            bool leaf = true;
            for (size_t k = 0; k < st.nqueues; k++) leaf = leaf && st.queues[k].parent != (int)i;
            CHECK(st.queues[i].depth == walk_depth(&st, (int)i));
            CHECK(st.queues[i].leaf == leaf);
        }
        free(order);
        us_state_free(&st);
    }
}

TEST(queue_chain_of_4000_upserts_through_the_api) {
    us_engine *e = NULL;
    us_error err;
    us_queue_spec q;
    us_queue_info info;
    char name[32], parent[32];
    CHECK(us_engine_create(NULL, &e, &err) == US_OK);
    if (!e) return;
    for (int i = 0; i < 4000; i++) {
        us_queue_spec_init(&q);
        snprintf(name, sizeof name, "q%d", i);
        snprintf(parent, sizeof parent, "q%d", i - 1);
        q.name = name;
        q.parent = i ? parent : NULL;
        if (us_engine_upsert_queue(e, &q, &err) != US_OK) {
            CHECK(0);
            fprintf(stderr, "  q%d: %s\n", i, err.message);
            break;
        }
    }
    CHECK(us_engine_queue_count(e) == 4000);
    CHECK(us_engine_queue(e, 3999, &info) == US_OK);
    CHECK_STR(info.parent, "q3998");
    /* a cycle is still refused, however deep */
    us_queue_spec_init(&q);
    q.name = "q0";
    q.parent = "q3999";
    CHECK(us_engine_upsert_queue(e, &q, &err) == US_EINVAL);
    CHECK_HAS(err.message, "is below this queue: that would make a cycle");
    us_engine_destroy(e);
}

int main(void) {
    alarm(LIVENESS_SECONDS);
    RUN(scale_down_300000_to_1_keeps_the_oldest_running_pod);
    RUN(queue_chain_100000_deep_loads_with_its_depths);
    RUN(queue_depths_match_the_walk_on_random_forests);
    RUN(queue_chain_of_4000_upserts_through_the_api);
    return check_report();
}
