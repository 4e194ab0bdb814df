/*
 * test_api.c — the embedding API (bindings/understory.h) through its public
 * header only: every call, read back; every error path with its code and
 * message; and that a refused call leaves the engine exactly as it was.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "understory.h"

/* ---- helpers ---------------------------------------------------------------- */

static us_engine *engine(void) {
    us_engine *e = NULL;
    us_error err;
    if (us_engine_create(NULL, &e, &err) != US_OK) fprintf(stderr, "create: %s\n", err.message);
    return e;
}

/* An engine that checks every invariant after each cycle. */
static us_engine *checked_engine(void) {
    us_engine_options o;
    us_engine *e = NULL;
    us_error err;
    us_engine_options_init(&o);
    o.check_invariants = 1;
    if (us_engine_create(&o, &e, &err) != US_OK) fprintf(stderr, "create: %s\n", err.message);
    return e;
}

/* Everything readable about the engine, as text: a refused call must leave
 * it byte for byte the same. */
static char *dump(const us_engine *e) {
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
#define P(...) n += (size_t)snprintf(s + n, n < cap ? cap - n : 0, __VA_ARGS__)
    P("t=%g cycles=%llu policy=%s\n", us_engine_time(e),
      (unsigned long long)us_engine_cycle_count(e), us_engine_policy_id(e));
    for (size_t i = 0; i < us_engine_node_count(e); i++) {
        us_node_info x;
        us_engine_node(e, i, &x);
        P("node %s %s %g/%lld/%lld used %g/%lld/%lld %d\n", x.name, x.pool, x.capacity.gpu,
          (long long)x.capacity.cpu, (long long)x.capacity.memory, x.used.gpu,
          (long long)x.used.cpu, (long long)x.used.memory, x.unschedulable);
    }
    for (size_t i = 0; i < us_engine_queue_count(e); i++) {
        us_queue_info x;
        us_engine_queue(e, i, &x);
        P("queue %s %s %g %g\n", x.name, x.parent ? x.parent : "-", x.allocated.gpu, x.fair_share.gpu);
    }
    for (size_t i = 0; i < us_engine_workload_count(e); i++) {
        us_workload_info x;
        us_engine_workload(e, i, &x);
        P("workload %s %s %d %d %s %g\n", x.name, x.queue, x.phase, x.background,
          x.blocked ? x.blocked : "-", x.running_since);
    }
    for (size_t i = 0; i < us_engine_pod_count(e); i++) {
        us_pod_info x;
        us_engine_pod(e, i, &x);
        P("pod %s %s %s %s\n", x.name, x.workload, x.node ? x.node : "-", x.phase_name);
    }
#undef P
    return s;
}

static int node(us_engine *e, const char *name, double gpu) {
    us_node_spec n = {0};
    n.name = name;
    n.capacity = (us_resources){gpu, 32000, 256LL << 30};
    return us_engine_upsert_node(e, &n, NULL);
}

static int queue(us_engine *e, const char *name, const char *parent, double quota) {
    us_queue_spec q;
    us_queue_spec_init(&q);
    q.name = name;
    q.parent = parent;
    q.quota.gpu = quota;
    return us_engine_upsert_queue(e, &q, NULL);
}

static int bg_queue(us_engine *e, const char *name) {
    us_queue_spec q;
    us_queue_spec_init(&q);
    q.name = name;
    q.over_quota_weight = (us_weights){0, 0, 0};
    return us_engine_upsert_queue(e, &q, NULL);
}

static int workload(us_engine *e, const char *name, const char *q, int replicas, double gpu,
                    double now) {
    us_workload_spec w;
    us_workload_spec_init(&w);
    w.name = name;
    w.queue = q;
    w.replicas = replicas;
    w.requests.gpu = gpu;
    return us_engine_upsert_workload(e, &w, now, NULL);
}

static const us_label bg_label[] = {{"kai.scheduler/background", "true"}};

static int bg_workload(us_engine *e, const char *name, us_controller_kind c, int replicas,
                       double gpu, double now) {
    us_workload_spec w;
    us_workload_spec_init(&w);
    w.name = name;
    w.queue = "bg";
    w.controller = c;
    w.replicas = replicas;
    w.labels = bg_label;
    w.nlabels = 1;
    w.termination_grace = 5;
    w.requests = (us_resources){gpu, 100, 64 << 20};
    return us_engine_upsert_workload(e, &w, now, NULL);
}

static const us_pod_info *pod_named(const us_engine *e, const char *name, us_pod_info *out) {
    for (size_t i = 0; i < us_engine_pod_count(e); i++)
        if (us_engine_pod(e, i, out) == US_OK && strcmp(out->name, name) == 0 &&
            out->phase != US_PHASE_RELEASING)
            return out;
    return NULL;
}

static size_t count_phase(const us_engine *e, us_pod_phase ph) {
    size_t n = 0;
    us_pod_info p;
    for (size_t i = 0; i < us_engine_pod_count(e); i++)
        if (us_engine_pod(e, i, &p) == US_OK && p.phase == ph) n++;
    return n;
}

/* Decisions of the last cycle with this op and action (NULL: none). */
static size_t count_decisions(const us_engine *e, us_decision_op op, const char *action) {
    size_t n = 0;
    us_decision_info d;
    for (size_t i = 0; i < us_engine_decision_count(e); i++)
        if (us_engine_decision(e, i, &d) == US_OK && d.op == op &&
            (action ? d.action && strcmp(d.action, action) == 0 : !d.action))
            n++;
    return n;
}

/* Run f; it must fail with code and a message containing msg, and leave
 * the engine as it was. */
#define REFUSED(e, call, want_code, msg)                                                          \
    do {                                                                                          \
        us_error err = {0};                                                                       \
        char *before = dump(e);                                                                   \
        int rc_ = (call);                                                                         \
        char *after = dump(e);                                                                    \
        if (rc_ != (want_code))                                                                   \
            fprintf(stderr, "  %s:%d: code %d (%s), expected %d\n", __FILE__, __LINE__, rc_,     \
                    err.message, want_code);                                                      \
        CHECK(rc_ == (want_code));                                                                \
        CHECK(err.code == (want_code));                                                           \
        CHECK_HAS(err.message, msg);                                                              \
        CHECK_STR(after, before);                                                                 \
        free(before);                                                                             \
        free(after);                                                                              \
    } while (0)

/* ---- version, errors, options --------------------------------------------------------- */

TEST(version_is_the_headers) {
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", UNDERSTORY_VERSION_MAJOR, UNDERSTORY_VERSION_MINOR,
             UNDERSTORY_VERSION_PATCH);
    CHECK_STR(us_version(), UNDERSTORY_VERSION_STRING);
    CHECK_STR(v, UNDERSTORY_VERSION_STRING);
    CHECK_STR(us_strerror(US_ENOENT), "no such object");
    CHECK_STR(us_strerror(999), "unknown error");
}

TEST(create_refuses_bad_options) {
    us_engine_options o;
    us_engine *e = (us_engine *)&o; /* must be reset to NULL */
    us_error err;
    us_engine_options_init(&o);
    o.long_grace = -1;
    CHECK(us_engine_create(&o, &e, &err) == US_EINVAL);
    CHECK(e == NULL);
    CHECK_HAS(err.message, "options.long_grace");
    us_engine_options_init(&o);
    CHECK(o.cycle_budget == 0); /* the default: 5 s */
    o.cycle_budget = -1;
    e = (us_engine *)&o;
    CHECK(us_engine_create(&o, &e, &err) == US_EINVAL);
    CHECK(e == NULL);
    CHECK_HAS(err.message, "options.cycle_budget: -1 is not a number of seconds >= 0");
    o.cycle_budget = NAN;
    CHECK(us_engine_create(&o, &e, &err) == US_EINVAL);
    CHECK_HAS(err.message, "options.cycle_budget");
    us_engine_options_init(&o);
    o.policies = "/nonexistent/policies";
    CHECK(us_engine_create(&o, &e, &err) == US_EPOLICY);
    CHECK(e == NULL);
    CHECK_HAS(err.message, "policies /nonexistent/policies");
    CHECK(us_engine_create(NULL, NULL, &err) == US_EINVAL);
    us_engine_destroy(NULL); /* allowed */
}

TEST(create_with_lua_policies) {
    us_engine_options o;
    us_engine *e = NULL;
    us_error err;
    us_engine_options_init(&o);
    o.policies = "policies";
    CHECK(us_engine_create(&o, &e, &err) == US_OK);
    CHECK(strcmp(us_engine_policy_id(e), "builtin") != 0);
    CHECK(us_engine_load_policies(e, NULL, &err) == US_OK);
    CHECK_STR(us_engine_policy_id(e), "builtin");
    us_engine_destroy(e);
}

/* ---- nodes ------------------------------------------------------------------------------ */

TEST(node_upsert_and_read_back) {
    us_engine *e = engine();
    us_error err;
    us_label labels[] = {{"zone", "a"}};
    us_node_spec n = {"n1", "train", {8, 64000, 512LL << 30}, labels, 1, 1, NULL, 0};
    us_node_info x;
    CHECK(us_engine_upsert_node(e, &n, &err) == US_OK);
    CHECK(us_engine_node_count(e) == 1);
    CHECK(us_engine_node(e, 0, &x) == US_OK);
    CHECK_STR(x.name, "n1");
    CHECK_STR(x.pool, "train");
    CHECK(x.capacity.gpu == 8 && x.capacity.cpu == 64000 && x.capacity.memory == 512LL << 30);
    CHECK(x.unschedulable);
    /* the same node as JSON, in the scenario format: replaces the spec */
    CHECK(us_engine_upsert_node_json(
              e, "{\"name\": \"n1\", \"pool\": \"train\", \"cpu\": \"1500m\", \"memory\": \"1Gi\", \"gpu\": 4}",
              &err) == US_OK);
    CHECK(us_engine_node(e, 0, &x) == US_OK);
    CHECK(x.capacity.gpu == 4 && x.capacity.cpu == 1500 && x.capacity.memory == 1LL << 30);
    CHECK(!x.unschedulable);
    CHECK(us_engine_node(e, 1, &x) == US_ENOENT);
    us_engine_destroy(e);
}

TEST(node_errors_name_the_field_and_change_nothing) {
    us_engine *e = engine();
    us_label dup[] = {{"zone", "a"}, {"zone", "b"}};
    us_label nullkey[] = {{NULL, "a"}};
    us_node_spec n = {"n2", NULL, {8.5, 1000, 1000}, NULL, 0, 0, NULL, 0};
    CHECK(node(e, "n1", 8) == US_OK);
    REFUSED(e, us_engine_upsert_node(e, &n, &err), US_EINVAL,
            "node.gpu: 8.5 is not a whole number of GPUs from 0 to 64");
    n.capacity.gpu = 1;
    n.capacity.cpu = -5;
    REFUSED(e, us_engine_upsert_node(e, &n, &err), US_EINVAL, "node.cpu:");
    n.capacity.cpu = 1000;
    n.labels = dup;
    n.nlabels = 2;
    REFUSED(e, us_engine_upsert_node(e, &n, &err), US_EINVAL, "node.labels.zone: duplicate key");
    n.labels = nullkey;
    n.nlabels = 1;
    REFUSED(e, us_engine_upsert_node(e, &n, &err), US_EINVAL, "node.labels[0]: NULL key or value");
    n.name = NULL;
    n.nlabels = 0;
    REFUSED(e, us_engine_upsert_node(e, &n, &err), US_EINVAL, "node.name: required field is missing");
    REFUSED(e, us_engine_upsert_node(e, NULL, &err), US_EINVAL, "NULL spec");
    REFUSED(e, us_engine_upsert_node_json(e, "{\"name\": \"n3\",\n \"gpus\": 8}", &err), US_EINVAL,
            "node.gpus: unknown field (did you mean \"gpu\"?)");
    REFUSED(e, us_engine_upsert_node_json(e, "{\"name\": \"n3\",\n \"gpu\": }", &err), US_EINVAL,
            "node: invalid JSON at line 2, column");
    REFUSED(e, us_engine_upsert_node_json(e, "[1]", &err), US_EINVAL, "node: must be an object");
    REFUSED(e, us_engine_upsert_node_json(e, NULL, &err), US_EINVAL, "node: NULL JSON text");
    REFUSED(e, us_engine_upsert_node_json(e, "{\"name\": \"n1\", \"pool\": \"other\", \"gpu\": 8}", &err),
            US_EINVAL, "node.pool: \"n1\" is in pool \"default\"; a node's pool cannot change");
    REFUSED(e, us_engine_remove_node(e, "nope", &err), US_ENOENT, "node \"nope\" is not in the cluster");
    us_engine_destroy(e);
}

