/*
 * test_invariants.c — the invariant checker (engine/invariants.c) finds
 * each kind of violation and names the invariant, the time and the
 * objects; the cycle fails with US_EINVARIANT when it is on and runs as
 * before when it is off.  The broken states are made by hand: the engine
 * itself must never make one (tests/c/test_random.c checks that).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cycle.h"
#include "invariants.h"
#include "lifecycle.h"
#include "scenario.h"

/* n1 and n2 of 4 GPUs; a-0 runs on n1, b-0 on n2; gang g (2 of 2) has
 * g-0 running on n3 (2 GPUs) and g-1 still to be created. */
static const char *cluster =
    "{\"name\":\"inv\",\"nodes\":[{\"name\":\"n1\",\"gpu\":4},{\"name\":\"n2\",\"gpu\":4},"
    "{\"name\":\"n3\",\"gpu\":2}],"
    "\"queues\":[{\"name\":\"ml\",\"resources\":{\"gpu\":{\"quota\":16}}}],"
    "\"workloads\":["
    "{\"name\":\"a\",\"queue\":\"ml\",\"requests\":{\"gpu\":4},\"pods\":[{\"node\":\"n1\",\"state\":\"running\"}]},"
    "{\"name\":\"b\",\"queue\":\"ml\",\"requests\":{\"gpu\":4},\"pods\":[{\"node\":\"n2\",\"state\":\"running\"}]}"
    "%s]}";

static const char *gang =
    ",{\"name\":\"g\",\"queue\":\"ml\",\"replicas\":2,\"min_member\":2,\"requests\":{\"gpu\":2},"
    "\"pods\":[{\"name\":\"g-0\",\"node\":\"n3\",\"state\":\"running\"}]}";

/* x: an external workload (another scheduler's) whose pod x-0 runs on n3,
 * and whose second pod x-1 is pending (its gang of 2 is not ours). */
static const char *external =
    ",{\"name\":\"x\",\"external\":true,\"replicas\":2,\"requests\":{\"gpu\":1},"
    "\"pods\":[{\"name\":\"x-0\",\"node\":\"n3\",\"state\":\"running\"}]}";

static int load_with(us_scenario *sc, const char *extra) {
    char text[2048];
    us_err err = {0};
    snprintf(text, sizeof text, cluster, extra);
    if (us_scenario_load_string(sc, text, strlen(text), NULL, &err) < 0) {
        fprintf(stderr, "  load: %s\n", err.msg);
        return -1;
    }
    bool any = false;
    return us_life_submit_due(&sc->state, 0, &any);
}

static int load(us_scenario *sc, bool with_gang) { return load_with(sc, with_gang ? gang : ""); }

static int pod(const us_state *st, const char *name) {
    for (size_t i = 0; i < st->npods; i++)
        if (!strcmp(st->pods[i].name, name)) return (int)i;
    return -1;
}

/* One cycle at t=10 on a copy of st, checked or not; the error in *err. */
static int cycle(const us_state *st, bool checked, us_err *err) {
    us_state copy;
    us_cycle_opts o;
    us_cycle_log log;
    if (us_state_clone(&copy, st) < 0) return -2;
    us_cycle_opts_default(&o);
    o.check_invariants = checked;
    us_cycle_log_init(&log);
    memset(err, 0, sizeof *err);
    int rc = us_cycle_run(&copy, NULL, 10, &o, &log, NULL, NULL, err);
    us_cycle_log_free(&log);
    us_state_free(&copy);
    return rc;
}

TEST(a_sound_cluster_passes) {
    us_scenario sc;
    us_err err;
    if (load(&sc, false) < 0) {
        CHECK(0);
        return;
    }
    CHECK(cycle(&sc.state, true, &err) == 0);
    CHECK(err.code == 0);
    us_scenario_free(&sc);
}

