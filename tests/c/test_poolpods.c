/*
 * test_poolpods.c — the pods each node pool's snapshot reads (poolpods.h):
 * each pool's list is exactly the pods of its workloads and the pods on
 * its nodes, in pod order, whether pools are told by the ledger's numbers
 * or by name; pods appended after the lists were made are read by every
 * pool; a compaction since voids them; one pool makes none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ledger.h"
#include "lifecycle.h"
#include "poolpods.h"
#include "scenario.h"

/* Three pools with nodes (a, b, c: c's nodes hold nothing) and one without
 * (d, whose work stays pending), pods running, pending and terminating,
 * AI and background, a DaemonSet in two pools. */
static const char *three_pools =
    "{\"name\": \"pools\", \"nodes\": ["
    " {\"name\": \"a1\", \"gpu\": 8, \"cpu\": 64, \"memory\": \"512Gi\", \"pool\": \"a\"},"
    " {\"name\": \"b1\", \"gpu\": 8, \"cpu\": 64, \"memory\": \"512Gi\", \"pool\": \"b\"},"
    " {\"name\": \"a2\", \"gpu\": 8, \"cpu\": 64, \"memory\": \"512Gi\", \"pool\": \"a\"},"
    " {\"name\": \"c1\", \"gpu\": 8, \"cpu\": 64, \"memory\": \"512Gi\", \"pool\": \"c\"},"
    " {\"name\": \"b2\", \"gpu\": 8, \"cpu\": 64, \"memory\": \"512Gi\", \"pool\": \"b\"}],"
    " \"queues\": [{\"name\": \"q\"}],"
    " \"workloads\": ["
    "  {\"name\": \"train-a\", \"queue\": \"q\", \"pool\": \"a\", \"replicas\": 3,"
    "   \"requests\": {\"gpu\": 2}, \"pods\": [{\"node\": \"a1\", \"state\": \"running\"},"
    "   {\"node\": \"a2\", \"state\": \"running\"}]},"
    "  {\"name\": \"serve-b\", \"queue\": \"q\", \"pool\": \"b\", \"controller\": \"deployment\","
    "   \"replicas\": 2, \"requests\": {\"gpu\": 1}, \"termination_grace\": 30,"
    "   \"pods\": [{\"node\": \"b2\", \"state\": \"running\"}]},"
    "  {\"name\": \"burn-a\", \"queue\": \"q\", \"pool\": \"a\", \"controller\": \"deployment\","
    "   \"replicas\": 2, \"labels\": {\"kai.scheduler/background\": \"true\"},"
    "   \"requests\": {\"gpu\": 1}, \"pods\": [{\"node\": \"a2\", \"state\": \"running\"}]},"
    "  {\"name\": \"agent-b\", \"queue\": \"q\", \"pool\": \"b\", \"controller\": \"daemonset\","
    "   \"labels\": {\"kai.scheduler/background\": \"true\"}, \"requests\": {\"cpu\": 1}},"
    "  {\"name\": \"agent-a\", \"queue\": \"q\", \"pool\": \"a\", \"controller\": \"daemonset\","
    "   \"labels\": {\"kai.scheduler/background\": \"true\"}, \"requests\": {\"cpu\": 1}},"
    "  {\"name\": \"wait-d\", \"queue\": \"q\", \"pool\": \"d\", \"replicas\": 2,"
    "   \"requests\": {\"gpu\": 1}}]}";

static const char *const pools[] = {"a", "b", "c", "d"};
enum { NPOOLS = 4 };

/* Is pod i one pool k's snapshot must read: its workload's pool, or its
 * node's? */
static bool of_pool(const us_state *st, size_t i, size_t k) {
    const us_pod *pd = &st->pods[i];
    if (strcmp(st->workloads[pd->workload].pool, pools[k]) == 0) return true;
    return pd->node >= 0 && !st->nodes[pd->node].removed &&
           strcmp(st->nodes[pd->node].pool, pools[k]) == 0;
}