TEST(node_capacity_cannot_drop_below_its_pods) {
    us_engine *e = engine();
    us_error err;
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 8) == US_OK);
    CHECK(us_engine_upsert_workload_json(
              e, "{\"name\": \"w\", \"queue\": \"q\", \"requests\": {\"gpu\": 6, \"memory\": \"1Gi\"}}", 0,
              &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    REFUSED(e, us_engine_upsert_node_json(e, "{\"name\": \"n1\", \"gpu\": 4, \"cpu\": \"32\", \"memory\": \"256Gi\"}", &err),
            US_EINVAL, "node.gpu: the pods on \"n1\" hold more than that");
    REFUSED(e, us_engine_upsert_node_json(e, "{\"name\": \"n1\", \"gpu\": 8, \"cpu\": \"32\", \"memory\": \"1Ki\"}", &err),
            US_EINVAL, "node.memory: the pods on \"n1\" hold more than that");
    CHECK(node(e, "n1", 6) == US_OK); /* exactly enough */
    us_engine_destroy(e);
}

TEST(node_leaves_and_its_pods_go_pending) {
    us_engine *e = engine();
    us_error err;
    us_pod_info p;
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 8) == US_OK);
    CHECK(workload(e, "w", "q", 1, 1, 0) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(pod_named(e, "w-0", &p) && p.phase == US_PHASE_RUNNING);
    CHECK(us_engine_remove_node(e, "n1", &err) == US_OK);
    CHECK(us_engine_node_count(e) == 0);
    CHECK(pod_named(e, "w-0", &p) && p.phase == US_PHASE_PENDING && p.node == NULL);
    /* the name can come back as a new node */
    CHECK(node(e, "n1", 2) == US_OK);
    CHECK(us_engine_run_cycle(e, 10, &err) == US_OK);
    CHECK(pod_named(e, "w-0", &p) && p.phase == US_PHASE_RUNNING);
    us_engine_destroy(e);
}

/* A pod pinned to a node (its affinity names it) waits while the node is
 * away, and runs there once it comes back under the same name, whether
 * the engine tidied in between (a read) or not: the node that comes back
 * is the one the pod waits for, and reads list it once. */
TEST(pinned_pod_waits_for_its_node_to_come_back) {
    for (int read_between = 0; read_between < 2; read_between++) {
        us_engine *e = engine();
        us_error err;
        us_pod_info p;
        us_node_info ni;
        CHECK(node(e, "n1", 8) == US_OK);
        CHECK(node(e, "n2", 8) == US_OK);
        CHECK(queue(e, "q", NULL, 16) == US_OK);
        CHECK(workload(e, "w", "q", 1, 1, 0) == US_OK);
        CHECK(us_engine_upsert_pod_json(e, "{\"name\": \"w-real\", \"workload\": \"w\", \"pin\": \"n1\"}",
                                        &err) == US_OK);
        CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
        CHECK(pod_named(e, "w-real", &p) && p.phase == US_PHASE_RUNNING);
        CHECK_STR(p.node, "n1");
        CHECK(us_engine_remove_node(e, "n1", &err) == US_OK);
        if (read_between) CHECK(us_engine_node_count(e) == 2); /* n1 kept: w-real waits for it */
        CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
        /* n2 is free, but the pod waits for n1 */
        CHECK(pod_named(e, "w-real", &p) && p.phase == US_PHASE_PENDING);
        CHECK(node(e, "n1", 8) == US_OK);
        CHECK(us_engine_node_count(e) == 2);
        for (size_t i = 0; i < us_engine_node_count(e); i++) {
            CHECK(us_engine_node(e, i, &ni) == US_OK);
            CHECK(strcmp(ni.name, i == 0 ? "n2" : "n1") == 0);
        }
        CHECK(us_engine_run_cycle(e, 2, &err) == US_OK);
        CHECK(pod_named(e, "w-real", &p) && p.phase == US_PHASE_RUNNING);
        CHECK_STR(p.node, "n1");
        us_engine_destroy(e);
    }
}

TEST(daemonset_follows_node_labels) {
    us_engine *e = engine();
    us_error err;
    us_workload_spec w;
    us_label sel[] = {{"role", "gpu"}};
    us_label yes[] = {{"role", "gpu"}};
    us_node_spec n = {"n1", NULL, {8, 32000, 1LL << 35}, NULL, 0, 0, NULL, 0};
    us_pod_info p;
    CHECK(bg_queue(e, "bg") == US_OK);
    CHECK(us_engine_upsert_node(e, &n, &err) == US_OK);
    us_workload_spec_init(&w);
    w.name = "agent";
    w.queue = "bg";
    w.controller = US_CONTROLLER_DAEMONSET;
    w.node_selector = sel;
    w.nnode_selector = 1;
    w.labels = bg_label;
    w.nlabels = 1;
    w.termination_grace = 0;
    w.requests.cpu = 100;
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK);
    CHECK(us_engine_pod_count(e) == 0); /* n1 does not match */
    n.labels = yes;
    n.nlabels = 1;
    CHECK(us_engine_upsert_node(e, &n, &err) == US_OK);
    CHECK(pod_named(e, "agent-n1", &p) && p.phase == US_PHASE_PENDING);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(pod_named(e, "agent-n1", &p) && p.phase == US_PHASE_RUNNING && p.background);
    n.nlabels = 0; /* no longer matches: its pod goes (grace 0: at once) */
    CHECK(us_engine_upsert_node(e, &n, &err) == US_OK);
    CHECK(us_engine_pod_count(e) == 0);
    us_engine_destroy(e);
}

/* A DaemonSet's real pending pod, reported with the node its affinity
 * names, takes the engine's pod for that node, so the engine binds it
 * there and nowhere else (else the DaemonSet controller deletes it and
 * creates it again, forever). */
TEST(pinned_pending_pod_binds_on_its_pin) {
    us_engine *e = engine();
    us_error err;
    us_workload_spec w;
    us_pod_info p;
    CHECK(bg_queue(e, "bg") == US_OK);
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(node(e, "n2", 8) == US_OK);
    CHECK(node(e, "n3", 8) == US_OK);
    us_workload_spec_init(&w);
    w.name = "agent";
    w.queue = "bg";
    w.controller = US_CONTROLLER_DAEMONSET;
    w.labels = bg_label;
    w.nlabels = 1;
    w.requests.cpu = 100;
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK);
    /* reported in the order a control plane sees them: n2's first */
    us_pod_spec a = {.name = "agent-x2", .workload = "agent", .pin = "n2"};
    us_pod_spec b = {.name = "agent-x1", .workload = "agent", .pin = "n1"};
    CHECK(us_engine_upsert_pod(e, &a, &err) == US_OK);
    CHECK(us_engine_upsert_pod(e, &b, &err) == US_OK);
    /* a second pod pinned to n2 has no place: n2's is taken */
    us_pod_spec c = {.name = "agent-y2", .workload = "agent", .pin = "n2"};
    REFUSED(e, us_engine_upsert_pod(e, &c, &err), US_EINVAL, "daemonset \"agent\" has no pending pod on \"n2\"");
    c.pin = "n9";
    REFUSED(e, us_engine_upsert_pod(e, &c, &err), US_ENOENT, "pod.pin: \"n9\" is not a node");
    /* the pod pinned to n2 may not run on n1 */
    a.node = "n1";
    REFUSED(e, us_engine_upsert_pod(e, &a, &err), US_EINVAL, "pod.node: pod \"agent-x2\" is pinned to \"n2\"");
    a.node = NULL;
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    us_decision_info d;
    size_t binds = 0;
    for (size_t i = 0; i < us_engine_decision_count(e); i++) {
        CHECK(us_engine_decision(e, i, &d) == US_OK);
        if (!strcmp(d.pod, "agent-x2")) CHECK_STR(d.node, "n2");
        if (!strcmp(d.pod, "agent-x1")) CHECK_STR(d.node, "n1");
        binds += d.op == US_DECISION_BIND;
    }
    CHECK(binds == 3); /* x1, x2 and the engine's own pod for n3 */
    CHECK(pod_named(e, "agent-x2", &p) && p.phase == US_PHASE_RUNNING);
    CHECK_STR(p.node, "n2");
    us_engine_destroy(e);

    /* any pod may be pinned: a pending pod pinned to a full node waits,
     * though another node is free; unpinned, it goes there */
    e = engine();
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(node(e, "n2", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 16) == US_OK);
    CHECK(workload(e, "big", "q", 1, 8, 0) == US_OK);
    us_pod_spec big = {.name = "big-0", .node = "n1"};
    CHECK(us_engine_upsert_pod(e, &big, &err) == US_OK);
    CHECK(workload(e, "w", "q", 1, 1, 0) == US_OK);
    us_pod_spec pw = {.name = "w-real", .workload = "w", .pin = "n1"};
    CHECK(us_engine_upsert_pod_json(e, "{\"name\": \"w-real\", \"workload\": \"w\", \"pin\": \"n1\"}", &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(us_engine_decision_count(e) == 0);
    CHECK(pod_named(e, "w-real", &p) && p.phase == US_PHASE_PENDING);
    pw.workload = NULL;
    pw.pin = NULL;
    CHECK(us_engine_upsert_pod(e, &pw, &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
    CHECK(pod_named(e, "w-real", &p) && p.phase == US_PHASE_RUNNING);
    CHECK_STR(p.node, "n2");
    us_engine_destroy(e);
}

/* A pod being deleted by someone else (deletionTimestamp) is reported
 * terminating: it is releasing, holds its room until it is gone, is not a
 * replica (its controller's new pod takes the place), and a pod that needs
 * its room is pipelined, not bound over it. */
TEST(pod_deleted_by_others_is_releasing_until_gone) {
    us_engine *e = engine();
    us_error err;
    us_pod_info p;
    us_decision_info d;
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 16) == US_OK);
    us_workload_spec w;
    us_workload_spec_init(&w);
    w.name = "web";
    w.queue = "q";
    w.controller = US_CONTROLLER_DEPLOYMENT;
    w.replicas = 1;
    w.requests.gpu = 8;
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK);
    us_pod_spec s = {.name = "web-a", .workload = "web", .node = "n1"};
    CHECK(us_engine_upsert_pod(e, &s, &err) == US_OK);
    /* deleted: releasing, and its replacement is pending */
    s.terminating = 1;
    CHECK(us_engine_upsert_pod(e, &s, &err) == US_OK);
    CHECK(us_engine_upsert_pod(e, &s, &err) == US_OK); /* said again: no change */
    CHECK(count_phase(e, US_PHASE_RELEASING) == 1);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 0);
    CHECK(count_phase(e, US_PHASE_PENDING) == 1);
    us_pod_spec r = {.name = "web-b", .workload = "web"};
    CHECK(us_engine_upsert_pod(e, &r, &err) == US_OK);
    CHECK(pod_named(e, "web-b", &p) && p.phase == US_PHASE_PENDING);
    CHECK(us_engine_pod_count(e) == 2);
    /* its room stays held whatever the time: another workload is
     * pipelined behind it (web itself waits for its own terminating pod) */
    CHECK(workload(e, "other", "q", 1, 8, 1000) == US_OK);
    CHECK(us_engine_run_cycle(e, 1000, &err) == US_OK);
    CHECK(us_engine_decision_count(e) == 1);
    CHECK(us_engine_decision(e, 0, &d) == US_OK && d.op == US_DECISION_PIPELINE);
    CHECK_STR(d.pod, "other-0");
    CHECK(d.nwaits_for == 1);
    CHECK_STR(d.waits_for[0], "web-a");
    CHECK(pod_named(e, "web-b", &p) && p.phase == US_PHASE_PENDING);
    /* gone: the room is free, the pipelined pod binds */
    CHECK(us_engine_remove_pod(e, "web-a", &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 1001, &err) == US_OK);
    CHECK(pod_named(e, "other-0", &p) && p.phase == US_PHASE_RUNNING);
    CHECK(count_phase(e, US_PHASE_RELEASING) == 0);
    CHECK(us_engine_remove_workload(e, "other", 1001, &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 1100, &err) == US_OK);
    CHECK(pod_named(e, "web-b", &p) && p.phase == US_PHASE_RUNNING);
    /* a terminating pod the engine never saw is added beside the replicas */
    CHECK(us_engine_upsert_pod_json(e, "{\"name\": \"web-old\", \"workload\": \"web\", \"node\": \"n1\", "
                                       "\"state\": \"releasing\"}", &err) != US_OK); /* no room on n1 */
    CHECK(node(e, "n2", 8) == US_OK);
    CHECK(us_engine_upsert_pod_json(e, "{\"name\": \"web-old\", \"workload\": \"web\", \"node\": \"n2\", "
                                       "\"state\": \"releasing\"}", &err) == US_OK);
    CHECK(count_phase(e, US_PHASE_RELEASING) == 1);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 1);
    CHECK(count_phase(e, US_PHASE_PENDING) == 0);
    REFUSED(e, us_engine_upsert_pod_json(e, "{\"name\": \"web-x\", \"workload\": \"web\", \"state\": \"releasing\"}", &err),
            US_EINVAL, "pod.state: \"releasing\" needs a node");
    us_pod_spec t = {.name = "web-x", .workload = "web", .terminating = 1};
    REFUSED(e, us_engine_upsert_pod(e, &t, &err), US_EINVAL, "pod.terminating: a terminating pod is on a node");
    us_engine_destroy(e);
}

/* ---- queues ------------------------------------------------------------------------------ */

