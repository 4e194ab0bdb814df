/*
 * test_engine.c — C unit tests where a C function is the thing under test:
 * device accounting (plan.c), controller lifecycle (lifecycle.c), the cycle
 * run directly on a loaded state with the built-in policies (cycle.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cycle.h"
#include "lifecycle.h"
#include "plan.h"
#include "scenario.h"
#include "sim.h"
#include "sort.h"

static us_node node8(void) {
    us_node n = {0};
    n.gpus = 8;
    n.cap.v[US_GPU] = 8 * US_GPU_UNIT;
    n.cap.v[US_CPU] = 64000;
    n.cap.v[US_MEM] = 1LL << 36;
    return n;
}

static us_res gpu(double g) {
    us_res r = {{0}};
    r.v[US_GPU] = (int64_t)(g * US_GPU_UNIT);
    return r;
}

TEST(whole_gpus_are_counted) {
    us_node n = node8();
    us_use u = {0};
    CHECK(us_use_fits(&u, &n, gpu(8), -1));
    CHECK(!us_use_fits(&u, &n, gpu(9), -1));
    us_use_add(&u, &n, gpu(6), -1);
    CHECK(us_use_free_gpus(&u, &n) == 2);
    CHECK(!us_use_fits(&u, &n, gpu(3), -1));
    us_use_remove(&u, gpu(6), -1);
    CHECK(us_use_free_gpus(&u, &n) == 8);
}

TEST(fractions_share_a_device_up_to_one) {
    us_node n = node8();
    n.gpus = 1;
    n.cap.v[US_GPU] = US_GPU_UNIT;
    us_use u = {0};
    int s1 = us_use_add(&u, &n, gpu(0.5), -1);
    CHECK(s1 == 0);
    CHECK(us_use_fits(&u, &n, gpu(0.5), -1));
    CHECK(!us_use_fits(&u, &n, gpu(0.75), -1));
    int s2 = us_use_add(&u, &n, gpu(0.5), -1);
    CHECK(s2 == s1);
    CHECK(!us_use_fits(&u, &n, gpu(0.1), -1));
}

TEST(a_device_in_fractional_use_is_not_free_for_whole_pods) {
    us_node n = node8();
    us_use u = {0};
    us_use_add(&u, &n, gpu(0.25), -1);
    CHECK(us_use_free_gpus(&u, &n) == 7);
    CHECK(!us_use_fits(&u, &n, gpu(8), -1));
    CHECK(us_use_fits(&u, &n, gpu(7), -1));
    /* a second fraction packs onto the device already shared */
    us_use_add(&u, &n, gpu(0.5), -1);
    CHECK(us_use_free_gpus(&u, &n) == 7);
}

static int load(us_scenario *sc, const char *json) {
    us_err err = {0};
    int rc = us_scenario_load_string(sc, json, strlen(json), NULL, &err);
    if (rc < 0) fprintf(stderr, "  load: %s\n", err.msg);
    return rc;
}

static const char *two_nodes_bg =
    "{\"name\":\"t\",\"nodes\":[{\"name\":\"n1\",\"gpu\":8},{\"name\":\"n2\",\"gpu\":8}],"
    "\"queues\":[{\"name\":\"ml\",\"resources\":{\"gpu\":{\"quota\":16}}},"
    "{\"name\":\"bg\",\"resources\":{\"gpu\":{\"quota\":0,\"over_quota_weight\":0},"
    "\"cpu\":{\"quota\":0,\"over_quota_weight\":0},\"memory\":{\"quota\":0,\"over_quota_weight\":0}}}],"
    "\"workloads\":[{\"name\":\"agent\",\"queue\":\"bg\",\"controller\":\"daemonset\","
    "\"labels\":{\"kai.scheduler/background\":\"true\"},\"requests\":{\"gpu\":4},\"termination_grace\":5},"
    "{\"name\":\"train\",\"queue\":\"ml\",\"requests\":{\"gpu\":8},\"submit_at\":10}]}";