TEST(a_node_over_capacity_physically) {
    us_scenario sc;
    us_err err;
    if (load(&sc, false) < 0) {
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    st->pods[pod(st, "b-0")].node = us_state_node_index(st, "n1"); /* 8 GPUs on a 4-GPU node */
    CHECK(cycle(st, false, &err) == 0); /* unchecked, the cycle does not notice */
    CHECK(cycle(st, true, &err) == -1);
    CHECK(err.code == US_EINVARIANT);
    CHECK_HAS(err.msg, "invariant \"capacity\" broken after the cycle at t=10");
    CHECK_HAS(err.msg, "node \"n1\" is over capacity physically");
    CHECK_HAS(err.msg, "pod \"b-0\"");
    us_scenario_free(&sc);
}

/* A pod that shares a device holds one: the cycle's kept uses take it off
 * the device it recorded, so one without is a state the engine never makes. */
TEST(a_fractional_pod_without_its_device) {
    us_scenario sc;
    us_err err;
    if (load_with(&sc, ",{\"name\":\"f\",\"queue\":\"ml\",\"requests\":{\"gpu\":0.5},"
                       "\"pods\":[{\"name\":\"f-0\",\"node\":\"n3\",\"state\":\"running\"}]}") < 0) {
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    CHECK(st->pods[pod(st, "f-0")].shared_dev == 0);  /* the loader gave it device 0 */
    CHECK(cycle(st, true, &err) == 0);
    st->pods[pod(st, "f-0")].shared_dev = -1;
    CHECK(cycle(st, true, &err) == -1);
    CHECK(err.code == US_EINVARIANT);
    CHECK_HAS(err.msg, "invariant \"capacity\"");
    CHECK_HAS(err.msg, "pod \"f-0\" (running on node \"n3\") asks a fraction of a GPU but holds no device");
    us_scenario_free(&sc);
}

TEST(a_node_over_capacity_as_planned) {
    us_scenario sc;
    us_err err;
    if (load(&sc, false) < 0) {
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    /* b-0 pipelined onto n1 beside a-0 that is not leaving: fine physically
     * (it holds nothing yet), over capacity where the plan ends */
    us_pod *b = &st->pods[pod(st, "b-0")];
    b->node = us_state_node_index(st, "n1");
    b->state = US_POD_PIPELINED;
    CHECK(cycle(st, true, &err) == -1);
    CHECK(err.code == US_EINVARIANT);
    CHECK_HAS(err.msg, "invariant \"capacity\"");
    CHECK_HAS(err.msg, "node \"n1\" is over capacity as planned (running and pipelined pods)");
    CHECK_HAS(err.msg, "pod \"b-0\" (pipelined)");
    us_scenario_free(&sc);
}

TEST(a_gang_below_min_member) {
    us_scenario sc;
    if (load(&sc, true) < 0) {
        CHECK(0);
        return;
    }
    /* g-0 runs, g-1 is pending: 1 of min_member 2 (checked directly, as
     * what a cycle does with such a gang is the cycle's business) */
    us_queue_figures figs[1] = {{{{10000, 0, 0}}, {0}}};
    us_inv inv = {0};
    us_err err = {0};
    CHECK(pod(&sc.state, "g-1") >= 0);
    CHECK(us_inv_check(&sc.state, &inv, figs, 10, &err) == -1);
    CHECK(err.code == US_EINVARIANT);
    CHECK_HAS(err.msg, "invariant \"gang\" broken after the cycle at t=10");
    CHECK_HAS(err.msg, "workload \"g\" holds 1 pod(s) (running or pipelined), below its min_member 2");
    /* both pending: 0 is allowed */
    sc.state.pods[pod(&sc.state, "g-0")].state = US_POD_PENDING;
    sc.state.pods[pod(&sc.state, "g-0")].node = -1;
    figs[0].allocated.v[US_GPU] = 8000;
    CHECK(us_inv_check(&sc.state, &inv, figs, 10, &err) == 0);
    us_scenario_free(&sc);
}

TEST(two_live_pods_with_one_name) {
    us_scenario sc;
    us_err err;
    if (load(&sc, false) < 0) {
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    us_pod *b = &st->pods[pod(st, "b-0")];
    char *name = strdup("a-0");
    if (!name) {
        CHECK(0);
        us_scenario_free(&sc);
        return;
    }
    free(b->name);
    b->name = name;
    CHECK(cycle(st, true, &err) == -1);
    CHECK(err.code == US_EINVARIANT);
    CHECK_HAS(err.msg, "invariant \"names\"");
    CHECK_HAS(err.msg, "two live pods are named \"a-0\"");
    /* a terminating incarnation may share the name of its successor */
    b->state = US_POD_RELEASING;
    b->release_at = 100;
    CHECK(cycle(st, true, &err) == 0);
    us_scenario_free(&sc);
}

TEST(an_accepted_result_not_applied) {
    us_scenario sc;
    if (load(&sc, false) < 0) {
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    us_queue_figures figs[1] = {{{{8000, 0, 0}}, {0}}};
    us_inv inv = {0};
    us_err err = {0};
    int n1 = us_state_node_index(st, "n1"), b0 = pod(st, "b-0");
    CHECK(us_inv_check(st, &inv, figs, 10, &err) == 0);
    /* the cycle said b-0 goes to n1; the state has it on n2 */
    inv.e = &(us_inv_expect){b0, n1, US_INV_PLACED};
    inv.n = 1;
    CHECK(us_inv_check(st, &inv, figs, 10, &err) == -1);
    CHECK(err.code == US_EINVARIANT);
    CHECK_HAS(err.msg, "invariant \"applied\"");
    CHECK_HAS(err.msg, "pod \"b-0\" was placed on node \"n1\" but is running on node n2");
    /* said evicted, still running */
    inv.e = &(us_inv_expect){b0, us_state_node_index(st, "n2"), US_INV_STOPPED};
    CHECK(us_inv_check(st, &inv, figs, 10, &err) == -1);
    CHECK_HAS(err.msg, "pod \"b-0\" was evicted from node \"n2\" but is running");
    us_scenario_free(&sc);
}

/* The cycle keeps each node's physical use from its start through every
 * commit instead of reading every pod again: what it kept must be what the
 * pods make it (every cycle of the checked builds holds it to that). */
TEST(a_kept_physical_use_that_is_not_its_pods) {
    us_scenario sc;
    if (load(&sc, false) < 0) {
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    us_queue_figures figs[1] = {{{{8000, 0, 0}}, {0}}};
    us_phys ph;
    us_err err = {0};
    CHECK(us_phys_take(st, &ph) == 0);
    us_inv inv = {NULL, 0, 0, &ph};
    int n2 = us_state_node_index(st, "n2");
    CHECK(ph.use[n2].used.v[US_GPU] == 4000); /* b-0 runs there */
    CHECK(us_inv_check(st, &inv, figs, 10, &err) == 0);
    /* a pod stopped without its room given back */
    ph.use[n2].used.v[US_GPU] += 1000;
    ph.use[n2].whole += 1;
    CHECK(us_inv_check(st, &inv, figs, 10, &err) == -1);
    CHECK(err.code == US_EINVARIANT);
    CHECK_HAS(err.msg, "invariant \"physical-use\"");
    CHECK_HAS(err.msg, "node \"n2\": the cycle kept gpu 5, cpu 0m, memory 0 (5 whole GPU(s)) where "
                       "its running and terminating pods hold gpu 4");
    ph.use[n2].used.v[US_GPU] -= 1000;
    ph.use[n2].whole -= 1;
    /* a pipelined pod bound without its wait ended */
    ph.waiting[n2]++;
    CHECK(us_inv_check(st, &inv, figs, 10, &err) == -1);
    CHECK_HAS(err.msg, "node \"n2\": the cycle kept 1 pipelined pod(s) waiting where 0 do");
    us_phys_free(&ph);
    us_scenario_free(&sc);
}

TEST(queue_usage_that_is_not_its_pods) {
    us_scenario sc;
    if (load(&sc, false) < 0) {
        CHECK(0);
        return;
    }
    us_queue_figures figs[1] = {{{{4000, 0, 0}}, {0}}}; /* a-0 and b-0 hold 8 */
    us_inv inv = {0};
    us_err err = {0};
    CHECK(us_inv_check(&sc.state, &inv, figs, 10, &err) == -1);
    CHECK(err.code == US_EINVARIANT);
    CHECK_HAS(err.msg, "invariant \"queue-usage\"");
    CHECK_HAS(err.msg, "queue \"ml\" reports an allocation of gpu 4, cpu 0m, memory 0, its pods hold gpu 8");
    us_scenario_free(&sc);
}

TEST(external_pods_are_node_usage_and_nothing_else) {
    us_scenario sc;
    us_err err;
    if (load_with(&sc, external) < 0) {
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    /* sound: x holds 1 of 2 pods (no gang of ours), in no queue's usage */
    CHECK(cycle(st, true, &err) == 0);
    CHECK(err.code == 0);
    /* on n1 beside a-0 (4 of 4 GPUs): the checker counts it */
    st->pods[pod(st, "x-0")].node = us_state_node_index(st, "n1");
    CHECK(cycle(st, true, &err) == -1);
    CHECK(err.code == US_EINVARIANT);
    CHECK_HAS(err.msg, "invariant \"capacity\"");
    CHECK_HAS(err.msg, "node \"n1\" is over capacity physically");
    us_scenario_free(&sc);
}

TEST(an_external_pod_that_the_cycle_moved) {
    us_scenario sc;
    if (load_with(&sc, external) < 0) {
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    int x = pod(st, "x-0"), n3 = us_state_node_index(st, "n3");
    us_inv_expect ex = {x, n3, US_INV_FIXED};
    us_inv inv = {&ex, 1, 1, NULL};
    us_queue_figures figs[1] = {{{{8000, 0, 0}}, {0}}};
    us_err err = {0};
    CHECK(us_inv_check(st, &inv, figs, 10, &err) == 0);
    /* evicted back to pending: broken, whoever did it */
    st->pods[x].state = US_POD_PENDING;
    st->pods[x].node = -1;
    CHECK(us_inv_check(st, &inv, figs, 10, &err) == -1);
    CHECK(err.code == US_EINVARIANT);
    CHECK_HAS(err.msg, "invariant \"applied\"");
    CHECK_HAS(err.msg, "pod \"x-0\" of an external workload ran on node \"n3\" but is pending");
    us_scenario_free(&sc);
}

int main(void) {
    RUN(a_sound_cluster_passes);
    RUN(a_node_over_capacity_physically);
    RUN(a_node_over_capacity_as_planned);
    RUN(a_fractional_pod_without_its_device);
    RUN(a_gang_below_min_member);
    RUN(two_live_pods_with_one_name);
    RUN(an_accepted_result_not_applied);
    RUN(a_kept_physical_use_that_is_not_its_pods);
    RUN(queue_usage_that_is_not_its_pods);
    RUN(external_pods_are_node_usage_and_nothing_else);
    RUN(an_external_pod_that_the_cycle_moved);
    return check_report();
}
