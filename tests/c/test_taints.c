/*
 * test_taints.c — node taints and workload tolerations as a feasibility
 * rule: Kubernetes' matching rules (checked against the rules as its
 * documentation states them, over every combination), the placement
 * property on random clusters through the public API (every bound pod
 * tolerates its node; every pod with a tolerable node is bound), the JSON
 * and C forms with their errors, node classes and DaemonSets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "taints.h"
#include "understory.h"

/* ---- matching -------------------------------------------------------------- */

/* Kubernetes' documentation, sentence by sentence: a toleration matches a
 * taint when the keys and effects are the same and the operator is Exists
 * (no value) or Equal with equal values; an empty key with Exists matches
 * every key and value; an empty effect matches every effect. */
static bool documented_match(const us_toleration_item *t, const us_taint_item *x) {
    bool effect = t->effect == US_EFFECT_ANY || t->effect == x->effect;
    if (t->exists && !t->key[0]) return effect;
    if (strcmp(t->key, x->key) != 0 || !effect) return false;
    return t->exists ? true : strcmp(t->value, x->value) == 0;
}

TEST(matching_is_kubernetes_over_every_combination) {
    static char *keys[] = {"", "a", "b"}, *values[] = {"", "x", "y"};
    int checked = 0;
    for (int tk = 0; tk < 3; tk++)
        for (int ex = 0; ex < 2; ex++)
            for (int tv = 0; tv < 3; tv++)
                for (int te = 0; te < 4; te++) {
                    us_toleration_item t = {keys[tk], values[tv], ex == 1, (us_taint_effect)te};
                    /* invalid tolerations (refused by the parser) */
                    if ((ex && tv) || (!ex && !tk)) continue;
                    for (int xk = 1; xk < 3; xk++)
                        for (int xv = 0; xv < 3; xv++)
                            for (int xe = 1; xe < 4; xe++) {
                                us_taint_item x = {keys[xk], values[xv], (us_taint_effect)xe};
                                CHECK(us_toleration_matches(&t, &x) == documented_match(&t, &x));
                                checked++;
                            }
                }
    CHECK(checked == 9 * 4 * 18); /* 9 valid (key, operator, value) per effect */
}

TEST(which_taints_keep_a_pod_off) {
    us_taint_item xs[] = {{"gpu", "", US_EFFECT_NO_SCHEDULE},
                          {"spot", "true", US_EFFECT_PREFER_NO_SCHEDULE},
                          {"maint", "now", US_EFFECT_NO_EXECUTE}};
    us_toleration_item ts[] = {{"gpu", "", true, US_EFFECT_ANY},
                               {"maint", "now", false, US_EFFECT_NO_EXECUTE},
                               {"", "", true, US_EFFECT_ANY}};
    us_taints none = {NULL, 0}, gpu = {xs, 1}, spot = {xs + 1, 1}, all = {xs, 3},
              maint = {xs + 2, 1};
    us_tolerations nothing = {NULL, 0}, only_gpu = {ts, 1}, gpu_maint = {ts, 2}, everything = {ts + 2, 1};
    CHECK(us_tolerates(&nothing, &none, false));
    CHECK(!us_tolerates(&nothing, &gpu, false));
    CHECK(us_tolerates(&nothing, &spot, false)); /* PreferNoSchedule never blocks */
    CHECK(us_tolerates(&only_gpu, &gpu, false));
    CHECK(!us_tolerates(&only_gpu, &all, false)); /* every blocking taint must be tolerated */
    CHECK(us_tolerates(&gpu_maint, &all, false));
    CHECK(us_tolerates(&everything, &all, false));
    /* a pod already there: only NoExecute sends it away */
    CHECK(us_tolerates(&nothing, &gpu, true));
    CHECK(!us_tolerates(&nothing, &maint, true));
    CHECK(us_tolerates(&gpu_maint, &maint, true));
}

/* ---- the public API ---------------------------------------------------------- */

static us_engine *engine(void) {
    us_engine *e = NULL;
    us_error err;
    if (us_engine_create(NULL, &e, &err) != US_OK) fprintf(stderr, "create: %s\n", err.message);
    return e;
}

static int queue(us_engine *e, const char *name) {
    us_queue_spec q;
    us_queue_spec_init(&q);
    q.name = name;
    q.quota.gpu = 100000;
    return us_engine_upsert_queue(e, &q, NULL);
}

static const us_pod_info *pod_named(const us_engine *e, const char *name, us_pod_info *out) {
    for (size_t i = 0; i < us_engine_pod_count(e); i++)
        if (us_engine_pod(e, i, out) == US_OK && strcmp(out->name, name) == 0) return out;
    return NULL;
}