TEST(daemonset_pods_one_per_node_and_recreated_pinned) {
    us_scenario sc;
    if (load(&sc, two_nodes_bg) < 0) {
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    int agent = us_state_workload_index(st, "agent");
    CHECK(us_life_submit(st, agent, 0) == 0);
    CHECK(st->npods == 2);
    CHECK_STR(st->pods[0].name, "agent-n1");
    CHECK(st->pods[0].pin == us_state_node_index(st, "n1"));
    /* running on n1, then evicted: releasing plus a new pending pod, same name and pin */
    st->pods[0].state = US_POD_RUNNING;
    st->pods[0].node = st->pods[0].pin;
    int fresh = us_life_evict(st, 0, 10, false);
    CHECK(fresh == 2);
    CHECK(st->pods[0].state == US_POD_RELEASING);
    CHECK(st->pods[0].release_at == 15);
    CHECK_STR(st->pods[2].name, "agent-n1");
    CHECK(st->pods[2].state == US_POD_PENDING);
    CHECK(st->pods[2].pin == st->pods[0].pin);
    CHECK(us_life_expire(st, 14) == 0);
    CHECK(st->npods == 3);
    CHECK(us_life_expire(st, 15) == 0);
    CHECK(st->npods == 2);
    us_scenario_free(&sc);
}

/* A pinned pod (not a DaemonSet's) lost with its node waits for that node,
 * though another has room; its unpinned twin moves there. */
TEST(pinned_pod_waits_for_its_node_in_the_simulator) {
    us_scenario sc;
    us_sim_result res = {0};
    us_err err = {0};
    const char *doc =
        "{\"name\":\"pin\",\"cycle_interval\":10,\"horizon\":40,"
        "\"nodes\":[{\"name\":\"n1\",\"gpu\":8},{\"name\":\"n2\",\"gpu\":8}],"
        "\"queues\":[{\"name\":\"q\",\"resources\":{\"gpu\":{\"quota\":16}}}],"
        "\"workloads\":[{\"name\":\"agent\",\"queue\":\"q\",\"controller\":\"deployment\",\"requests\":{\"gpu\":1},"
        "\"termination_grace\":0,\"pods\":[{\"name\":\"agent-x\",\"node\":\"n1\",\"state\":\"running\",\"pin\":\"n1\"}]},"
        "{\"name\":\"free\",\"queue\":\"q\",\"controller\":\"deployment\",\"requests\":{\"gpu\":1},"
        "\"termination_grace\":0,\"pods\":[{\"name\":\"free-x\",\"node\":\"n1\",\"state\":\"running\"}]}],"
        "\"timeline\":[{\"at\":10,\"action\":\"remove_node\",\"node\":\"n1\"}]}";
    if (load(&sc, doc) < 0) {
        CHECK(0);
        return;
    }
    CHECK(us_sim_run(&sc, NULL, NULL, &res, &err) == 0);
    const us_state *st = &sc.state;
    int agent = us_state_workload_index(st, "agent"), free_ = us_state_workload_index(st, "free");
    int n2 = us_state_node_index(st, "n2");
    size_t seen = 0;
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        if (p->gone) continue;
        if (p->workload == agent) {
            CHECK(p->state == US_POD_PENDING && p->pin == us_state_node_index(st, "n1"));
            seen++;
        }
        if (p->workload == free_) {
            CHECK(p->state == US_POD_RUNNING && p->node == n2);
            seen++;
        }
    }
    CHECK(seen == 2);
    us_sim_result_free(&res);
    us_scenario_free(&sc);
}