TEST(queue_tree_rules) {
    us_engine *e = engine();
    us_error err;
    us_queue_info q;
    CHECK(queue(e, "org", NULL, 8) == US_OK);
    CHECK(queue(e, "a", "org", 4) == US_OK);
    CHECK(queue(e, "b", "org", 4) == US_OK);
    CHECK(us_engine_queue(e, 1, &q) == US_OK);
    CHECK_STR(q.name, "a");
    CHECK_STR(q.parent, "org");
    CHECK(workload(e, "w", "a", 1, 1, 0) == US_OK);
    REFUSED(e, us_engine_upsert_workload_json(e, "{\"name\": \"x\", \"queue\": \"org\"}", 0, &err),
            US_EINVAL, "workload.queue: \"org\" is not a leaf queue");
    REFUSED(e, us_engine_upsert_queue_json(e, "{\"name\": \"c\", \"parent\": \"zz\"}", &err), US_EINVAL,
            "queue.parent: \"zz\" is not a queue");
    REFUSED(e, us_engine_upsert_queue_json(e, "{\"name\": \"org\", \"parent\": \"b\"}", &err), US_EINVAL,
            "queue.parent: \"b\" is below this queue");
    REFUSED(e, us_engine_upsert_queue_json(e, "{\"name\": \"b\", \"parent\": \"b\"}", &err), US_EINVAL,
            "queue.parent: \"b\" is the queue itself");
    REFUSED(e, us_engine_upsert_queue_json(e, "{\"name\": \"c\", \"parent\": \"a\"}", &err), US_EINVAL,
            "queue.parent: \"a\" holds workload \"w\"");
    REFUSED(e, us_engine_upsert_queue_json(e, "{\"name\": \"c\", \"resources\": {\"gpu\": {\"quota\": \"x\"}}}", &err),
            US_EINVAL, "queue.resources.gpu.quota: must be a number");
    REFUSED(e, us_engine_remove_queue(e, "org", &err), US_EBUSY, "queue \"org\" has a child queue \"a\"");
    REFUSED(e, us_engine_remove_queue(e, "a", &err), US_EBUSY, "queue \"a\" holds workload \"w\"");
    REFUSED(e, us_engine_remove_queue(e, "nope", &err), US_ENOENT, "queue \"nope\" does not exist");
    /* b is free: it goes, and the indices behind it stay right */
    CHECK(queue(e, "c", "org", 0) == US_OK);
    CHECK(workload(e, "wc", "c", 1, 1, 0) == US_OK);
    CHECK(us_engine_remove_queue(e, "b", &err) == US_OK);
    CHECK(us_engine_queue_count(e) == 3);
    for (size_t i = 0; i < us_engine_workload_count(e); i++) {
        us_workload_info w;
        us_engine_workload(e, i, &w);
        CHECK_STR(w.queue, strcmp(w.name, "w") == 0 ? "a" : "c");
    }
    /* a queue may move under another parent */
    CHECK(queue(e, "top", NULL, 0) == US_OK);
    CHECK(queue(e, "c", "top", 0) == US_OK);
    CHECK(us_engine_queue(e, 2, &q) == US_OK);
    CHECK_STR(q.name, "c");
    CHECK_STR(q.parent, "top");
    us_engine_destroy(e);
}

TEST(queue_pools_from_c) {
    us_engine *e = engine();
    us_error err;
    us_queue_spec q;
    us_queue_pool_spec pools[] = {{"p1", {2, 0, 0}, {-1, -1, -1}, {1, 1, 1}}, {NULL, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}}};
    us_queue_spec_init(&q);
    q.name = "q";
    q.pools = pools;
    q.npools = 1;
    CHECK(us_engine_upsert_queue(e, &q, &err) == US_OK);
    q.npools = 2;
    REFUSED(e, us_engine_upsert_queue(e, &q, &err), US_EINVAL, "queue.pools[1]: NULL pool name");
    pools[1].pool = "p1";
    REFUSED(e, us_engine_upsert_queue(e, &q, &err), US_EINVAL, "queue.pools.p1: duplicate key");
    us_engine_destroy(e);
}

/* ---- workloads ---------------------------------------------------------------------------- */

TEST(workload_errors) {
    us_engine *e = engine();
    us_workload_spec w;
    CHECK(queue(e, "q", NULL, 8) == US_OK);
    CHECK(workload(e, "w", "q", 2, 1, 10) == US_OK);
    us_workload_spec_init(&w);
    w.name = "x";
    w.queue = "team-z";
    REFUSED(e, us_engine_upsert_workload(e, &w, 10, &err), US_EINVAL, "workload.queue: \"team-z\" is not a queue");
    w.queue = "q";
    w.preemptibility = (us_preemption)9;
    REFUSED(e, us_engine_upsert_workload(e, &w, 10, &err), US_EINVAL, "workload.preemptibility: 9");
    w.preemptibility = US_PREEMPTION_DEFAULT;
    w.replicas = 2;
    w.min_member = 3;
    REFUSED(e, us_engine_upsert_workload(e, &w, 10, &err), US_EINVAL, "workload.min_member: 3 is more than replicas (2)");
    w.min_member = 0;
    REFUSED(e, us_engine_upsert_workload(e, &w, 5, &err), US_EINVAL, "now: 5 is before the engine's time 10");
    REFUSED(e, us_engine_upsert_workload_json(e, "{\"name\": \"x\", \"queue\": \"q\", \"duration\": 5}", 10, &err),
            US_EINVAL, "workload.duration: a simulator field");
    REFUSED(e, us_engine_upsert_workload_json(e, "{\"name\": \"x\", \"queue\": \"q\", \"submit_at\": 5}", 10, &err),
            US_EINVAL, "workload.submit_at: a simulator field");
    REFUSED(e, us_engine_upsert_workload_json(e, "{\"name\": \"x\", \"queue\": \"q\", \"pods\": []}", 10, &err),
            US_EINVAL, "workload.pods: a simulator field");
    REFUSED(e, us_engine_upsert_workload_json(e, "{\"name\": \"x\", \"queue\": \"q\", \"requests\": {\"gpu\": 1.5}}", 10, &err),
            US_EINVAL, "workload.requests.gpu: 1.5 is not a whole number of GPUs");
    /* a live workload: only replicas, min_member and grace may change */
    REFUSED(e, us_engine_upsert_workload_json(e, "{\"name\": \"w\", \"queue\": \"q\", \"replicas\": 2, \"requests\": {\"gpu\": 2}}", 10, &err),
            US_EINVAL, "workload.requests: cannot change on live workload \"w\"");
    REFUSED(e, us_engine_upsert_workload_json(e, "{\"name\": \"w\", \"queue\": \"q\", \"replicas\": 2, \"priority\": \"build\", \"requests\": {\"gpu\": 1}}", 10, &err),
            US_EINVAL, "workload.priority: cannot change");
    REFUSED(e, us_engine_remove_workload(e, "nope", 10, &err), US_ENOENT, "workload \"nope\" is not a live workload");
    REFUSED(e, us_engine_complete_workload(e, "nope", 10, &err), US_ENOENT, "workload \"nope\"");
    us_engine_destroy(e);
}

static int workloads_named(const us_engine *e, const char *name) {
    int n = 0;
    us_workload_info w;
    for (size_t i = 0; i < us_engine_workload_count(e); i++)
        if (us_engine_workload(e, i, &w) == US_OK && strcmp(w.name, name) == 0) n++;
    return n;
}

static int deployment(us_engine *e, const char *name, int replicas, double now) {
    us_workload_spec w;
    us_workload_spec_init(&w);
    w.name = name;
    w.queue = "q";
    w.controller = US_CONTROLLER_DEPLOYMENT;
    w.replicas = replicas;
    w.requests.gpu = 1;
    return us_engine_upsert_workload(e, &w, now, NULL);
}

TEST(workload_resend_scale_and_finish) {
    us_engine *e = engine();
    us_error err;
    us_pod_info p;
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 8) == US_OK);
    CHECK(deployment(e, "w", 2, 0) == US_OK);
    CHECK(us_engine_pod_count(e) == 2);
    char *before = dump(e);
    CHECK(deployment(e, "w", 2, 0) == US_OK); /* the same spec again: nothing */
    char *after = dump(e);
    CHECK_STR(after, before);
    free(before);
    free(after);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 2);
    CHECK(deployment(e, "w", 4, 10) == US_OK); /* scale up */
    CHECK(count_phase(e, US_PHASE_PENDING) == 2);
    CHECK(pod_named(e, "w-3", &p) != NULL);
    CHECK(deployment(e, "w", 1, 10) == US_OK); /* scale down: pending first, then newest */
    CHECK(count_phase(e, US_PHASE_PENDING) == 0);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 1);
    CHECK(count_phase(e, US_PHASE_RELEASING) == 1);
    CHECK(pod_named(e, "w-0", &p) && p.phase == US_PHASE_RUNNING);
    CHECK(us_engine_complete_workload(e, "w", 20, &err) == US_OK);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 0);
    /* a job's gang is its replicas unless min_member says otherwise:
     * growing it re-forms the gang, which the next cycle stops, a
     * decision per pod, so it starts again whole */
    CHECK(workload(e, "g", "q", 2, 1, 20) == US_OK);
    CHECK(us_engine_run_cycle(e, 20, &err) == US_OK);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 2);
    CHECK(workload(e, "g", "q", 3, 1, 20) == US_OK);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 2); /* nothing stopped behind the caller's back */
    CHECK(us_engine_run_cycle(e, 20, &err) == US_OK);
    CHECK(count_decisions(e, US_DECISION_EVICT, "stalegangeviction") == 2);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 0);
    CHECK(count_phase(e, US_PHASE_PENDING) == 3);
    CHECK(us_engine_remove_workload(e, "g", 20, &err) == US_OK);
    /* deleted while a pod terminates: the old one lingers, a new one may start */
    CHECK(workload(e, "v", "q", 1, 1, 20) == US_OK);
    CHECK(us_engine_run_cycle(e, 20, &err) == US_OK);
    CHECK(us_engine_remove_workload(e, "v", 30, &err) == US_OK);
    CHECK(pod_named(e, "v-0", &p) == NULL); /* releasing only */
    CHECK(workload(e, "v", "q", 1, 1, 30) == US_OK);
    CHECK(pod_named(e, "v-0", &p) && p.phase == US_PHASE_PENDING);
    CHECK(workloads_named(e, "v") == 2); /* the terminating v and the new v */
    CHECK(us_engine_run_cycle(e, 100, &err) == US_OK);
    CHECK(workloads_named(e, "v") == 1); /* the old one is gone with its pod */
    CHECK(us_engine_workload_count(e) == 1);
    /* names are found again after the old one went (the index follows) */
    CHECK(workload(e, "v", "q", 1, 1, 100) == US_OK);
    CHECK(workloads_named(e, "v") == 1);
    CHECK(us_engine_remove_workload(e, "v", 100, &err) == US_OK);
    /* a new workload's pods exist for every call that follows */
    CHECK(workload(e, "x", "q", 1, 1, 100) == US_OK);
    CHECK(us_engine_remove_pod(e, "x-0", &err) == US_OK);
    CHECK(pod_named(e, "x-0", &p) && p.phase == US_PHASE_PENDING);
    us_engine_destroy(e);
}

/* ---- pods ------------------------------------------------------------------------------------ */