/* What the test knows of a node or workload, to check the engine against. */
typedef struct tnode {
    char name[16];
    us_taint taints[3];
    size_t ntaints;
} tnode;
typedef struct twl {
    char name[16];
    us_toleration tols[3];
    size_t ntols;
    int replicas;
} twl;

static bool str_eq(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

/* The documented rules again, on the public structs (strings). */
static bool tolerated(const twl *w, const tnode *n) {
    for (size_t i = 0; i < n->ntaints; i++) {
        const us_taint *x = &n->taints[i];
        if (strcmp(x->effect, "PreferNoSchedule") == 0) continue;
        bool ok = false;
        for (size_t k = 0; k < w->ntols && !ok; k++) {
            const us_toleration *t = &w->tols[k];
            bool exists = str_eq(t->op, "Exists");
            bool effect = str_eq(t->effect, "") || str_eq(t->effect, x->effect);
            if (exists && str_eq(t->key, "")) ok = effect;
            else ok = effect && str_eq(t->key, x->key) && (exists || str_eq(t->value, x->value));
        }
        if (!ok) return false;
    }
    return true;
}

static unsigned rnd(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

/* Random clusters with room for everything: every bound pod tolerates its
 * node, and every workload that some node tolerates runs whole; one that
 * none tolerates stays pending with an Unschedulable event.  Nodes differ
 * only in their taints, so a node class that ignored taints would send pods
 * where they do not belong or leave them pending. */
TEST(placement_property_on_random_clusters) {
    static const us_taint pool_taints[] = {{"nvidia.com/gpu", NULL, "NoSchedule"},
                                           {"nvidia.com/gpu", "present", "NoExecute"},
                                           {"spot", "true", "PreferNoSchedule"},
                                           {"team", "a", "NoSchedule"},
                                           {"zone", "b", "NoSchedule"}};
    static const us_toleration pool_tols[] = {{"nvidia.com/gpu", "Exists", NULL, NULL},
                                              {"nvidia.com/gpu", NULL, "present", "NoExecute"},
                                              {"team", "Equal", "a", "NoSchedule"},
                                              {"team", "Exists", NULL, "NoSchedule"},
                                              {NULL, "Exists", NULL, NULL},
                                              {"spot", "Equal", "true", NULL}};
    int bound_total = 0, pending_total = 0;
    for (unsigned seed = 1; seed <= 40; seed++) {
        unsigned s = seed;
        us_engine *e = engine();
        us_error err;
        tnode nodes[10];
        twl wls[12];
        CHECK(queue(e, "q") == US_OK);
        for (int i = 0; i < 10; i++) {
            tnode *n = &nodes[i];
            us_node_spec spec = {0};
            snprintf(n->name, sizeof n->name, "n%02d", i);
            n->ntaints = 0;
            for (size_t k = 0; k < 5 && n->ntaints < 3; k++)
                if (rnd(&s) % 3 == 0) n->taints[n->ntaints++] = pool_taints[k];
            spec.name = n->name;
            spec.capacity = (us_resources){64, 640000, 1LL << 40};
            spec.taints = n->taints;
            spec.ntaints = n->ntaints;
            CHECK(us_engine_upsert_node(e, &spec, &err) == US_OK);
        }
        for (int i = 0; i < 12; i++) {
            twl *w = &wls[i];
            us_workload_spec spec;
            snprintf(w->name, sizeof w->name, "w%02d", i);
            w->ntols = 0;
            for (size_t k = 0; k < 6 && w->ntols < 3; k++)
                if (rnd(&s) % 4 == 0) w->tols[w->ntols++] = pool_tols[k];
            w->replicas = 1 + (int)(rnd(&s) % 3);
            us_workload_spec_init(&spec);
            spec.name = w->name;
            spec.queue = "q";
            spec.replicas = w->replicas;
            spec.requests = (us_resources){1, 1000, 1 << 30};
            spec.tolerations = w->tols;
            spec.ntolerations = w->ntols;
            CHECK(us_engine_upsert_workload(e, &spec, 0, &err) == US_OK);
        }
        CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
        for (size_t d = 0; d < us_engine_decision_count(e); d++) {
            us_decision_info x;
            CHECK(us_engine_decision(e, d, &x) == US_OK);
            CHECK(x.op == US_DECISION_BIND);
            const twl *w = &wls[atoi(x.workload + 1)];
            const tnode *n = &nodes[atoi(x.node + 1)];
            if (!tolerated(w, n))
                fprintf(stderr, "  seed %u: %s bound to %s, whose taints it does not tolerate\n", seed,
                        x.pod, x.node);
            CHECK(tolerated(w, n));
        }
        for (int i = 0; i < 12; i++) {
            bool any = false;
            for (int k = 0; k < 10; k++) any = any || tolerated(&wls[i], &nodes[k]);
            int bound = 0, pending = 0;
            for (size_t p = 0; p < us_engine_pod_count(e); p++) {
                us_pod_info x;
                us_engine_pod(e, p, &x);
                if (strcmp(x.workload, wls[i].name) != 0) continue;
                if (x.phase == US_PHASE_RUNNING) bound++;
                if (x.phase == US_PHASE_PENDING) pending++;
            }
            CHECK(bound == (any ? wls[i].replicas : 0));
            CHECK(pending == (any ? 0 : wls[i].replicas));
            bound_total += bound;
            pending_total += pending;
            /* a workload no node tolerates is told so, not "not enough room" */
            bool event = false;
            for (size_t v = 0; v < us_engine_event_count(e); v++) {
                us_event_info ev;
                us_engine_event(e, v, &ev);
                if (strcmp(ev.object, wls[i].name) != 0 || strcmp(ev.reason, "Unschedulable") != 0) continue;
                event = true;
                CHECK_HAS(ev.message, "has a taint the pod does not tolerate (\"n");
                CHECK(ev.nannotations == 1 && strcmp(ev.annotations[0].key, "pending-reason") == 0 &&
                      strcmp(ev.annotations[0].value, "untolerated-taint") == 0);
            }
            CHECK(event == !any);
        }
        us_engine_destroy(e);
    }
    /* the random clusters exercised both outcomes */
    CHECK(bound_total > 100);
    CHECK(pending_total > 5);
}

TEST(equal_nodes_apart_by_taints) {
    us_engine *e = engine();
    us_error err;
    us_taint gpu[] = {{"nvidia.com/gpu", NULL, "NoSchedule"}};
    us_toleration tol[] = {{"nvidia.com/gpu", "Exists", NULL, "NoSchedule"}};
    us_node_spec a = {"a", NULL, {8, 64000, 1LL << 36}, NULL, 0, 0, gpu, 1};
    us_node_spec b = {"b", NULL, {8, 64000, 1LL << 36}, NULL, 0, 0, NULL, 0};
    us_workload_spec w;
    us_pod_info p;
    CHECK(queue(e, "q") == US_OK);
    CHECK(us_engine_upsert_node(e, &a, &err) == US_OK);
    CHECK(us_engine_upsert_node(e, &b, &err) == US_OK);
    us_workload_spec_init(&w);
    w.name = "a-tolerant";
    w.queue = "q";
    w.requests.gpu = 1;
    w.tolerations = tol;
    w.ntolerations = 1;
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK);
    w.name = "b-plain";
    w.tolerations = NULL;
    w.ntolerations = 0;
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    /* "a" comes first by name: only the pod that tolerates it goes there */
    CHECK(pod_named(e, "b-plain-0", &p) && p.phase == US_PHASE_RUNNING && str_eq(p.node, "b"));
    CHECK(pod_named(e, "a-tolerant-0", &p) && p.phase == US_PHASE_RUNNING && str_eq(p.node, "a"));
    /* the same through the JSON forms */
    CHECK(us_engine_upsert_node_json(e, "{\"name\": \"c\", \"gpu\": 8, \"cpu\": \"64\", \"memory\": \"64Gi\", "
                                        "\"taints\": [{\"key\": \"k\", \"value\": \"v\", \"effect\": \"NoExecute\"}]}",
                                     &err) == US_OK);
    CHECK(us_engine_upsert_workload_json(e, "{\"name\": \"j\", \"queue\": \"q\", \"replicas\": 2, "
                                            "\"requests\": {\"gpu\": 8}, \"tolerations\": [{\"key\": \"k\", "
                                            "\"operator\": \"Equal\", \"value\": \"v\"}]}",
                                         10, &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 10, &err) == US_OK);
    /* room for one 8-GPU pod on c only (a and b hold a GPU each) */
    int on_c = 0, pending = 0;
    for (size_t i = 0; i < us_engine_pod_count(e); i++) {
        us_engine_pod(e, i, &p);
        if (strcmp(p.workload, "j") != 0) continue;
        if (p.phase == US_PHASE_RUNNING && str_eq(p.node, "c")) on_c++;
        if (p.phase == US_PHASE_PENDING) pending++;
    }
    CHECK(on_c == 0 && pending == 2); /* a gang of two: both or none */
    us_engine_destroy(e);
}

/* Everything readable about the engine, for "a refused call changed nothing". */
static void dump(const us_engine *e, char *s, size_t cap) {
    size_t n = 0;
    s[0] = '\0';
    for (size_t i = 0; i < us_engine_node_count(e); i++) {
        us_node_info x;
        us_engine_node(e, i, &x);
        n += (size_t)snprintf(s + n, n < cap ? cap - n : 0, "node %s %g\n", x.name, x.capacity.gpu);
    }
    for (size_t i = 0; i < us_engine_workload_count(e); i++) {
        us_workload_info x;
        us_engine_workload(e, i, &x);
        n += (size_t)snprintf(s + n, n < cap ? cap - n : 0, "workload %s\n", x.name);
    }
    for (size_t i = 0; i < us_engine_pod_count(e); i++) {
        us_pod_info x;
        us_engine_pod(e, i, &x);
        n += (size_t)snprintf(s + n, n < cap ? cap - n : 0, "pod %s %s %s\n", x.name,
                              x.node ? x.node : "-", x.phase_name);
    }
}

#define REFUSED(e, call, msg)                                                                 \
    do {                                                                                      \
        us_error err = {0};                                                                   \
        char before[4096], after[4096];                                                       \
        dump(e, before, sizeof before);                                                       \
        int rc_ = (call);                                                                     \
        dump(e, after, sizeof after);                                                         \
        CHECK(rc_ == US_EINVAL);                                                              \
        CHECK_HAS(err.message, msg);                                                          \
        CHECK_STR(after, before);                                                             \
    } while (0)

TEST(bad_taints_and_tolerations_name_the_field_and_change_nothing) {
    us_engine *e = engine();
    us_error err;
    us_taint bad_effect[] = {{"k", NULL, "NoRun"}};
    us_taint no_key[] = {{NULL, "v", "NoSchedule"}};
    us_taint twice[] = {{"k", "a", "NoSchedule"}, {"k", "b", "NoSchedule"}};
    us_toleration bad_op[] = {{"k", "In", NULL, NULL}};
    us_toleration exists_value[] = {{"k", "Exists", "v", NULL}};
    us_toleration equal_no_key[] = {{NULL, "Equal", "v", NULL}};
    us_node_spec n = {"n1", NULL, {8, 64000, 1LL << 36}, NULL, 0, 0, NULL, 0};
    us_workload_spec w;
    CHECK(queue(e, "q") == US_OK);
    CHECK(us_engine_upsert_node(e, &n, &err) == US_OK);
    n.taints = bad_effect;
    n.ntaints = 1;
    REFUSED(e, us_engine_upsert_node(e, &n, &err),
            "node.taints[0].effect: \"NoRun\" is not NoSchedule, PreferNoSchedule or NoExecute");
    n.taints = no_key;
    REFUSED(e, us_engine_upsert_node(e, &n, &err), "node.taints[0].key: required field is missing");
    n.taints = twice;
    n.ntaints = 2;
    REFUSED(e, us_engine_upsert_node(e, &n, &err),
            "node.taints[1]: a second taint with key \"k\" and effect NoSchedule");
    n.taints = NULL;
    REFUSED(e, us_engine_upsert_node(e, &n, &err), "node.taints: NULL array with a count of 2");
    REFUSED(e, us_engine_upsert_node_json(e, "{\"name\": \"n1\", \"taints\": {\"k\": \"v\"}}", &err),
            "node.taints: must be an array, not an object");
    REFUSED(e, us_engine_upsert_node_json(e, "{\"name\": \"n1\", \"taints\": [{\"key\": \"k\", \"effect\": "
                                             "\"NoSchedule\", \"timeAdded\": \"x\"}]}", &err),
            "node.taints[0]: \"timeAdded\" is an unknown field");
    REFUSED(e, us_engine_upsert_node_json(e, "{\"name\": \"n1\", \"taints\": [{\"key\": \"k\"}]}", &err),
            "node.taints[0].effect: required field is missing");

    us_workload_spec_init(&w);
    w.name = "w";
    w.queue = "q";
    w.tolerations = bad_op;
    w.ntolerations = 1;
    REFUSED(e, us_engine_upsert_workload(e, &w, 0, &err),
            "workload.tolerations[0].operator: \"In\" is not Equal or Exists");
    w.tolerations = exists_value;
    REFUSED(e, us_engine_upsert_workload(e, &w, 0, &err),
            "workload.tolerations[0].value: must be empty with operator Exists");
    w.tolerations = equal_no_key;
    REFUSED(e, us_engine_upsert_workload(e, &w, 0, &err),
            "workload.tolerations[0].key: may be empty only with operator Exists (which tolerates every taint)");
    REFUSED(e, us_engine_upsert_workload_json(e, "{\"name\": \"w\", \"queue\": \"q\", \"tolerations\": "
                                                 "[{\"key\": 5}]}", 0, &err),
            "workload.tolerations[0].key: must be a string, not a number");
    /* a live workload's tolerations are part of its pods: fixed */
    w.tolerations = NULL;
    w.ntolerations = 0;
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK);
    w.tolerations = bad_op + 0;
    us_toleration ok_tol[] = {{"k", "Exists", NULL, NULL}};
    w.tolerations = ok_tol;
    w.ntolerations = 1;
    REFUSED(e, us_engine_upsert_workload(e, &w, 0, &err), "workload.tolerations: cannot change");
    us_engine_destroy(e);
}