/* Each pool's set is the brute-force list, ascending; how many pods the
 * lists hold in all. */
static size_t check_sets(const us_pool_pods *pp, const us_state *st, const char *how) {
    size_t total = 0;
    for (size_t k = 0; k < NPOOLS; k++) {
        us_pod_set set;
        CHECK(us_pool_pods_set(pp, st, k, &set));
        size_t x = 0;
        for (size_t i = 0; i < set.from; i++) {
            if (!of_pool(st, i, k)) continue;
            if (x >= set.n || (size_t)set.pods[x] != i) {
                printf("  %s: pool %s: pod %zu (%s) missing or out of order\n", how, pools[k], i,
                       st->pods[i].name);
                CHECK(0);
                return total;
            }
            x++;
        }
        if (x != set.n) printf("  %s: pool %s: %zu pods listed, %zu its own\n", how, pools[k], set.n, x);
        CHECK(x == set.n);
        total += set.n;
    }
    return total;
}

TEST(lists_are_each_pools_pods) {
    us_scenario sc;
    us_err err = {0};
    CHECK(us_scenario_load_string(&sc, three_pools, strlen(three_pools), NULL, &err) == 0);
    if (err.msg[0]) printf("  %s\n", err.msg);
    us_state *st = &sc.state;
    bool any = false;
    CHECK(us_life_submit_due(st, 0, &any) == 0);
    /* one of serve-b's pods terminates on b2, and train-a's third waits */
    for (size_t i = 0; i < st->npods; i++)
        if (strcmp(st->workloads[st->pods[i].workload].name, "serve-b") == 0 &&
            st->pods[i].state == US_POD_RUNNING)
            CHECK(us_life_evict(st, (int)i, 0, false) >= 0);

    /* by name (no ledger), then by the ledger's pool numbers */
    us_pool_pods byname, bynumber;
    CHECK(us_pool_pods_make(&byname, st, NULL, pools, NPOOLS) == 0);
    size_t listed = check_sets(&byname, st, "by name");
    us_ledger l = {0};
    CHECK(us_ledger_take(&l, st) == 0);
    CHECK(us_ledger_workload_pools(&l, st) != NULL);
    CHECK(us_pool_pods_make(&bynumber, st, &l, pools, NPOOLS) == 0);
    CHECK(check_sets(&bynumber, st, "by number") == listed);
    /* every pod is some pool's, none twice here (no pod is on another
     * pool's node), and pool c reads nothing */
    CHECK(listed == st->npods);
    us_pod_set set;
    CHECK(us_pool_pods_set(&bynumber, st, 2, &set) && set.n == 0);

    /* a pod appended since: read by every pool, after its list */
    size_t before = st->npods;
    int w = -1;
    for (size_t k = 0; k < st->nworkloads; k++)
        if (strcmp(st->workloads[k].name, "wait-d") == 0) w = (int)k;
    CHECK(w >= 0 && us_state_add_pod(st, w, "wait-d-late", -1) == (int)before);
    CHECK(us_pool_pods_set(&bynumber, st, 0, &set) && set.from == before &&
          st->npods - set.from == 1);

    /* a compaction since: the lists say nothing any more */
    us_pod_go(st, &st->pods[0]);
    us_state_compact_pods(st);
    CHECK(!us_pool_pods_set(&bynumber, st, 0, &set));
    CHECK(!us_pool_pods_set(&byname, st, 3, &set));

    /* one pool: nothing made, every pod read */
    us_pool_pods one;
    CHECK(us_pool_pods_make(&one, st, NULL, pools, 1) == 0);
    CHECK(!us_pool_pods_set(&one, st, 0, &set));

    us_pool_pods_free(&byname);
    us_pool_pods_free(&bynumber);
    us_pool_pods_free(&one);
    us_ledger_free(&l);
    us_scenario_free(&sc);
}

int main(void) {
    RUN(lists_are_each_pools_pods);
    return check_report();
}