TEST(pod_reports) {
    us_engine *e = engine();
    us_error err;
    us_pod_info p;
    us_pod_spec s = {.name = "train-abc", .workload = "w", .node = "n1"};
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(node(e, "n2", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 16) == US_OK);
    CHECK(workload(e, "w", "q", 2, 4, 0) == US_OK);
    /* a pod already running when the control plane starts: adopted under its own name */
    CHECK(us_engine_upsert_pod(e, &s, &err) == US_OK);
    CHECK(pod_named(e, "train-abc", &p) && p.phase == US_PHASE_RUNNING);
    CHECK_STR(p.node, "n1");
    CHECK(count_phase(e, US_PHASE_PENDING) == 1);
    s.name = "train-def";
    s.node = "n1";
    CHECK(us_engine_upsert_pod(e, &s, &err) == US_OK); /* exactly fills n1 */
    s.name = "train-ghi";
    REFUSED(e, us_engine_upsert_pod(e, &s, &err), US_EINVAL, "pod.workload: \"w\" has no pending pod");
    s.name = "train-def";
    s.workload = NULL;
    s.node = "n3";
    REFUSED(e, us_engine_upsert_pod(e, &s, &err), US_ENOENT, "pod.node: \"n3\" is not a node");
    s.name = "ghost";
    s.node = "n1";
    REFUSED(e, us_engine_upsert_pod(e, &s, &err), US_ENOENT, "pod \"ghost\" is unknown");
    s.workload = "zz";
    REFUSED(e, us_engine_upsert_pod(e, &s, &err), US_ENOENT, "pod.workload: \"zz\" is not a live workload");
    REFUSED(e, us_engine_upsert_pod_json(e, "{\"name\": \"train-def\", \"state\": \"running\"}", &err),
            US_EINVAL, "pod.state: \"running\" needs a node");
    REFUSED(e, us_engine_upsert_pod_json(e, "{\"name\": \"train-def\", \"state\": \"gone\"}", &err),
            US_EINVAL, "pod.state: \"gone\" is not a state");
    REFUSED(e, us_engine_upsert_pod_json(e, "{\"name\": \"train-def\", \"nodes\": \"n1\"}", &err),
            US_EINVAL, "pod.nodes: unknown field");
    REFUSED(e, us_engine_remove_pod(e, "ghost", &err), US_ENOENT, "pod \"ghost\" is unknown");
    /* names past Kubernetes' 253 characters are refused here as at load */
    {
        char long_name[300];
        memset(long_name, 'p', 254);
        long_name[254] = '\0';
        s.name = long_name;
        s.workload = "w";
        s.node = "n1";
        REFUSED(e, us_engine_upsert_pod(e, &s, &err), US_EINVAL,
                "pod.name: is 254 characters long, more than the 253");
        s.name = "train-def";
        s.workload = NULL;
    }
    /* a bind that failed: back to pending */
    CHECK(us_engine_upsert_pod_json(e, "{\"name\": \"train-def\"}", &err) == US_OK);
    CHECK(pod_named(e, "train-def", &p) && p.phase == US_PHASE_PENDING && !p.node);
    /* moved to n2 by someone else */
    CHECK(us_engine_upsert_pod_json(e, "{\"name\": \"train-def\", \"node\": \"n2\"}", &err) == US_OK);
    CHECK(pod_named(e, "train-def", &p) && p.phase == US_PHASE_RUNNING);
    CHECK_STR(p.node, "n2");
    /* gone: its controller recreates it pending; the gang (2 of 2) broke,
     * so the next cycle stops train-abc with a decision of its own, and
     * the gang waits for it to terminate rather than pipeline behind it */
    CHECK(us_engine_remove_pod(e, "train-def", &err) == US_OK);
    CHECK(pod_named(e, "train-def", &p) && p.phase == US_PHASE_PENDING);
    CHECK(pod_named(e, "train-abc", &p) && p.phase == US_PHASE_RUNNING);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(count_decisions(e, US_DECISION_EVICT, "stalegangeviction") == 1);
    CHECK(count_decisions(e, US_DECISION_PIPELINE, NULL) + count_decisions(e, US_DECISION_PIPELINE, "allocate") == 0);
    CHECK(count_phase(e, US_PHASE_PENDING) == 2);
    CHECK(us_engine_run_cycle(e, 30, &err) == US_OK);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 2);
    CHECK(pod_named(e, "train-def", &p) && p.phase == US_PHASE_RUNNING);
    us_engine_destroy(e);
}

/* A job of three workers, min_member 3, through the C spec: as each
 * worker finishes, the caller says the pod is gone and counts it in
 * succeeded (replicas one fewer).  The workers left run on, below
 * min_member, never stopped as a broken gang; the same gang without the
 * count is stopped whole.  Once nothing holds room, it starts again with
 * min_member less the succeeded pods. */
static int job(us_engine *e, const char *name, int replicas, int min_member, int succeeded, double now) {
    us_workload_spec w;
    us_error err;
    us_workload_spec_init(&w);
    w.name = name;
    w.queue = "q";
    w.controller = US_CONTROLLER_JOB;
    w.replicas = replicas;
    w.min_member = min_member;
    w.succeeded = succeeded;
    w.requests.gpu = 2;
    int rc = us_engine_upsert_workload(e, &w, now, &err);
    if (rc != US_OK) fprintf(stderr, "  %s\n", err.message);
    return rc;
}

TEST(succeeded_workers_keep_their_gang_whole) {
    us_engine *e = engine();
    us_error err;
    us_pod_info p;
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 8) == US_OK);
    CHECK(job(e, "j", 3, 3, 0, 0) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 3);
    /* j-2 finished: gone, one replica fewer, one succeeded */
    CHECK(us_engine_remove_pod(e, "j-2", &err) == US_OK);
    CHECK(job(e, "j", 2, 3, 1, 10) == US_OK);
    CHECK(us_engine_run_cycle(e, 10, &err) == US_OK);
    CHECK(count_decisions(e, US_DECISION_EVICT, "stalegangeviction") == 0);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 2);
    CHECK(count_phase(e, US_PHASE_PENDING) == 0); /* no replacement for a pod that succeeded */
    CHECK(pod_named(e, "j-0", &p) && p.phase == US_PHASE_RUNNING);
    CHECK(pod_named(e, "j-1", &p) && p.phase == US_PHASE_RUNNING);
    /* j-1 was lost (its node's kubelet, say): the gang keeps j-0, whole
     * with its succeeded pod, and places the replacement beside it */
    CHECK(us_engine_remove_pod(e, "j-1", &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 20, &err) == US_OK);
    CHECK(count_decisions(e, US_DECISION_EVICT, "stalegangeviction") == 0);
    CHECK(count_decisions(e, US_DECISION_BIND, "allocate") == 1);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 2);
    /* both lost: nothing holds room, and the gang starts again with
     * min_member less its succeeded pod, two at once (not three, which
     * its two replicas could never make) */
    CHECK(us_engine_remove_pod(e, "j-0", &err) == US_OK);
    CHECK(us_engine_remove_pod(e, "j-1", &err) == US_OK);
    CHECK(count_phase(e, US_PHASE_PENDING) == 2);
    CHECK(us_engine_run_cycle(e, 25, &err) == US_OK);
    CHECK(count_decisions(e, US_DECISION_BIND, "allocate") == 2);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 2);
    /* the state document says it */
    char *doc = NULL;
    size_t len;
    CHECK(us_engine_state_json(e, &doc, &len, &err) == US_OK);
    CHECK(doc && strstr(doc, "\"succeeded\"") != NULL);
    us_free(doc);
    /* the same loss without the count: stopped whole */
    CHECK(job(e, "k", 2, 2, 0, 30) == US_OK);
    CHECK(us_engine_run_cycle(e, 30, &err) == US_OK);
    CHECK(us_engine_remove_pod(e, "k-1", &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 40, &err) == US_OK);
    CHECK(count_decisions(e, US_DECISION_EVICT, "stalegangeviction") == 1);
    CHECK(pod_named(e, "j-0", &p) && p.phase == US_PHASE_RUNNING);
    us_engine_destroy(e);
}

/* A control plane reports the pods of a workload by their real names, bound
 * or not, in any order: each takes a place of its own (none takes another's
 * name away), whatever the mix, and one more than the replicas is refused.
 * Then a cycle binds each under its real name. */
TEST(reported_pods_each_take_a_place_of_their_own) {
    static const char *const order[][4] = {{"p0", "p1", "p2", "p3"}, {"p3", "p2", "p1", "p0"}, {"p2", "p0", "p3", "p1"}};
    for (int mix = 0; mix < 8; mix++)
        for (int o = 0; o < 3; o++) {
            us_engine *e = engine();
            us_error err;
            us_pod_info p;
            CHECK(node(e, "n1", 8) == US_OK);
            CHECK(queue(e, "q", NULL, 16) == US_OK);
            CHECK(workload(e, "w", "q", 4, 1, 0) == US_OK);
            for (int i = 0; i < 4; i++) {
                const char *name = order[o][i];
                /* mix's bit i: pod i already bound (n1), else pending */
                us_pod_spec s = {.name = name, .workload = "w", .node = (mix >> (name[1] - '0')) & 1 ? "n1" : NULL};
                CHECK(us_engine_upsert_pod(e, &s, &err) == US_OK);
                /* and reported again (a control plane resends its state): no change */
                CHECK(us_engine_upsert_pod(e, &s, &err) == US_OK);
            }
            for (int i = 0; i < 4; i++) {
                char name[4] = {'p', (char)('0' + i), 0};
                CHECK(pod_named(e, name, &p));
                CHECK(p.phase == (((mix >> i) & 1) ? US_PHASE_RUNNING : US_PHASE_PENDING));
            }
            us_pod_spec extra = {.name = "p4", .workload = "w", .node = NULL};
            REFUSED(e, us_engine_upsert_pod(e, &extra, &err), US_EINVAL, "pod.workload: \"w\" has no pending pod");
            CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
            size_t binds = 0;
            for (size_t i = 0; i < us_engine_decision_count(e); i++) {
                us_decision_info d;
                CHECK(us_engine_decision(e, i, &d) == US_OK);
                if (d.op != US_DECISION_BIND) continue;
                CHECK(d.pod[0] == 'p' && d.pod[1] >= '0' && d.pod[1] <= '3' && !((mix >> (d.pod[1] - '0')) & 1));
                binds++;
            }
            /* all pending (a gang of 4 whole): each binds under its own name */
            if (mix == 0) CHECK(binds == 4);
            us_engine_destroy(e);
        }
}

TEST(evicted_pod_reported_gone_frees_its_room_at_once) {
    us_engine *e = engine();
    us_error err;
    us_pod_info p;
    us_decision_info d;
    CHECK(node(e, "n1", 1) == US_OK);
    CHECK(queue(e, "q", NULL, 1) == US_OK);
    CHECK(bg_queue(e, "bg") == US_OK);
    CHECK(bg_workload(e, "burn", US_CONTROLLER_DEPLOYMENT, 1, 1, 0) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(workload(e, "w", "q", 1, 1, 1) == US_OK);
    CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
    CHECK(us_engine_decision_count(e) == 2);
    CHECK(us_engine_decision(e, 0, &d) == US_OK && d.op == US_DECISION_EVICT);
    CHECK_STR(d.workload, "burn");
    CHECK_STR(d.evictor, "w");
    CHECK(us_engine_decision(e, 1, &d) == US_OK && d.op == US_DECISION_PIPELINE);
    CHECK(d.nwaits_for == 1);
    CHECK_STR(d.waits_for[0], "burn-0");
    CHECK(us_engine_decision(e, 2, &d) == US_ENOENT);
    /* the pipelined pod cannot run before the burn pod is gone */
    REFUSED(e, us_engine_upsert_pod_json(e, "{\"name\": \"w-0\", \"node\": \"n1\"}", &err), US_EINVAL,
            "pod.node: \"n1\" has not enough gpu for pod \"w-0\"");
    /* still running, as far as the cluster knows: it is terminating, as
     * decided, and holds its room past its grace period (5 s) until it is
     * reported gone: the pipelined pod does not bind over it */
    CHECK(us_engine_upsert_pod_json(e, "{\"name\": \"burn-0\", \"node\": \"n1\"}", &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 100, &err) == US_OK);
    CHECK(us_engine_decision_count(e) == 0);
    CHECK(count_phase(e, US_PHASE_RELEASING) == 1);
    CHECK(count_phase(e, US_PHASE_PIPELINED) == 1);
    CHECK(us_engine_remove_pod(e, "burn-0", &err) == US_OK); /* it terminated */
    CHECK(us_engine_upsert_pod_json(e, "{\"name\": \"w-0\", \"node\": \"n1\"}", &err) == US_OK);
    CHECK(pod_named(e, "w-0", &p) && p.phase == US_PHASE_RUNNING);
    CHECK(pod_named(e, "burn-0", &p) && p.phase == US_PHASE_PENDING);
    us_engine_destroy(e);
}

/* A control plane reports a pipelined pod as it is: unbound.  It stays
 * pipelined, so the gang it belongs to does not break and its pod already
 * bound elsewhere is not stopped (tests/kube/test-replay.sh found serve's
 * gang of two, one pod bound and one pipelined, evicted whole a cycle
 * later); it binds once the background pods it waits for are gone. */
/* Node n1's 8 GPUs taken by 8 burn-in pods (grace 5 s), queue q (16 GPUs
 * of quota) empty: an AI pod placed there is pipelined behind them. */
static us_engine *burning_node(void) {
    us_engine *e = engine();
    us_error err;
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 16) == US_OK);
    CHECK(bg_queue(e, "bg") == US_OK);
    CHECK(bg_workload(e, "burn", US_CONTROLLER_DEPLOYMENT, 8, 1, 0) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(count_phase(e, US_PHASE_RUNNING) == 8);
    return e;
}

TEST(pipelined_pod_reported_unbound_stays_pipelined) {
    us_engine *e = burning_node();
    us_error err;
    us_pod_info p;
    us_decision_info d;
    CHECK(node(e, "n2", 8) == US_OK);
    CHECK(workload(e, "w", "q", 2, 8, 1) == US_OK); /* a gang of two 8-GPU pods */
    CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
    CHECK(count_decisions(e, US_DECISION_EVICT, "backgroundpods") == 8);
    CHECK(count_decisions(e, US_DECISION_BIND, "allocate") == 1);
    CHECK(count_decisions(e, US_DECISION_PIPELINE, "allocate") == 1);
    const char *bound = NULL, *piped = NULL;
    for (size_t i = 0; i < us_engine_decision_count(e); i++) {
        CHECK(us_engine_decision(e, i, &d) == US_OK);
        if (d.op == US_DECISION_BIND) bound = strcmp(d.pod, "w-0") == 0 ? "w-0" : "w-1";
        if (d.op == US_DECISION_PIPELINE) piped = strcmp(d.pod, "w-0") == 0 ? "w-0" : "w-1";
    }
    CHECK(bound && piped && strcmp(bound, piped) != 0);
    /* the cluster as the control plane sees it: one bound on n2, one not */
    us_pod_spec run = {.name = bound, .workload = "w", .node = "n2"}, wait = {.name = piped, .workload = "w"};
    CHECK(us_engine_upsert_pod(e, &run, &err) == US_OK);
    CHECK(us_engine_upsert_pod(e, &wait, &err) == US_OK);
    CHECK(pod_named(e, piped, &p) && p.phase == US_PHASE_PIPELINED);
    CHECK_STR(p.node, "n1");
    CHECK(us_engine_run_cycle(e, 2, &err) == US_OK); /* the burn-in still terminates */
    CHECK(count_decisions(e, US_DECISION_EVICT, "stalegangeviction") == 0);
    CHECK(pod_named(e, bound, &p) && p.phase == US_PHASE_RUNNING);
    CHECK(pod_named(e, piped, &p) && p.phase == US_PHASE_PIPELINED);
    for (int i = 0; i < 8; i++) {
        char name[24];
        snprintf(name, sizeof name, "burn-%d", i);
        CHECK(us_engine_remove_pod(e, name, &err) == US_OK); /* terminated */
    }
    CHECK(us_engine_run_cycle(e, 3, &err) == US_OK);
    CHECK(us_engine_decision_count(e) == 1);
    CHECK(us_engine_decision(e, 0, &d) == US_OK && d.op == US_DECISION_BIND);
    CHECK_STR(d.pod, piped);
    CHECK_STR(d.node, "n1");
    us_engine_destroy(e);
}