TEST(daemonset_follows_node_taints) {
    us_engine *e = engine();
    us_error err;
    us_taint soft[] = {{"maint", NULL, "NoSchedule"}};
    us_taint hard[] = {{"maint", NULL, "NoExecute"}};
    us_node_spec n1 = {"n1", NULL, {8, 64000, 1LL << 36}, NULL, 0, 0, NULL, 0};
    us_node_spec n2 = {"n2", NULL, {8, 64000, 1LL << 36}, NULL, 0, 0, soft, 1};
    us_queue_spec q;
    us_workload_spec w;
    us_label bg[] = {{"kai.scheduler/background", "true"}};
    us_toleration all[] = {{NULL, "Exists", NULL, NULL}};
    us_pod_info p;
    us_queue_spec_init(&q);
    q.name = "bg";
    q.over_quota_weight = (us_weights){0, 0, 0};
    CHECK(us_engine_upsert_queue(e, &q, &err) == US_OK);
    CHECK(us_engine_upsert_node(e, &n1, &err) == US_OK);
    us_workload_spec_init(&w);
    w.name = "agent";
    w.queue = "bg";
    w.controller = US_CONTROLLER_DAEMONSET;
    w.labels = bg;
    w.nlabels = 1;
    w.termination_grace = 0;
    w.requests.cpu = 100;
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK);
    w.name = "everywhere";
    w.tolerations = all;
    w.ntolerations = 1;
    CHECK(us_engine_upsert_workload(e, &w, 0, &err) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(pod_named(e, "agent-n1", &p) && p.phase == US_PHASE_RUNNING);
    /* a node that joins tainted gets only the pod that tolerates it */
    CHECK(us_engine_upsert_node(e, &n2, &err) == US_OK);
    CHECK(!pod_named(e, "agent-n2", &p));
    CHECK(pod_named(e, "everywhere-n2", &p) && p.phase == US_PHASE_PENDING);
    /* NoSchedule on a node with a running pod: the pod stays */
    n1.taints = soft;
    n1.ntaints = 1;
    CHECK(us_engine_upsert_node(e, &n1, &err) == US_OK);
    CHECK(pod_named(e, "agent-n1", &p) && p.phase == US_PHASE_RUNNING);
    /* NoExecute: it goes (grace 0: at once); the tolerant one stays */
    n1.taints = hard;
    CHECK(us_engine_upsert_node(e, &n1, &err) == US_OK);
    CHECK(!pod_named(e, "agent-n1", &p));
    CHECK(pod_named(e, "everywhere-n1", &p) && p.phase == US_PHASE_RUNNING);
    /* the taint lifted: the pod comes back, pending */
    n1.taints = NULL;
    n1.ntaints = 0;
    CHECK(us_engine_upsert_node(e, &n1, &err) == US_OK);
    CHECK(pod_named(e, "agent-n1", &p) && p.phase == US_PHASE_PENDING);
    CHECK(us_engine_run_cycle(e, 10, &err) == US_OK);
    CHECK(pod_named(e, "agent-n1", &p) && p.phase == US_PHASE_RUNNING && str_eq(p.node, "n1"));
    CHECK(pod_named(e, "everywhere-n2", &p) && p.phase == US_PHASE_RUNNING && str_eq(p.node, "n2"));
    us_engine_destroy(e);
}

int main(void) {
    RUN(matching_is_kubernetes_over_every_combination);
    RUN(which_taints_keep_a_pod_off);
    RUN(placement_property_on_random_clusters);
    RUN(equal_nodes_apart_by_taints);
    RUN(bad_taints_and_tolerations_name_the_field_and_change_nothing);
    RUN(daemonset_follows_node_taints);
    return check_report();
}