TEST(cycle_evicts_background_for_ai_and_pipelines) {
    us_scenario sc;
    if (load(&sc, two_nodes_bg) < 0) {
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    us_cycle_opts o;
    us_cycle_opts_default(&o);
    us_cycle_log log;
    us_cycle_counts counts = {0};
    us_err err = {0};
    us_life_submit(st, us_state_workload_index(st, "agent"), 0);
    us_cycle_log_init(&log);
    CHECK(us_cycle_run(st, NULL, 0, &o, &log, NULL, &counts, &err) == 0);
    CHECK(log.ndecisions == 2); /* both agents bind */
    us_cycle_log_free(&log);

    us_life_submit(st, us_state_workload_index(st, "train"), 10);
    us_cycle_log_init(&log);
    CHECK(us_cycle_run(st, NULL, 10, &o, &log, NULL, &counts, &err) == 0);
    /* evict agent-n1, pipeline train-0 onto n1 waiting for it */
    CHECK(log.ndecisions == 2);
    if (log.ndecisions == 2) {
        CHECK(log.decisions[0].op == US_OP_EVICT);
        CHECK(log.decisions[0].action == US_ACT_BACKGROUND);
        CHECK_STR(log.decisions[0].evictor, "train");
        CHECK(log.decisions[1].op == US_OP_PIPELINE);
        CHECK(log.decisions[1].nwaits == 1);
        if (log.decisions[1].nwaits == 1) CHECK_STR(log.decisions[1].waits_for[0], "agent-n1");
    }
    CHECK(counts.background_evictions == 1);
    us_cycle_log_free(&log);

    /* grace over at 15: the next cycle binds train-0 */
    us_cycle_log_init(&log);
    CHECK(us_cycle_run(st, NULL, 20, &o, &log, NULL, &counts, &err) == 0);
    CHECK(log.ndecisions >= 1);
    if (log.ndecisions >= 1) {
        CHECK(log.decisions[0].op == US_OP_BIND);
        CHECK_STR(log.decisions[0].pod, "train-0");
    }
    us_cycle_log_free(&log);
    us_scenario_free(&sc);
}

/* Whatever reaches the built-in fair share (weights the loader refuses,
 * through a state built by hand), its result is checked like a policy's:
 * every share finite and >= 0, or rejected with an event that names the
 * built-in policy and the rule.  Weights from tiny to the largest double. */
TEST(builtin_fair_share_is_checked_like_a_policy) {
    static const double weights[] = {0, 5e-324, 1e-300, 1, 1e6, 1e200, 1e308, INFINITY};
    static const char *json =
        "{\"nodes\":[{\"name\":\"n1\",\"gpu\":8}],"
        "\"queues\":[{\"name\":\"a\"},{\"name\":\"b\"}],"
        "\"workloads\":[{\"name\":\"wa\",\"queue\":\"a\",\"replicas\":8,\"min_member\":1,"
        "\"requests\":{\"gpu\":1}},{\"name\":\"wb\",\"queue\":\"b\",\"replicas\":8,"
        "\"min_member\":1,\"requests\":{\"gpu\":1}}]}";
    size_t nw = sizeof weights / sizeof weights[0];
    for (size_t i = 0; i < nw; i++)
        for (size_t j = 0; j < nw; j++) {
            us_scenario sc;
            if (load(&sc, json) < 0) {
                CHECK(0);
                return;
            }
            us_state *st = &sc.state;
            st->queues[0].res[US_GPU].over_quota_weight = weights[i];
            st->queues[1].res[US_GPU].over_quota_weight = weights[j];
            us_life_submit(st, 0, 0);
            us_life_submit(st, 1, 0);
            us_cycle_opts o;
            us_cycle_opts_default(&o);
            us_cycle_log log;
            us_cycle_counts counts = {0};
            us_queue_figures figs[2];
            us_err err = {0};
            us_cycle_log_init(&log);
            CHECK(us_cycle_run(st, NULL, 0, &o, &log, figs, &counts, &err) == 0);
            bool rejected = false;
            for (size_t e = 0; e < log.nevents; e++)
                if (strcmp(log.events[e].reason, "PolicyRejected") == 0) {
                    rejected = true;
                    CHECK_STR(log.events[e].object, "fairshare (built-in)");
                    CHECK_HAS(log.events[e].message, "must be a finite number");
                }
            double fa = figs[0].fair[US_GPU], fb = figs[1].fair[US_GPU];
            CHECK(isfinite(fa) && fa >= 0 && isfinite(fb) && fb >= 0);
            CHECK(fa + fb <= 8 * US_GPU_UNIT + 1e-6);
            /* a finite, positive pair of weights is never rejected, and
             * equal ones split the node evenly */
            bool ordinary = weights[i] > 0 && weights[j] > 0 && isfinite(weights[i] + weights[j]);
            if (ordinary) CHECK(!rejected);
            if (ordinary && weights[i] == weights[j]) CHECK(fabs(fa - fb) < 1e-6);
            if (!rejected && weights[i] + weights[j] > 0) CHECK(fabs(fa + fb - 8 * US_GPU_UNIT) < 1e-6);
            us_cycle_log_free(&log);
            us_scenario_free(&sc);
        }
}

static int by_key_then_index(const void *a, const void *b, void *ctx) {
    const int *keys = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    if (keys[x] != keys[y]) return keys[x] < keys[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

TEST(sort_orders_by_the_context_comparator) {
    int keys[500], idx[500];
    uint64_t r = 7;
    for (int n = 0; n <= 500; n += 37) {
        for (int i = 0; i < n; i++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            keys[i] = (int)(r >> 59);  /* many equal keys: the index decides */
            idx[i] = n - 1 - i;
        }
        us_sort(idx, (size_t)n, sizeof *idx, by_key_then_index, keys);
        for (int i = 1; i < n; i++) CHECK(by_key_then_index(&idx[i - 1], &idx[i], keys) < 0);
    }
}

/* Natural order: a total order (antisymmetric, transitive, 0 only for
 * equal strings) in which digit runs compare as numbers. */
TEST(natural_order_compares_numbers_as_numbers) {
    CHECK(us_natcmp("gpu-burn-2", "gpu-burn-10") < 0);
    CHECK(us_natcmp("gpu-burn-10", "gpu-burn-2") > 0);
    CHECK(us_natcmp("n9", "n10") < 0);
    CHECK(us_natcmp("a-1-10", "a-1-9") > 0);
    CHECK(us_natcmp("a", "a-0") < 0);
    CHECK(us_natcmp("b-1", "a-10") > 0);
    const char *names[] = {"x", "x-0", "x-00", "x-01", "x-1", "x-2", "x-9", "x-10", "x-10a", "x-10b",
                           "x-11", "x-100", "x-a", "y-1", "y1", "1", "2", "10", "", "x-99999999999999999999"};
    size_t n = sizeof names / sizeof *names;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            int c = us_natcmp(names[i], names[j]);
            CHECK((c == 0) == (strcmp(names[i], names[j]) == 0));
            CHECK(c == -us_natcmp(names[j], names[i]));
            for (size_t k = 0; k < n; k++)
                if (c < 0 && us_natcmp(names[j], names[k]) < 0) CHECK(us_natcmp(names[i], names[k]) < 0);
        }
    /* numbers in any position compare as numbers, whatever their width */
    char a[32], b[32];
    for (int x = 0; x < 120; x += 7)
        for (int y = 0; y < 120; y += 11) {
            snprintf(a, sizeof a, "w-%d-p", x);
            snprintf(b, sizeof b, "w-%d-p", y);
            int c = us_natcmp(a, b);
            CHECK(x < y ? c < 0 : x > y ? c > 0 : c == 0);
        }
}

/* A run that fails leaves its result empty (us_sim_result_free): reading
 * it gives figures of nothing, for every pool asked and for all of them,
 * not a read through the harvest's missing arrays. */
TEST(an_empty_result_reads_as_nothing) {
    us_sim_result res;
    memset(&res, 0, sizeof res);
    for (int p = -1; p <= 1; p++) {
        us_hv_figures f;
        memset(&f, 0xff, sizeof f);
        us_hv_figures_of(&res.harvest, p, &f);
        CHECK(f.capacity == 0 && f.ai == 0 && f.background == 0 && f.idle == 0);
        CHECK(f.evictions == 0 && f.needed == 0 && f.waits == 0 && f.wait_total == 0 &&
              f.wait_p50 == 0 && f.wait_p99 == 0);
        CHECK(f.harvest_ratio == -1);  /* nothing left over: no ratio */
    }
    us_sim_result_free(&res);  /* and freeing it again is fine */
}

int main(void) {
    RUN(natural_order_compares_numbers_as_numbers);
    RUN(sort_orders_by_the_context_comparator);
    RUN(whole_gpus_are_counted);
    RUN(fractions_share_a_device_up_to_one);
    RUN(a_device_in_fractional_use_is_not_free_for_whole_pods);
    RUN(daemonset_pods_one_per_node_and_recreated_pinned);
    RUN(pinned_pod_waits_for_its_node_in_the_simulator);
    RUN(cycle_evicts_background_for_ai_and_pipelines);
    RUN(builtin_fair_share_is_checked_like_a_policy);
    RUN(an_empty_result_reads_as_nothing);
    return check_report();
}