/* A pipelined pod reported pending and pinned to another node (its
 * affinity names that node) cannot stay planned where it was: it is
 * pending again, and the next cycle plans it where its pin is.  fuzz_api
 * found it left pipelined on the first node, pinned to the second: a
 * state that does not load back. */
TEST(pipelined_pod_reported_pinned_elsewhere_is_planned_anew) {
    us_engine *e = burning_node();
    us_error err;
    us_pod_info p;
    us_decision_info d;
    CHECK(workload(e, "w", "q", 1, 8, 1) == US_OK);
    CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
    CHECK(pod_named(e, "w-0", &p) && p.phase == US_PHASE_PIPELINED);
    CHECK_STR(p.node, "n1");
    CHECK(node(e, "n2", 8) == US_OK);
    us_pod_spec wait = {.name = "w-0", .workload = "w", .pin = "n2"};
    CHECK(us_engine_upsert_pod(e, &wait, &err) == US_OK);
    CHECK(pod_named(e, "w-0", &p) && p.phase == US_PHASE_PENDING && p.node == NULL);
    char *state = NULL;
    CHECK(us_engine_state_json(e, &state, NULL, &err) == US_OK);
    CHECK(state && !strstr(state, "pipelined")); /* a pending pod is not written */
    us_free(state);
    CHECK(us_engine_run_cycle(e, 2, &err) == US_OK);
    size_t binds = 0;
    for (size_t i = 0; i < us_engine_decision_count(e); i++) {
        CHECK(us_engine_decision(e, i, &d) == US_OK);
        if (d.op == US_DECISION_BIND && !strcmp(d.pod, "w-0")) {
            CHECK_STR(d.node, "n2");
            binds++;
        }
    }
    CHECK(binds == 1);
    us_engine_destroy(e);
}

/* A pod sharing a device holds one device, in what the node holds now and
 * where the plan ends alike: a pod reported running takes a device with
 * room in both (fuzz_api found one put on a device that was free now but
 * filled by pipelined pods, a plan over capacity). */
TEST(reported_fractional_pod_takes_a_device_free_now_and_as_planned) {
    us_engine *e = checked_engine();
    us_error err;
    CHECK(e != NULL);
    if (!e) return;
    CHECK(node(e, "n0", 3) == US_OK);
    CHECK(queue(e, "q", NULL, 3) == US_OK);
    /* device 0 held by two half-GPU pods terminating until removed */
    CHECK(workload(e, "t", "q", 2, 0.5, 0) == US_OK);
    for (int k = 0; k < 2; k++) {
        us_pod_spec run = {.name = k ? "t-1" : "t-0", .workload = "t", .node = "n0"};
        CHECK(us_engine_upsert_pod(e, &run, &err) == US_OK);
        run.terminating = 1;
        CHECK(us_engine_upsert_pod(e, &run, &err) == US_OK);
    }
    CHECK(us_engine_remove_workload(e, "t", 0, &err) == US_OK);
    CHECK(count_phase(e, US_PHASE_RELEASING) == 2);
    /* four half-GPU pods planned on the node, all waiting behind them:
     * devices 0 and 1 are full where the plan ends, device 1 free now */
    CHECK(workload(e, "a", "q", 4, 0.5, 1) == US_OK);
    CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
    CHECK(count_phase(e, US_PHASE_PIPELINED) == 4);
    /* a pod reported running there takes device 2, free in both */
    CHECK(workload(e, "b", "q", 1, 0.5, 1) == US_OK);
    us_pod_spec b = {.name = "b-0", .workload = "b", .node = "n0"};
    CHECK(us_engine_upsert_pod(e, &b, &err) == US_OK);
    char *state = NULL;
    CHECK(us_engine_state_json(e, &state, NULL, &err) == US_OK);
    const char *at = state ? strstr(state, "\"b-0\"") : NULL;
    const char *dev = at ? strstr(at, "\"device\":") : NULL;
    CHECK(dev && strtol(dev + strlen("\"device\":"), NULL, 10) == 2);
    us_free(state);
    CHECK(us_engine_run_cycle(e, 2, &err) == US_OK); /* the plan is within capacity */
    /* with device 2 taken too, no device has room in both: refused */
    CHECK(workload(e, "c", "q", 2, 0.5, 2) == US_OK);
    us_pod_spec c = {.name = "c-0", .workload = "c", .node = "n0"};
    CHECK(us_engine_upsert_pod(e, &c, &err) == US_OK); /* device 2's other half */
    c.name = "c-1";
    REFUSED(e, us_engine_upsert_pod(e, &c, &err), US_EINVAL,
            "pod.node: \"n0\" has not enough gpu for pod \"c-1\"");
    CHECK(us_engine_run_cycle(e, 3, &err) == US_OK);
    us_engine_destroy(e);
}

/* Background work that asks a fraction of a GPU breaks a rule and is never
 * scheduled (docs/scheduling.md), but its pods reported running hold the
 * devices they were reported on: nothing evicts them, whatever order they
 * were reported in.  Reported out of pod order, they hold devices that
 * adding them anew in pod order would not choose (fullest device first),
 * so a view that re-added them would find the node full. */
TEST(fractional_background_pods_reported_running_stay_where_they_run) {
    us_engine *e = checked_engine();
    us_error err;
    us_pod_info p;
    CHECK(e != NULL);
    if (!e) return;
    CHECK(node(e, "n0", 2) == US_OK);
    CHECK(queue(e, "q", NULL, 2) == US_OK);
    CHECK(bg_queue(e, "bg") == US_OK);
    CHECK(workload(e, "ai", "q", 1, 0.3, 0) == US_OK);
    CHECK(bg_workload(e, "x", US_CONTROLLER_DEPLOYMENT, 2, 0.5, 0) == US_OK);
    CHECK(bg_workload(e, "y", US_CONTROLLER_DEPLOYMENT, 1, 0.7, 0) == US_OK);
    /* device 0: ai-0 and y-0 (0.3 + 0.7); device 1: x-0 and x-1 */
    const char *order[] = {"ai-0", "y-0", "x-0", "x-1"};
    for (int k = 0; k < 4; k++) {
        us_pod_spec run = {.name = order[k], .node = "n0"};
        CHECK(us_engine_upsert_pod(e, &run, &err) == US_OK);
    }
    for (int c = 0; c < 3; c++) {
        CHECK(us_engine_run_cycle(e, c, &err) == US_OK);
        for (int k = 0; k < 4; k++)
            CHECK(pod_named(e, order[k], &p) && p.phase == US_PHASE_RUNNING && p.node &&
                  strcmp(p.node, "n0") == 0);
        CHECK(count_decisions(e, US_DECISION_EVICT, NULL) + count_decisions(e, US_DECISION_EVICT, "backgroundpods") == 0);
        CHECK(count_phase(e, US_PHASE_RUNNING) == 4);
    }
    us_engine_destroy(e);
}

/* A pod the caller reports gone is recreated pending under its name by its
 * controller (us_engine_remove_pod).  When the same name is then reported
 * under another workload, the real pod was adopted by another owner (its
 * ownerReferences changed, as `understory serve` sees it): it joins that
 * workload, and the old one keeps its replacement under a name of its own,
 * the first "<workload>-<k>" no pod holds.  A pod the caller itself named
 * in one workload is still refused in another, and a refused report
 * renames nothing. */
TEST(a_pod_adopted_by_another_workload_takes_its_name_from_the_replacement) {
    us_engine *e = engine();
    us_error err;
    us_pod_info pi;
    CHECK(node(e, "n0", 4) == US_OK);
    CHECK(queue(e, "q", NULL, 4) == US_OK);
    CHECK(workload(e, "b", "q", 2, 1, 0) == US_OK);
    us_pod_spec p = {.name = "p", .workload = "b", .node = "n0"}, b0 = {.name = "b-0", .workload = "b", .node = "n0"};
    CHECK(us_engine_upsert_pod(e, &p, &err) == US_OK);
    CHECK(us_engine_upsert_pod(e, &b0, &err) == US_OK);
    CHECK(us_engine_remove_pod(e, "p", &err) == US_OK);
    CHECK(pod_named(e, "p", &pi) && !strcmp(pi.workload, "b") && pi.phase == US_PHASE_PENDING);
    /* a pending pod the caller named stays its workload's */
    CHECK(workload(e, "c", "q", 1, 1, 0) == US_OK);
    us_pod_spec cp = {.name = "cp", .workload = "c"};
    CHECK(us_engine_upsert_pod(e, &cp, &err) == US_OK);
    CHECK(workload(e, "a", "q", 1, 1, 0) == US_OK);
    us_pod_spec stolen = {.name = "cp", .workload = "a", .node = "n0"};
    REFUSED(e, us_engine_upsert_pod(e, &stolen, &err), US_EINVAL, "pod \"cp\" belongs to workload \"c\"");
    /* a refused adoption (no room for it on n1) renames nothing */
    us_node_spec n1 = {.name = "n1", .capacity = {0, 32000, 256LL << 30}};
    CHECK(us_engine_upsert_node(e, &n1, &err) == US_OK);
    us_pod_spec nowhere = {.name = "p", .workload = "a", .node = "n1"};
    REFUSED(e, us_engine_upsert_pod(e, &nowhere, &err), US_EINVAL, "has not enough gpu");
    /* adopted: p runs in a, b's replacement takes "b-1" (b-0 is held) */
    us_pod_spec adopted = {.name = "p", .workload = "a", .node = "n0"};
    CHECK(us_engine_upsert_pod(e, &adopted, &err) == US_OK);
    CHECK(pod_named(e, "p", &pi) && !strcmp(pi.workload, "a") && pi.phase == US_PHASE_RUNNING &&
          pi.node && !strcmp(pi.node, "n0"));
    CHECK(pod_named(e, "b-1", &pi) && !strcmp(pi.workload, "b") && pi.phase == US_PHASE_PENDING);
    CHECK(pod_named(e, "b-0", &pi) && !strcmp(pi.workload, "b") && pi.phase == US_PHASE_RUNNING);
    CHECK(us_engine_pod_count(e) == 4); /* p, b-0, b-1 and cp: a's place went to p */
    /* the same adoption of a pending pod: reported pending in a */
    CHECK(us_engine_remove_pod(e, "b-0", &err) == US_OK);
    CHECK(workload(e, "a", "q", 2, 1, 0) == US_OK);
    us_pod_spec pending = {.name = "b-0", .workload = "a"};
    CHECK(us_engine_upsert_pod(e, &pending, &err) == US_OK);
    CHECK(pod_named(e, "b-0", &pi) && !strcmp(pi.workload, "a") && pi.phase == US_PHASE_PENDING);
    CHECK(pod_named(e, "b-2", &pi) && !strcmp(pi.workload, "b") && pi.phase == US_PHASE_PENDING);
    /* and of a pod being deleted: reported terminating in b, where a's
     * replacement holds its name; the replacement keeps its place in a */
    CHECK(us_engine_remove_pod(e, "p", &err) == US_OK);
    us_pod_spec dying = {.name = "p", .workload = "b", .node = "n0", .terminating = 1};
    CHECK(us_engine_upsert_pod(e, &dying, &err) == US_OK);
    size_t releasing = 0, in_a = 0;
    for (size_t i = 0; i < us_engine_pod_count(e); i++) {
        CHECK(us_engine_pod(e, i, &pi) == US_OK);
        releasing += !strcmp(pi.name, "p") && !strcmp(pi.workload, "b") && pi.phase == US_PHASE_RELEASING;
        in_a += !strcmp(pi.workload, "a");
    }
    CHECK(releasing == 1 && in_a == 2);
    CHECK(pod_named(e, "a-0", &pi) && !strcmp(pi.workload, "a") && pi.phase == US_PHASE_PENDING);
    us_engine_destroy(e);
}

TEST(many_pods_reported_gone_then_read) {
    us_engine *e = engine();
    us_error err;
    size_t evicted = 0;
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(node(e, "n2", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 16) == US_OK);
    CHECK(bg_queue(e, "bg") == US_OK);
    CHECK(bg_workload(e, "burn", US_CONTROLLER_DEPLOYMENT, 16, 1, 0) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(workload(e, "w", "q", 2, 8, 1) == US_OK);
    CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
    size_t before = us_engine_pod_count(e);
    for (size_t i = 0; i < us_engine_decision_count(e); i++) {
        us_decision_info d;
        us_engine_decision(e, i, &d);
        if (d.op != US_DECISION_EVICT) continue;
        CHECK(us_engine_remove_pod(e, d.pod, &err) == US_OK);
        REFUSED(e, us_engine_remove_pod(e, "nobody", &err), US_ENOENT, "pod \"nobody\" is unknown");
        evicted++;
    }
    CHECK(evicted == 16);
    CHECK(us_engine_pod_count(e) == before - evicted); /* the terminated ones are gone */
    CHECK(count_phase(e, US_PHASE_RELEASING) == 0);
    CHECK(us_engine_run_cycle(e, 2, &err) == US_OK);
    CHECK(us_engine_decision_count(e) == 2); /* the gang binds at once */
    us_engine_destroy(e);
}

/* ---- cycles, events ----------------------------------------------------------------------- */

typedef struct seen {
    int events, refused;
    char reasons[512];
} seen;

static void on_event(us_engine *e, const us_event_info *ev, void *data) {
    seen *s = data;
    us_error err;
    s->events++;
    strncat(s->reasons, ev->reason, sizeof s->reasons - strlen(s->reasons) - 2);
    strcat(s->reasons, " ");
    /* reading is fine, changing is not */
    (void)us_engine_pod_count(e);
    if (us_engine_run_cycle(e, 100, &err) == US_EBUSY && node(e, "zz", 1) == US_EBUSY) s->refused++;
    us_engine_destroy(e); /* ignored: the cycle still uses it */
}

TEST(cycle_events_and_callback) {
    us_engine *e = engine();
    us_error err;
    us_event_info ev;
    seen s = {0, 0, ""};
    CHECK(node(e, "n1", 2) == US_OK);
    CHECK(queue(e, "q", NULL, 2) == US_OK);
    CHECK(bg_queue(e, "bg") == US_OK);
    CHECK(bg_workload(e, "burn", US_CONTROLLER_DEPLOYMENT, 2, 1, 0) == US_OK);
    us_engine_on_event(e, on_event, &s);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(s.events == 0);
    CHECK(workload(e, "w", "q", 2, 1, 5) == US_OK);
    REFUSED(e, us_engine_run_cycle(e, 4, &err), US_EINVAL, "now: 4 is before the engine's time 5");
    CHECK(us_engine_run_cycle(e, 5, &err) == US_OK);
    CHECK(s.events == (int)us_engine_event_count(e));
    CHECK(s.events >= 1 && s.refused == s.events);
    CHECK_HAS(s.reasons, "Evict");
    CHECK(us_engine_event(e, 0, &ev) == US_OK);
    CHECK_STR(ev.reason, "Evict");
    CHECK_STR(ev.object, "burn");
    CHECK(ev.nannotations == 3);
    CHECK_STR(ev.annotations[0].key, "evictor-action-type");
    CHECK_STR(ev.annotations[0].value, "backgroundpods");
    CHECK_STR(ev.annotations[2].value, "w");
    CHECK(us_engine_event(e, 99, &ev) == US_ENOENT);
    CHECK(us_engine_cycle_count(e) == 2);
    CHECK(us_engine_time(e) == 5);
    us_engine_on_event(e, NULL, NULL);
    CHECK(us_engine_run_cycle(e, 10, &err) == US_OK);
    us_engine_destroy(e);
}

/* check_invariants: the engine checks every cycle and decides exactly what
 * an unchecked engine decides (the check reads, never changes). */
TEST(invariant_checks_on_request) {
    us_engine *e[2] = {NULL, NULL};
    us_error err;
    char *seen[2] = {NULL, NULL};
    CHECK_STR(us_strerror(US_EINVARIANT), "invariant broken");
    for (int k = 0; k < 2; k++) {
        us_engine_options o;
        us_engine_options_init(&o);
        CHECK(o.check_invariants == 0);
        o.check_invariants = k;
        CHECK(us_engine_create(&o, &e[k], &err) == US_OK);
        if (!e[k]) return;
        CHECK(node(e[k], "n1", 4) == US_OK && node(e[k], "n2", 4) == US_OK);
        CHECK(queue(e[k], "q", NULL, 8) == US_OK && bg_queue(e[k], "bg") == US_OK);
        CHECK(bg_workload(e[k], "burn", US_CONTROLLER_DEPLOYMENT, 4, 1, 0) == US_OK);
        CHECK(us_engine_run_cycle(e[k], 0, &err) == US_OK);
        CHECK(workload(e[k], "w", "q", 2, 2, 10) == US_OK);
        for (int t = 10; t <= 30; t += 10) CHECK(us_engine_run_cycle(e[k], t, &err) == US_OK);
        seen[k] = dump(e[k]);
        us_engine_destroy(e[k]);
    }
    CHECK(seen[0] && seen[1] && strcmp(seen[0], seen[1]) == 0);
    CHECK_HAS(seen[1], "w-1");
    free(seen[0]);
    free(seen[1]);
}

/* Every API function, called from inside the event callback: the readers
 * work, the changers return US_EBUSY and change nothing, on_event works
 * (from the next event on), destroy is ignored.  None of them may crash. */
typedef struct every {
    int events, calls, busy, wrong;
    us_engine *other;            /* made by us_engine_create from inside */
    char *before;                /* the engine as the first event found it */
} every;

#define BUSY(call)                                                 \
    do {                                                           \
        us_error err_ = {0};                                       \
        (void)err_;                                                \
        ev_->calls++;                                              \
        if ((call) == US_EBUSY) ev_->busy++;                       \
        else {                                                     \
            ev_->wrong++;                                          \
            fprintf(stderr, "  not refused inside the callback: %s\n", #call); \
        }                                                          \
    } while (0)

static void every_call(us_engine *e, const us_event_info *ev, void *data) {
    every *ev_ = data;
    us_engine_options o;
    us_queue_spec q;
    us_workload_spec w;
    us_node_spec n = {0};
    us_pod_spec pod = {.name = "a-0", .workload = "a", .node = "n1"};
    us_pod_info pi;
    us_node_info ni;
    us_queue_info qi;
    us_workload_info wi;
    us_decision_info di;
    us_event_info ei;
    us_error cerr;
    (void)ev;
    ev_->events++;
    if (ev_->events > 1) return;
    ev_->before = dump(e);
    us_engine_options_init(&o);
    us_queue_spec_init(&q);
    us_workload_spec_init(&w);
    q.name = "new";
    w.name = "new";
    w.queue = "q";
    n.name = "new";
    n.capacity = (us_resources){1, 1000, 1 << 30};
    if (!us_version()[0] || strcmp(us_strerror(US_EBUSY), "busy") != 0) ev_->wrong++;
    if (us_engine_create(&o, &ev_->other, &cerr) != US_OK) ev_->wrong++;
    us_engine_destroy(e); /* ignored */
    BUSY(us_engine_load_policies(e, NULL, &err_));
    BUSY(us_engine_reload_policies(e, NULL, &err_));
    BUSY(us_engine_upsert_node(e, &n, &err_));
    BUSY(us_engine_upsert_node_json(e, "{\"name\":\"j\",\"capacity\":{\"gpu\":1}}", &err_));
    BUSY(us_engine_remove_node(e, "n1", &err_));
    BUSY(us_engine_upsert_queue(e, &q, &err_));
    BUSY(us_engine_upsert_queue_json(e, "{\"name\":\"j\"}", &err_));
    BUSY(us_engine_remove_queue(e, "q", &err_));
    BUSY(us_engine_upsert_workload(e, &w, 1, &err_));
    BUSY(us_engine_upsert_workload_json(e, "{\"name\":\"j\",\"queue\":\"q\"}", 1, &err_));
    BUSY(us_engine_remove_workload(e, "a", 1, &err_));
    BUSY(us_engine_complete_workload(e, "a", 1, &err_));
    BUSY(us_engine_upsert_pod(e, &pod, &err_));
    BUSY(us_engine_upsert_pod_json(e, "{\"name\":\"a-0\",\"node\":\"n1\"}", &err_));
    BUSY(us_engine_remove_pod(e, "a-0", &err_));
    BUSY(us_engine_run_cycle(e, 100, &err_));
    /* the readers */
    if (strcmp(us_engine_policy_id(e), "builtin") != 0) ev_->wrong++;
    if (us_engine_time(e) != 1 || us_engine_cycle_count(e) != 1) ev_->wrong++;
    if (us_engine_event_count(e) < 2 || us_engine_event(e, 1, &ei) != US_OK) ev_->wrong++;
    if (us_engine_decision_count(e) != 0 || us_engine_decision(e, 0, &di) != US_ENOENT) ev_->wrong++;
    if (us_engine_pod_count(e) != 8 || us_engine_pod(e, 0, &pi) != US_OK) ev_->wrong++;
    if (us_engine_node_count(e) != 1 || us_engine_node(e, 0, &ni) != US_OK) ev_->wrong++;
    if (us_engine_queue_count(e) != 1 || us_engine_queue(e, 0, &qi) != US_OK) ev_->wrong++;
    if (us_engine_workload_count(e) != 2 || us_engine_workload(e, 0, &wi) != US_OK) ev_->wrong++;
    us_engine_on_event(e, every_call, data); /* re-registering itself works */
}

static us_engine *two_unschedulable(void) {
    us_engine *e = engine();
    if (!e) return NULL;
    CHECK(node(e, "n1", 1) == US_OK);
    CHECK(queue(e, "q", NULL, 1) == US_OK);
    CHECK(workload(e, "a", "q", 4, 1, 0) == US_OK);
    CHECK(workload(e, "b", "q", 4, 1, 0) == US_OK);
    return e;
}

TEST(every_call_from_the_callback_works_or_is_busy) {
    us_engine *e = two_unschedulable();
    us_error err;
    every ev = {0};
    char *after;
    if (!e) return;
    us_engine_on_event(e, every_call, &ev);
    CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
    CHECK(us_engine_event_count(e) == 2);
    CHECK(ev.events == 2);
    CHECK(ev.calls == 16 && ev.busy == 16 && ev.wrong == 0);
    CHECK(ev.other != NULL);
    us_engine_destroy(ev.other);
    /* nothing refused changed anything */
    after = dump(e);
    CHECK_HAS(ev.before, "workload a q 0 0 - -1");
    CHECK(ev.before && after && strcmp(ev.before, after) == 0);
    free(ev.before);
    free(after);
    us_engine_destroy(e);
}

/* A callback that removes itself, or puts another in its place, during a
 * cycle of several events: the change applies from the next event. */
static int removed_calls, other_calls;
static void other_cb(us_engine *e, const us_event_info *ev, void *data) {
    (void)e, (void)ev, (void)data;
    other_calls++;
}
static void remove_self(us_engine *e, const us_event_info *ev, void *data) {
    (void)ev;
    removed_calls++;
    if (data) us_engine_on_event(e, other_cb, NULL);
    else us_engine_on_event(e, NULL, NULL);
}

TEST(callback_may_remove_or_replace_itself) {
    us_engine *e = two_unschedulable();
    us_error err;
    if (!e) return;
    removed_calls = other_calls = 0;
    us_engine_on_event(e, remove_self, NULL);
    CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
    CHECK(us_engine_event_count(e) == 2);
    CHECK(removed_calls == 1 && other_calls == 0);
    removed_calls = 0;
    us_engine_on_event(e, remove_self, &err); /* non-NULL data: replace */
    CHECK(workload(e, "c", "q", 4, 1, 2) == US_OK); /* two new events */
    CHECK(workload(e, "d", "q", 4, 1, 2) == US_OK);
    CHECK(us_engine_run_cycle(e, 2, &err) == US_OK);
    CHECK(us_engine_event_count(e) == 2);
    CHECK(removed_calls == 1 && other_calls == 1);
    us_engine_destroy(e);
}

/* Names reach the output, which must stay valid UTF-8: every way in
 * refuses invalid UTF-8, naming the field and the byte offset; and no
 * message carries a raw control character. */
TEST(invalid_utf8_refused_on_every_way_in) {
    us_engine *e = engine();
    us_node_spec n = {0};
    us_queue_spec q;
    us_workload_spec w;
    us_pod_spec pod = {.name = "w-\xff", .workload = "w", .node = NULL};
    static const us_label bad_label[] = {{"zone", "a\xc3("}};
    if (!e) return;
    n.name = "n\xc0\xaf";
    n.capacity = (us_resources){1, 1000, 1 << 30};
    REFUSED(e, us_engine_upsert_node(e, &n, &err), US_EINVAL, "node.name: invalid UTF-8 at byte offset 1");
    n.name = "n1";
    n.labels = bad_label;
    n.nlabels = 1;
    REFUSED(e, us_engine_upsert_node(e, &n, &err), US_EINVAL,
            "node.labels.zone: invalid UTF-8 at byte offset 1");
    REFUSED(e, us_engine_upsert_node_json(e, "{\"name\": \"ok\", \"labels\": {\"k\\u00e9\": \"\xed\xa0\x80\"}}", &err),
            US_EINVAL, "node.labels.k\xc3\xa9: invalid UTF-8 at byte offset 0");
    us_queue_spec_init(&q);
    q.name = "q\x80";
    REFUSED(e, us_engine_upsert_queue(e, &q, &err), US_EINVAL, "queue.name: invalid UTF-8 at byte offset 1");
    CHECK(queue(e, "q", NULL, 1) == US_OK);
    us_workload_spec_init(&w);
    w.name = "w";
    w.queue = "q";
    w.labels = bad_label;
    w.nlabels = 1;
    REFUSED(e, us_engine_upsert_workload(e, &w, 0, &err), US_EINVAL,
            "workload.labels.zone: invalid UTF-8 at byte offset 1");
    REFUSED(e, us_engine_upsert_workload_json(e, "{\"name\": \"w\xf8\", \"queue\": \"q\"}", 0, &err),
            US_EINVAL, "workload.name: invalid UTF-8 at byte offset 1");
    REFUSED(e, us_engine_upsert_pod(e, &pod, &err), US_EINVAL, "pod.name: invalid UTF-8 at byte offset 2");
    REFUSED(e, us_engine_upsert_pod_json(e, "{\"name\": \"w-\xff\"}", &err), US_EINVAL,
            "pod.name: invalid UTF-8 at byte offset 2");
    /* a message that names what the caller gave shows control characters
     * and bytes that are not UTF-8 escaped, never raw */
    REFUSED(e, us_engine_remove_queue(e, "q\x1b[2J\xc2\x9b\xff", &err), US_ENOENT,
            "queue \"q\\x1b[2J\\u009b\\xff\" does not exist");
    REFUSED(e, us_engine_remove_pod(e, "p\a\x7f", &err), US_ENOENT, "pod \"p\\x07\\x7f\" is unknown");
    us_engine_destroy(e);
}

/* A pod of a workload asking for more than one GPU but not whole ones
 * (background work may ask so, and is then never scheduled) fits on no
 * node: a report that one runs is refused, so no node holds an arrangement
 * of devices that cannot exist (fuzz_api found the capacity invariant
 * broken after such a report). */
TEST(pod_of_a_fractional_multi_gpu_workload_fits_nowhere) {
    us_engine *e = engine();
    us_error err;
    us_workload_spec w;
    us_pod_spec pod = {.name = "w-0", .workload = "w", .node = "n1"};
    if (!e) return;
    CHECK(node(e, "n1", 3) == US_OK);
    CHECK(bg_queue(e, "bg") == US_OK);
    us_workload_spec_init(&w);
    w.name = "w";
    w.queue = "bg";
    w.labels = bg_label;
    w.nlabels = 1;
    w.requests = (us_resources){1.5, 100, 1 << 20};
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK); /* accepted, never scheduled */
    REFUSED(e, us_engine_upsert_pod(e, &pod, &err), US_EINVAL,
            "pod.node: \"n1\" has not enough gpu for pod \"w-0\"");
    CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
    us_engine_destroy(e);
}

/* Running pods of a workload that breaks a rule (here background work
 * asking for half a GPU) are never scheduled and never evicted: they keep
 * their room, and no AI pod is pipelined onto it (fuzz_api found the
 * capacity invariant broken). */
TEST(running_pods_of_blocked_background_work_keep_their_room) {
    us_engine *e = checked_engine();
    us_error err;
    us_workload_spec w;
    us_pod_spec pod = {.name = "b-0", .workload = "b", .node = "n1"};
    CHECK(e != NULL);
    if (!e) return;
    CHECK(node(e, "n1", 1) == US_OK);
    CHECK(bg_queue(e, "bg") == US_OK);
    CHECK(queue(e, "q", NULL, 1) == US_OK);
    us_workload_spec_init(&w);
    w.name = "b";
    w.queue = "bg";
    w.labels = bg_label;
    w.nlabels = 1;
    w.requests = (us_resources){0.5, 100, 1 << 20};
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK); /* blocked: not whole GPUs */
    CHECK(us_engine_upsert_pod(e, &pod, &err) == US_OK);        /* but it runs */
    CHECK(workload(e, "a", "q", 2, 0.5, 0) == US_OK);
    for (int t = 1; t <= 3; t++) CHECK(us_engine_run_cycle(e, t, &err) == US_OK);
    us_pod_info p;
    CHECK(pod_named(e, "b-0", &p) && p.phase == US_PHASE_RUNNING);
    CHECK(count_phase(e, US_PHASE_PIPELINED) == 0);
    us_engine_destroy(e);
}

TEST(queue_figures_in_output_units) {
    us_engine *e = engine();
    us_error err;
    us_queue_info q;
    us_workload_spec w;
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 4) == US_OK);
    us_workload_spec_init(&w);
    w.name = "w";
    w.queue = "q";
    w.replicas = 2;
    w.requests = (us_resources){0.5, 1500, 1LL << 30};
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK);
    CHECK(us_engine_queue(e, 0, &q) == US_OK && q.allocated.gpu == 0); /* no cycle yet */
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(us_engine_queue(e, 0, &q) == US_OK);
    CHECK(q.allocated.gpu == 1 && q.allocated.cpu == 3000 && q.allocated.memory == 2LL << 30);
    CHECK(q.fair_share.gpu == 1); /* its demand */
    us_engine_destroy(e);
}

TEST(background_rule_warning) {
    us_engine *e = engine();
    us_error err;
    us_event_info ev;
    us_workload_info w;
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(queue(e, "bg", NULL, 4) == US_OK); /* a queue with quota */
    CHECK(bg_workload(e, "burn", US_CONTROLLER_DEPLOYMENT, 1, 1, 0) == US_OK);
    CHECK(us_engine_workload(e, 0, &w) == US_OK && w.blocked && w.background);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(us_engine_decision_count(e) == 0);
    CHECK(us_engine_event(e, 0, &ev) == US_OK);
    CHECK_STR(ev.type, "Warning");
    CHECK_STR(ev.reason, "NotScheduled");
    us_engine_destroy(e);
}

/* The objects of the last cycle's IncompleteCapacity warnings, each with
 * its message's resource ("a:cpu b:memory ", in event order). */
static void capacity_warnings(const us_engine *e, char *out, size_t len) {
    out[0] = '\0';
    for (size_t i = 0; i < us_engine_event_count(e); i++) {
        us_event_info ev;
        if (us_engine_event(e, i, &ev) != US_OK || strcmp(ev.reason, "IncompleteCapacity") != 0) continue;
        const char *what = strstr(ev.message, "no cpu and no memory") ? "both"
                           : strstr(ev.message, "no cpu")              ? "cpu"
                                                                       : "memory";
        size_t at = strlen(out);
        snprintf(out + at, len - at, "%s:%s ", ev.object, what);
    }
}

/* A node's missing-capacity warning comes once, in the cycle after the node
 * is added or changed so, however many quiet cycles came before (the cycle
 * looks at the nodes only when one was added or changed since it last
 * did); a quiet cycle and an update that changes nothing warn again about
 * no node. */
TEST(capacity_warnings_follow_nodes_added_and_changed) {
    us_engine *e = engine();
    us_error err;
    char got[256];
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 8) == US_OK);
    CHECK(workload(e, "w", "q", 1, 1, 0) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(us_engine_decision_count(e) == 1);  /* the cycles run: w's pod binds */
    capacity_warnings(e, got, sizeof got);
    CHECK_STR(got, "");
    CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
    us_node_spec n = {0};
    n.name = "n2";
    n.capacity = (us_resources){8, 0, 256LL << 30};  /* no cpu */
    CHECK(us_engine_upsert_node(e, &n, NULL) == US_OK);
    CHECK(us_engine_run_cycle(e, 2, &err) == US_OK);
    capacity_warnings(e, got, sizeof got);
    CHECK_STR(got, "n2:cpu ");
    CHECK(us_engine_run_cycle(e, 3, &err) == US_OK);
    capacity_warnings(e, got, sizeof got);
    CHECK_STR(got, "");
    CHECK(us_engine_upsert_node(e, &n, NULL) == US_OK);  /* the same spec again */
    CHECK(us_engine_run_cycle(e, 4, &err) == US_OK);
    capacity_warnings(e, got, sizeof got);
    CHECK_STR(got, "");
    us_node_spec m = {0};
    m.name = "n3";
    m.capacity = (us_resources){8, 32000, 256LL << 30};
    CHECK(us_engine_upsert_node(e, &m, NULL) == US_OK);
    CHECK(us_engine_run_cycle(e, 5, &err) == US_OK);
    capacity_warnings(e, got, sizeof got);
    CHECK_STR(got, "");
    m.capacity = (us_resources){8, 32000, 0};  /* n3 loses its memory */
    CHECK(us_engine_upsert_node(e, &m, NULL) == US_OK);
    CHECK(us_engine_run_cycle(e, 6, &err) == US_OK);
    capacity_warnings(e, got, sizeof got);
    CHECK_STR(got, "n3:memory ");
    CHECK(us_engine_run_cycle(e, 7, &err) == US_OK);
    capacity_warnings(e, got, sizeof got);
    CHECK_STR(got, "");
    us_engine_destroy(e);
}

/* ---- policies ------------------------------------------------------------------------------- */

static void write_file(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

TEST(reload_checks_before_swapping) {
    us_engine *e = engine();
    us_error err;
    char dir[] = "/tmp/understory-api-XXXXXX", cmd[600];
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 8) == US_OK);
    CHECK(workload(e, "w", "q", 1, 1, 0) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(mkdtemp(dir) != NULL);
    snprintf(cmd, sizeof cmd, "cp policies/*.lua %s/", dir);
    CHECK(system(cmd) == 0);
    write_file(dir, "placement.lua", "return { score = function(pod, node) return nil + 1 end }\n");
    REFUSED(e, us_engine_reload_policies(e, dir, &err), US_EPOLICY,
            "refused, the running policy (builtin) stays: ");
    CHECK_STR(us_engine_policy_id(e), "builtin");
    /* as in the simulator, a reload is also an event opening the next cycle */
    CHECK(us_engine_run_cycle(e, 5, &err) == US_OK);
    us_event_info ev;
    CHECK(us_engine_event(e, 0, &ev) == US_OK);
    CHECK_STR(ev.reason, "PolicyReloadRefused");
    CHECK_STR(ev.type, "Warning");
    CHECK(us_engine_reload_policies(e, "policies", &err) == US_OK);
    CHECK(strcmp(us_engine_policy_id(e), "builtin") != 0);
    CHECK(us_engine_run_cycle(e, 10, &err) == US_OK);
    CHECK(us_engine_event(e, 0, &ev) == US_OK);
    CHECK_STR(ev.reason, "PolicyReloaded");
    CHECK(ev.nannotations == 3);
    CHECK_STR(ev.annotations[2].key, "previous-policy-id");
    CHECK_STR(ev.annotations[2].value, "builtin");
    REFUSED(e, us_engine_reload_policies(e, NULL, &err), US_EINVAL, "dir: NULL");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    us_engine_destroy(e);
}

/* ---- threads ------------------------------------------------------------------------ */

/* A little cluster run for a few cycles on its own handle; what it decided,
 * as text. */
static void *busy_cluster(void *out) {
    char *text = out;
    size_t n = 0;
    us_engine_options o;
    us_engine *e = NULL;
    us_engine_options_init(&o);
    o.policies = "policies";
    text[0] = '\0';
    if (us_engine_create(&o, &e, NULL) != US_OK) return NULL;
    for (int i = 0; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        node(e, name, 8);
    }
    queue(e, "a", NULL, 16);
    queue(e, "b", NULL, 16);
    bg_queue(e, "bg");
    bg_workload(e, "burn", US_CONTROLLER_DEPLOYMENT, 40, 1, 0);
    for (int c = 0; c < 12; c++) {
        char name[16];
        snprintf(name, sizeof name, "job%d", c);
        workload(e, name, c % 2 ? "a" : "b", 1 + c % 3, 2 + c % 4, c * 10);
        if (c >= 3) {
            snprintf(name, sizeof name, "job%d", c - 3);
            us_engine_remove_workload(e, name, c * 10, NULL);
        }
        us_engine_run_cycle(e, c * 10, NULL);
        for (size_t i = 0; i < us_engine_decision_count(e); i++) {
            us_decision_info d;
            us_engine_decision(e, i, &d);
            n += (size_t)snprintf(text + n, n < 65536 ? 65536 - n : 0, "%d %s %s %s\n", c, d.op_name,
                                  d.pod, d.node);
        }
    }
    us_engine_destroy(e);
    return NULL;
}

/* A policy directory holding only placement.lua (the rest are the
 * defaults) that requires a helper of its own directory and logs: the
 * lines reach the embedder with file and line, once, and bounded. */
TEST(policy_log_lines_with_file_and_line) {
    us_engine *e = engine();
    us_error err;
    char dir[] = "/tmp/understory-api-XXXXXX", cmd[600];
    CHECK(mkdtemp(dir) != NULL);
    write_file(dir, "placement.lua",
               "local h = require 'helper'\n"
               "log('loaded', h.n)\n"
               "return { score = function(pod, node)\n"
               "  log('score', pod.name, node.name, string.rep('x', 1000))\n"
               "  return h.n end }\n");
    write_file(dir, "helper.lua", "return { n = 7 }\n");
    CHECK(us_engine_load_policies(e, dir, &err) == US_OK);
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 8) == US_OK);
    CHECK(workload(e, "w", "q", 1, 1, 0) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    us_policy_log_info l;
    CHECK(us_engine_policy_log_count(e) == 2);
    CHECK(us_engine_policy_log(e, 0, &l) == US_OK);
    CHECK_STR(l.file, "placement.lua");
    CHECK(l.line == 2);
    CHECK_STR(l.message, "loaded 7");
    CHECK(us_engine_policy_log(e, 1, &l) == US_OK);
    CHECK(l.line == 4);
    CHECK(strncmp(l.message, "score w-0 n1 xxx", 16) == 0);
    CHECK(strlen(l.message) == 400 + 3); /* cut, and "..." */
    CHECK(us_engine_policy_log(e, 2, &l) == US_ENOENT);
    CHECK(us_engine_policy_log_dropped(e) == 0);
    /* the next cycle has only its own lines */
    CHECK(us_engine_run_cycle(e, 10, &err) == US_OK);
    CHECK(us_engine_policy_log_count(e) == 0);
    us_engine_destroy(e);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST(handles_are_independent_across_threads) {
    static char alone[65536], t1[65536], t2[65536];
    pthread_t a, b;
    busy_cluster(alone);
    CHECK(strlen(alone) > 100);
    CHECK(pthread_create(&a, NULL, busy_cluster, t1) == 0);
    CHECK(pthread_create(&b, NULL, busy_cluster, t2) == 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK_STR(t1, alone);
    CHECK_STR(t2, alone);
}

/* Pods another scheduler placed: the caller reports them; they hold their
 * room, no decision ever names them, and nothing reports them pending. */
TEST(external_workload_holds_room_and_is_never_touched) {
    us_engine *e = engine();
    us_error err;
    us_pod_info p;
    us_workload_info wi;
    CHECK(node(e, "n1", 8) == US_OK);
    CHECK(node(e, "n2", 8) == US_OK);
    CHECK(queue(e, "q", NULL, 16) == US_OK);
    us_workload_spec w;
    us_workload_spec_init(&w);
    w.name = "kube-system/dns";
    w.external = 1;
    w.replicas = 3;
    w.priority = 10; /* preemptible by default: a victim if it were ours */
    w.requests.gpu = 4;
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK);
    us_pod_spec a = {.name = "kube-system/dns-a", .workload = "kube-system/dns", .node = "n1"};
    us_pod_spec b = {.name = "kube-system/dns-b", .workload = "kube-system/dns", .node = "n2"};
    CHECK(us_engine_upsert_pod(e, &a, &err) == US_OK);
    CHECK(us_engine_upsert_pod(e, &b, &err) == US_OK);
    /* a gang of two 8-GPU pods of high priority: fits only if dns moves */
    us_workload_spec t;
    us_workload_spec_init(&t);
    t.name = "train";
    t.queue = "q";
    t.priority = US_PRIORITY_INFERENCE;
    t.replicas = 2;
    t.requests.gpu = 8;
    CHECK(us_engine_upsert_workload(e, &t, 0, &err) == US_OK);
    for (int c = 0; c < 3; c++) {
        CHECK(us_engine_run_cycle(e, 10.0 * c, &err) == US_OK);
        CHECK(us_engine_decision_count(e) == 0);
        for (size_t i = 0; i < us_engine_event_count(e); i++) {
            us_event_info ev;
            CHECK(us_engine_event(e, i, &ev) == US_OK && strcmp(ev.object, "kube-system/dns") != 0);
        }
    }
    CHECK(pod_named(e, "kube-system/dns-a", &p) && p.phase == US_PHASE_RUNNING && p.external &&
          !p.background && !strcmp(p.node, "n1"));
    CHECK(pod_named(e, "kube-system/dns-b", &p) && p.phase == US_PHASE_RUNNING && p.external &&
          !strcmp(p.node, "n2"));
    CHECK(pod_named(e, "train-0", &p) && p.phase == US_PHASE_PENDING && !p.external);
    /* the third dns pod waits for its own scheduler: pending, never placed */
    CHECK(count_phase(e, US_PHASE_PENDING) == 3);
    for (size_t i = 0; i < us_engine_workload_count(e); i++) {
        CHECK(us_engine_workload(e, i, &wi) == US_OK);
        CHECK(!!wi.external == !strcmp(wi.name, "kube-system/dns"));
        if (wi.external) CHECK(wi.queue == NULL);
    }
    /* its pods count as node usage */
    us_node_info ni;
    CHECK(us_engine_node(e, 0, &ni) == US_OK && ni.used.gpu == 4);
    /* once dns is gone the gang runs */
    CHECK(us_engine_remove_workload(e, "kube-system/dns", 30, &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 100, &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 110, &err) == US_OK);
    CHECK(pod_named(e, "train-0", &p) && p.phase == US_PHASE_RUNNING);
    /* a queue on an external workload is refused, naming the field */
    w.name = "other";
    w.queue = "q";
    REFUSED(e, us_engine_upsert_workload(e, &w, 110, &err), US_EINVAL, "queue: an external workload is in no queue");
    us_engine_destroy(e);
}

/* What a cycle reused from the one before (us_engine_cycle_reuse): with
 * the default Lua policies, two engines get the same calls, one keeping
 * what cycles leave and one with full_cycles.  Both decide the same; the
 * first keeps every node's class while the nodes hold and the scores of a
 * pod class placed before, and asks the policy less; it keeps no class
 * across a cordon and no score across a reload to another version; the
 * second keeps nothing ever.  A reload, taken or refused, leaves what the
 * cycles keep as it was: its dry runs run on copies, with caches of their
 * own. */
TEST(cycle_reuse_says_what_the_cycle_kept) {
    us_engine *e[2] = {NULL, NULL};
    us_error err;
    us_cycle_reuse r[2];
    char other[] = "/tmp/understory-api-XXXXXX", broken[] = "/tmp/understory-api-XXXXXX", cmd[256];
    CHECK(mkdtemp(other) != NULL && mkdtemp(broken) != NULL);
    /* the default placement, another version of it (a comment more) */
    snprintf(cmd, sizeof cmd, "cp policies/placement.lua %s/ && echo '-- another version' >> %s/placement.lua",
             other, other);
    CHECK(system(cmd) == 0);
    write_file(broken, "placement.lua", "return { score = function(pod, node) return nil + 1 end }\n");
    for (int k = 0; k < 2; k++) {
        us_engine_options o;
        us_engine_options_init(&o);
        o.check_invariants = 1;
        o.full_cycles = k;
        CHECK(us_engine_create(&o, &e[k], &err) == US_OK);
        if (!e[k]) return;
        CHECK(us_engine_cycle_reuse(e[k], &r[k]) == US_OK);
        CHECK(r[k].policy_calls == 0 && r[k].nodes_classed == 0 && r[k].scores_kept == 0);
        CHECK(us_engine_load_policies(e[k], "policies", &err) == US_OK);
        for (int n = 0; n < 4; n++) {
            char json[128];
            snprintf(json, sizeof json, "{\"name\": \"n%d\", \"gpu\": 8, \"cpu\": 64, \"memory\": \"256Gi\"}", n);
            CHECK(us_engine_upsert_node_json(e[k], json, &err) == US_OK);
        }
        CHECK(us_engine_upsert_queue_json(e[k], "{\"name\": \"q\", \"resources\": {\"gpu\": {\"quota\": 32}}}", &err) ==
              US_OK);
    }
    /* each step: a workload of two 2-GPU pods arrives (one kind of pod
     * throughout), then a cycle; before it, step 2 cordons a node, step 3
     * reloads another version, step 4 tries a version that is refused */
    unsigned long long kept[5], scores[5], calls[2] = {0, 0};
    for (int s = 0; s < 5; s++) {
        for (int k = 0; k < 2; k++) {
            char json[160];
            snprintf(json, sizeof json, "{\"name\": \"w%d\", \"queue\": \"q\", \"replicas\": 2, "
                     "\"requests\": {\"gpu\": 2}}", s);
            CHECK(us_engine_upsert_workload_json(e[k], json, 10.0 * s, &err) == US_OK);
            if (s == 2)
                CHECK(us_engine_upsert_node_json(e[k], "{\"name\": \"n3\", \"gpu\": 8, \"cpu\": 64, \"memory\": "
                                                 "\"256Gi\", \"unschedulable\": true}", &err) == US_OK);
            if (s == 3) CHECK(us_engine_reload_policies(e[k], other, &err) == US_OK);
            if (s == 4) CHECK(us_engine_reload_policies(e[k], broken, &err) == US_EPOLICY);
            CHECK(us_engine_run_cycle(e[k], 10.0 * s, &err) == US_OK);
            CHECK(us_engine_cycle_reuse(e[k], &r[k]) == US_OK);
            calls[k] += r[k].policy_calls;
        }
        CHECK(us_engine_decision_count(e[0]) == us_engine_decision_count(e[1]));
        for (size_t i = 0; i < us_engine_decision_count(e[0]); i++) {
            us_decision_info a, b;
            CHECK(us_engine_decision(e[0], i, &a) == US_OK && us_engine_decision(e[1], i, &b) == US_OK);
            CHECK_STR(a.pod, b.pod);
            CHECK_STR(a.node ? a.node : "-", b.node ? b.node : "-");
        }
        CHECK(us_engine_decision_count(e[0]) == 2);  /* both pods bound, every step */
        CHECK(r[0].nodes_classed == 4 && r[1].nodes_classed == 4);
        CHECK(r[1].nodes_class_kept == 0 && r[1].scores_kept == 0);
        CHECK(r[0].policy_calls > 0 && r[1].policy_calls > 0);
        kept[s] = r[0].nodes_class_kept;
        scores[s] = r[0].scores_kept;
    }
    CHECK(kept[0] == 0 && scores[0] == 0);  /* nothing before the first cycle */
    CHECK(kept[1] == 4 && scores[1] > 0);   /* the nodes held; the same kind of pod */
    CHECK(kept[2] == 0 && scores[2] == 0);  /* a cordon: classes found afresh */
    CHECK(kept[3] == 4 && scores[3] == 0);  /* another version: classes kept, scores not */
    CHECK(kept[4] == 4 && scores[4] > 0);   /* a refused reload changes nothing */
    CHECK(calls[0] < calls[1]);
    CHECK(us_engine_cycle_reuse(NULL, &r[0]) == US_EINVAL && us_engine_cycle_reuse(e[0], NULL) == US_EINVAL);
    us_engine_destroy(e[0]);
    us_engine_destroy(e[1]);
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", other, broken);
    CHECK(system(cmd) == 0);
}

int main(void) {
    RUN(version_is_the_headers);
    RUN(create_refuses_bad_options);
    RUN(create_with_lua_policies);
    RUN(node_upsert_and_read_back);
    RUN(node_errors_name_the_field_and_change_nothing);
    RUN(node_capacity_cannot_drop_below_its_pods);
    RUN(node_leaves_and_its_pods_go_pending);
    RUN(pinned_pod_waits_for_its_node_to_come_back);
    RUN(daemonset_follows_node_labels);
    RUN(pinned_pending_pod_binds_on_its_pin);
    RUN(pod_deleted_by_others_is_releasing_until_gone);
    RUN(queue_tree_rules);
    RUN(queue_pools_from_c);
    RUN(workload_errors);
    RUN(workload_resend_scale_and_finish);
    RUN(succeeded_workers_keep_their_gang_whole);
    RUN(pod_reports);
    RUN(reported_pods_each_take_a_place_of_their_own);
    RUN(evicted_pod_reported_gone_frees_its_room_at_once);
    RUN(pipelined_pod_reported_unbound_stays_pipelined);
    RUN(pipelined_pod_reported_pinned_elsewhere_is_planned_anew);
    RUN(reported_fractional_pod_takes_a_device_free_now_and_as_planned);
    RUN(fractional_background_pods_reported_running_stay_where_they_run);
    RUN(a_pod_adopted_by_another_workload_takes_its_name_from_the_replacement);
    RUN(many_pods_reported_gone_then_read);
    RUN(cycle_events_and_callback);
    RUN(invariant_checks_on_request);
    RUN(every_call_from_the_callback_works_or_is_busy);
    RUN(callback_may_remove_or_replace_itself);
    RUN(invalid_utf8_refused_on_every_way_in);
    RUN(pod_of_a_fractional_multi_gpu_workload_fits_nowhere);
    RUN(running_pods_of_blocked_background_work_keep_their_room);
    RUN(queue_figures_in_output_units);
    RUN(background_rule_warning);
    RUN(capacity_warnings_follow_nodes_added_and_changed);
    RUN(reload_checks_before_swapping);
    RUN(policy_log_lines_with_file_and_line);
    RUN(handles_are_independent_across_threads);
    RUN(external_workload_holds_room_and_is_never_touched);
    RUN(cycle_reuse_says_what_the_cycle_kept);
    return check_report();
}
