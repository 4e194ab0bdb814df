/*
 * test_scenario.c — unit tests of the scenario loader (engine/scenario.c):
 * quantities, defaults, priority classes and preemptibility, every kind of
 * validation error with its JSON path, the DESIGN.md example, the timeline,
 * pre-existing pods, file loading, and a fuzz run over mutated documents.
 *
 * Documents are written with ' for " (see J) to keep them readable.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "check.h"
#include "scenario.h"

/* ---- helpers ------------------------------------------------------------- */

static char jbuf[1 << 16];

/* s with every ' turned into " (one static buffer: use it at once). */
static const char *J(const char *s) {
    size_t n = strlen(s);
    if (n >= sizeof jbuf) n = sizeof jbuf - 1;
    for (size_t i = 0; i < n; i++) jbuf[i] = s[i] == '\'' ? '"' : s[i];
    jbuf[n] = '\0';
    return jbuf;
}

static bool zeroed(const us_scenario *sc) {
    const unsigned char *p = (const unsigned char *)sc;
    for (size_t i = 0; i < sizeof *sc; i++)
        if (p[i]) return false;
    return true;
}

/* Load s (already in " form); garbage in *sc first, to see it is reset. */
static int load(us_scenario *sc, const char *s, us_err *err) {
    memset(sc, 0xAB, sizeof *sc);
    memset(err, 0, sizeof *err);
    return us_scenario_load_string(sc, s, strlen(s), NULL, err);
}

static us_err last;

/* The error message of a document that must fail cleanly (EINVAL, scenario
 * left zeroed), or a marker that CHECK_HAS will not find. */
static const char *fails(const char *s) {
    us_scenario sc;
    int rc = load(&sc, s, &last);
    if (rc == 0) {
        us_scenario_free(&sc);
        return "(it loaded)";
    }
    if (last.code != US_EINVAL) return "(wrong error code)";
    if (!zeroed(&sc)) return "(scenario not zeroed)";
    return last.msg;
}

/* Must load; prints the error otherwise. */
static bool loads(us_scenario *sc, const char *s) {
    us_err err;
    if (load(sc, s, &err) == 0) return true;
    fprintf(stderr, "  unexpected error: %s\n", err.msg);
    check_cur_failed = 1;  /* a document that should load and does not fails the test */
    return false;
}

#define NODE1 "'nodes':[{'name':'n1','cpu':'8','memory':'64Gi','gpu':8}]"
#define QUEUES                                                                     \
    "'queues':[{'name':'research'},{'name':'team-a','parent':'research'},"         \
    "{'name':'bg','resources':{'gpu':{'quota':0,'over_quota_weight':0},"           \
    "'cpu':{'quota':0,'over_quota_weight':0},'memory':{'quota':0,'over_quota_weight':0}}}]"
/* a document with node n1, queues research > team-a and bg, and workloads */
#define DOC(wls) "{" NODE1 "," QUEUES ",'workloads':[" wls "]}"
#define DOCT(wls, tl) "{" NODE1 "," QUEUES ",'workloads':[" wls "],'timeline':[" tl "]}"

/* ---- quantities ---------------------------------------------------------- */

TEST(cpu_quantities_valid) {
    static const struct {
        const char *s;
        int64_t v;
    } ok[] = {{"500m", 500},        {"8", 8000},           {"1.5", 1500},
              {"0.1", 100},         {".5", 500},           {"1k", 1000000},
              {"2e3", 2000000},     {"1e-3", 1},           {"0", 0},
              {"+1", 1000},         {"0.25", 250},         {"1Ki", 1024000},
              {"100E-2", 1000},     {"1M", 1000000000},    {"0.0010", 1},
              {"9223372036854775807m", INT64_MAX},         {"-0", 0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t v = -7;
        int rc = us_parse_cpu(ok[i].s, &v);
        if (rc != 0 || v != ok[i].v) fprintf(stderr, "  cpu %s -> %d %lld\n", ok[i].s, rc, (long long)v);
        CHECK(rc == 0 && v == ok[i].v);
    }
}

TEST(cpu_quantities_invalid) {
    static const char *const bad[] = {"",     "abc",   "12x",  "-1",   "0.5m", "1.0005",
                                      "1 ",   " 1",    "1mm",  "m",    ".",    "1e",
                                      "1e+",  "1.2.3", "--1",  "1Gi1", "0x10", "1i",
                                      "9223372036854775808m", "10E", "1e20", "5u"};
    int64_t v = 42;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (us_parse_cpu(bad[i], &v) != -1) fprintf(stderr, "  cpu %s accepted\n", bad[i]);
        CHECK(us_parse_cpu(bad[i], &v) == -1);
    }
    CHECK(v == 42); /* untouched on failure */
    CHECK(us_parse_cpu(NULL, &v) == -1);
}

TEST(memory_quantities_valid) {
    static const struct {
        const char *s;
        int64_t v;
    } ok[] = {{"512Mi", 536870912},          {"80Gi", 85899345920},
              {"1G", 1000000000},            {"128974848", 128974848},
              {"129e6", 129000000},          {"1.5Gi", 1610612736},
              {"1k", 1000},                  {"1Ki", 1024},
              {"0.5", 1},                    {"1500m", 2},
              {"1000m", 1},                  {"0.001Ki", 2},
              {"7Ei", 8070450532247928832},  {"1E", 1000000000000000000},
              {"1e18", 1000000000000000000}, {"0", 0},
              {"1.25Ki", 1280},              {"1e-30", 1}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t v = -7;
        int rc = us_parse_memory(ok[i].s, &v);
        if (rc != 0 || v != ok[i].v) fprintf(stderr, "  mem %s -> %d %lld\n", ok[i].s, rc, (long long)v);
        CHECK(rc == 0 && v == ok[i].v);
    }
}

TEST(memory_quantities_invalid) {
    static const char *const bad[] = {
        "-1", "1x", "1Gb", "", "1.5.5", "Mi", "1e99999999", "8Ei", "1gi", "1 Gi", "10000000000000000000",
        "1000000000000000000000000000000000000000000000000000000000000000000000000"};
    int64_t v;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (us_parse_memory(bad[i], &v) != -1) fprintf(stderr, "  mem %s accepted\n", bad[i]);
        CHECK(us_parse_memory(bad[i], &v) == -1);
    }
}

TEST(quantities_in_documents) {
    us_scenario sc;
    if (!loads(&sc, J("{'nodes':[{'name':'a','cpu':1.5,'memory':1.5,'gpu':2},"
                      "{'name':'b','cpu':'250m','memory':'1.5Gi'},{'name':'c','cpu':0.1,'memory':'129e6'}],"
                      "'queues':[{'name':'q','resources':{'gpu':{'quota':0.5,'limit':4},"
                      "'cpu':{'quota':'8','limit':-1,'over_quota_weight':2.5},"
                      "'memory':{'quota':'80Gi','limit':137438953472}}}]}")))
        return;
    CHECK(sc.state.nodes[0].cap.v[US_CPU] == 1500);
    CHECK(sc.state.nodes[0].cap.v[US_MEM] == 2); /* fractional bytes round up */
    CHECK(sc.state.nodes[0].cap.v[US_GPU] == 2000 && sc.state.nodes[0].gpus == 2);
    CHECK(sc.state.nodes[1].cap.v[US_CPU] == 250);
    CHECK(sc.state.nodes[1].cap.v[US_MEM] == 1610612736);
    CHECK(sc.state.nodes[2].cap.v[US_CPU] == 100); /* 0.1 cores is exact */
    CHECK(sc.state.nodes[2].cap.v[US_MEM] == 129000000);
    const us_queue *q = &sc.state.queues[0];
    CHECK(q->res[US_GPU].quota == 500 && q->res[US_GPU].limit == 4000);
    CHECK(q->res[US_GPU].over_quota_weight == 1);
    CHECK(q->res[US_CPU].quota == 8000 && q->res[US_CPU].limit == US_UNLIMITED);
    CHECK(q->res[US_CPU].over_quota_weight == 2.5);
    CHECK(q->res[US_MEM].quota == 85899345920 && q->res[US_MEM].limit == 137438953472);
    us_scenario_free(&sc);

    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','cpu':'12x'}]}")), "nodes[0].cpu: \"12x\" is not a cpu quantity");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','cpu':'0.5m'}]}")), "nodes[0].cpu: \"0.5m\" is not a cpu quantity (finer than 1m)");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','cpu':-2}]}")), "nodes[0].cpu: -2 is not a cpu quantity (negative)");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','memory':'1Gb'}]}")), "nodes[0].memory: \"1Gb\" is not a memory quantity");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','memory':'9Ei'}]}")), "nodes[0].memory: \"9Ei\" is not a memory quantity (too large)");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','memory':1e999}]}")), "nodes[0].memory: inf is not a memory quantity");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','cpu':true}]}")), "nodes[0].cpu: must be a quantity string or a number, not a boolean");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','gpu':1.5}]}")), "nodes[0].gpu: 1.5 is not a whole number of GPUs from 0 to 64");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','gpu':65}]}")), "nodes[0].gpu: 65 is not a whole number of GPUs from 0 to 64");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','gpu':'8'}]}")), "nodes[0].gpu: must be a number, not a string");
    CHECK_HAS(fails(J("{'queues':[{'name':'q','resources':{'cpu':{'quota':-2}}}]}")),
              "queues[0].resources.cpu.quota: -2 is not a cpu quantity (negative)");
    CHECK_HAS(fails(J("{'queues':[{'name':'q','resources':{'gpu':{'limit':0.0001}}}]}")),
              "queues[0].resources.gpu.limit: 0.0001 is not a gpu quantity (finer than 0.001)");
    CHECK_HAS(fails(J("{'queues':[{'name':'q','resources':{'gpu':{'over_quota_weight':-1}}}]}")),
              "queues[0].resources.gpu.over_quota_weight: -1 is not a number >= 0");
}

TEST(node_gpu_bounds) {
    us_scenario sc;
    if (!loads(&sc, J("{'nodes':[{'name':'a','gpu':64},{'name':'b','gpu':0}]}"))) return;
    CHECK(sc.state.nodes[0].gpus == 64 && sc.state.nodes[0].cap.v[US_GPU] == 64000);
    CHECK(sc.state.nodes[1].gpus == 0 && sc.state.nodes[1].cap.v[US_GPU] == 0);
    us_scenario_free(&sc);
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','gpu':-1}]}")), "nodes[0].gpu: -1 is not a whole number");
}

TEST(gpu_requests) {
    us_scenario sc;
    if (!loads(&sc, J(DOC("{'name':'a','queue':'team-a','requests':{'gpu':0.5}},"
                          "{'name':'b','queue':'team-a','requests':{'gpu':2}},"
                          "{'name':'c','queue':'bg','labels':{'kai.scheduler/background':'true'},"
                          " 'requests':{'gpu':1.5}},"
                          "{'name':'d','queue':'team-a','requests':{'gpu':0.125}}"))))
        return;
    CHECK(sc.state.workloads[0].request.v[US_GPU] == 500);
    CHECK(sc.state.workloads[1].request.v[US_GPU] == 2000);
    /* a fractional background request loads, and is blocked by the rules */
    CHECK(sc.state.workloads[2].request.v[US_GPU] == 1500);
    CHECK(sc.state.workloads[2].background);
    CHECK(sc.state.workloads[2].blocked != NULL);
    CHECK(sc.state.workloads[3].request.v[US_GPU] == 125);
    CHECK(sc.state.workloads[0].blocked == NULL);
    us_scenario_free(&sc);

    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','requests':{'gpu':1.5}}"))),
              "workloads[0].requests.gpu: 1.5 is not a whole number of GPUs");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','requests':{'gpu':0.0005}}"))),
              "workloads[0].requests.gpu: 0.0005 is not a gpu quantity (finer than 0.001)");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','requests':{'gpu':-1}}"))),
              "workloads[0].requests.gpu: -1 is not a gpu quantity (negative)");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','requests':{'cpu':'lots'}}"))),
              "workloads[0].requests.cpu: \"lots\" is not a cpu quantity");
}

/* ---- defaults ------------------------------------------------------------- */

TEST(defaults_applied) {
    us_scenario sc;
    if (!loads(&sc, J("{'nodes':[{'name':'n'}],'queues':[{'name':'q'}],"
                      "'workloads':[{'name':'w','queue':'q'}]}")))
        return;
    CHECK_STR(sc.name, "");
    CHECK(sc.cycle_interval == 10);
    CHECK(sc.horizon < 0);
    CHECK(sc.ntimeline == 0 && sc.timeline == NULL);
    const us_node *n = &sc.state.nodes[0];
    CHECK_STR(n->pool, "default");
    CHECK(n->labels.n == 0 && !n->unschedulable && !n->removed);
    CHECK(n->gpus == 0 && us_res_is_zero(n->cap));
    const us_queue *q = &sc.state.queues[0];
    CHECK(q->parent == -1 && q->priority == 0 && q->npools == 0 && q->leaf && q->depth == 0);
    for (int r = 0; r < US_NRES; r++)
        CHECK(q->res[r].quota == 0 && q->res[r].limit == US_UNLIMITED && q->res[r].over_quota_weight == 1);
    const us_workload *w = &sc.state.workloads[0];
    CHECK(w->queue == 0);
    CHECK(w->priority == 50);
    CHECK(w->preemptibility == US_PREEMPTIBLE);
    CHECK(w->controller == US_CTRL_NONE);
    CHECK(w->replicas == 1 && w->min_member == 1);
    CHECK_STR(w->pool, "default");
    CHECK(w->node_selector.n == 0 && w->labels.n == 0);
    CHECK(w->termination_grace == 30);
    CHECK(w->submit_at == 0);
    CHECK(w->duration < 0);
    CHECK(!w->background);
    CHECK(us_res_is_zero(w->request));
    CHECK(w->state == US_WL_WAITING && w->started_at < 0 && w->blocked == NULL);
    CHECK(sc.state.npods == 0);
    us_scenario_free(&sc);
    CHECK(zeroed(&sc));
}

TEST(defaults_min_member_by_controller) {
    us_scenario sc;
    if (!loads(&sc, J(DOC("{'name':'a','queue':'team-a','replicas':3},"
                          "{'name':'b','queue':'team-a','controller':'job','replicas':3},"
                          "{'name':'c','queue':'team-a','controller':'deployment','replicas':4},"
                          "{'name':'d','queue':'team-a','controller':'daemonset'},"
                          "{'name':'e','queue':'team-a','replicas':4,'min_member':2}"))))
        return;
    CHECK(sc.state.workloads[0].min_member == 3 && sc.state.workloads[0].controller == US_CTRL_NONE);
    CHECK(sc.state.workloads[1].min_member == 3 && sc.state.workloads[1].controller == US_CTRL_JOB);
    CHECK(sc.state.workloads[2].min_member == 1 && sc.state.workloads[2].controller == US_CTRL_DEPLOYMENT);
    CHECK(sc.state.workloads[3].min_member == 1 && sc.state.workloads[3].controller == US_CTRL_DAEMONSET);
    CHECK(sc.state.workloads[4].min_member == 2 && sc.state.workloads[4].replicas == 4);
    us_scenario_free(&sc);
}

TEST(queue_pool_overrides) {
    us_scenario sc;
    if (!loads(&sc, J("{'queues':[{'name':'q','priority':3,"
                      "'resources':{'gpu':{'quota':8,'over_quota_weight':2}},"
                      "'pools':{'a100':{'gpu':{'quota':4}},'h100':{'cpu':{'limit':'16'}}}}]}")))
        return;
    const us_queue *q = &sc.state.queues[0];
    CHECK(q->priority == 3 && q->npools == 2);
    CHECK_STR(q->pools[0].pool, "a100");
    CHECK(q->pools[0].set[US_GPU] && !q->pools[0].set[US_CPU] && !q->pools[0].set[US_MEM]);
    CHECK(q->pools[0].res[US_GPU].quota == 4000);
    CHECK(q->pools[0].res[US_GPU].over_quota_weight == 2); /* the rest is the queue's */
    CHECK(q->pools[0].res[US_GPU].limit == US_UNLIMITED);
    CHECK_STR(q->pools[1].pool, "h100");
    CHECK(q->pools[1].set[US_CPU] && q->pools[1].res[US_CPU].limit == 16000);
    CHECK(us_queue_res(q, "a100", US_GPU).quota == 4000);
    CHECK(us_queue_res(q, "other", US_GPU).quota == 8000);
    us_scenario_free(&sc);
    CHECK_HAS(fails(J("{'queues':[{'name':'q','pools':{'a':{'gpus':{}}}}]}")),
              "queues[0].pools.a.gpus: unknown field (did you mean \"gpu\"?)");
    CHECK_HAS(fails(J("{'queues':[{'name':'q','pools':{'a':{},'a':{}}}]}")), "queues[0].pools.a: duplicate key");
}

/* ---- priority and preemptibility ----------------------------------------- */

TEST(priority_classes_and_default_preemptibility) {
    us_scenario sc;
    if (!loads(&sc, J(DOC("{'name':'t','queue':'team-a','priority':'train'},"
                          "{'name':'bp','queue':'team-a','priority':'build-preemptible'},"
                          "{'name':'b','queue':'team-a','priority':'build'},"
                          "{'name':'i','queue':'team-a','priority':'inference'},"
                          "{'name':'n99','queue':'team-a','priority':99},"
                          "{'name':'n100','queue':'team-a','priority':100},"
                          "{'name':'neg','queue':'team-a','priority':-5}"))))
        return;
    const us_workload *w = sc.state.workloads;
    CHECK(w[0].priority == 50 && w[0].preemptibility == US_PREEMPTIBLE);
    CHECK(w[1].priority == 75 && w[1].preemptibility == US_PREEMPTIBLE);
    CHECK(w[2].priority == 100 && w[2].preemptibility == US_NON_PREEMPTIBLE);
    CHECK(w[3].priority == 125 && w[3].preemptibility == US_NON_PREEMPTIBLE);
    CHECK(w[4].priority == 99 && w[4].preemptibility == US_PREEMPTIBLE);
    CHECK(w[5].priority == 100 && w[5].preemptibility == US_NON_PREEMPTIBLE);
    CHECK(w[6].priority == -5);
    us_scenario_free(&sc);
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','priority':'urgent'}"))),
              "workloads[0].priority: \"urgent\" is not a priority class (train, build-preemptible, build, inference)");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','priority':1.5}"))),
              "workloads[0].priority: 1.5 is not a whole number");
}

TEST(preemptibility_field_and_label) {
    us_scenario sc;
    if (!loads(&sc, J(DOC("{'name':'a','queue':'team-a','priority':'inference','preemptibility':'preemptible'},"
                          "{'name':'b','queue':'team-a','labels':{'kai.scheduler/preemptibility':'semi-preemptible'}},"
                          "{'name':'c','queue':'team-a','preemptibility':'non-preemptible',"
                          " 'labels':{'kai.scheduler/preemptibility':'non-preemptible'}},"
                          "{'name':'d','queue':'bg','labels':{'kai.scheduler/background':'true',"
                          " 'kai.scheduler/preemptibility':'non-preemptible'}}"))))
        return;
    const us_workload *w = sc.state.workloads;
    CHECK(w[0].preemptibility == US_PREEMPTIBLE);
    CHECK(w[1].preemptibility == US_SEMI_PREEMPTIBLE);
    CHECK(w[2].preemptibility == US_NON_PREEMPTIBLE);
    /* well-formed, breaks a background rule: loaded and blocked */
    CHECK(w[3].background && w[3].preemptibility == US_NON_PREEMPTIBLE && w[3].blocked != NULL);
    us_scenario_free(&sc);
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','preemptibility':'preemptible',"
                          "'labels':{'kai.scheduler/preemptibility':'non-preemptible'}}"))),
              "workloads[0].preemptibility: \"preemptible\" disagrees with "
              "workloads[0].labels[\"kai.scheduler/preemptibility\"]");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','labels':{'kai.scheduler/preemptibility':'maybe'}}"))),
              "workloads[0].labels[\"kai.scheduler/preemptibility\"]: \"maybe\" is not a preemptibility");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','preemptibility':'sometimes'}"))),
              "workloads[0].preemptibility: \"sometimes\" is not a preemptibility (preemptible, non-preemptible, semi-preemptible)");
}

TEST(background_label) {
    us_scenario sc;
    if (!loads(&sc, J(DOC("{'name':'a','queue':'bg','labels':{'kai.scheduler/background':'true'}},"
                          "{'name':'b','queue':'bg','labels':{'kai.scheduler/background':'false'}},"
                          "{'name':'c','queue':'team-a','labels':{'kai.scheduler/background':'true'}}"))))
        return;
    CHECK(sc.state.workloads[0].background && sc.state.workloads[0].blocked == NULL);
    CHECK(!sc.state.workloads[1].background);
    /* a background workload in a queue with quota: loaded, never scheduled */
    CHECK(sc.state.workloads[2].background && sc.state.workloads[2].blocked != NULL);
    CHECK(sc.state.workloads[0].labels.n == 1);
    CHECK_STR(us_labels_get(&sc.state.workloads[0].labels, US_BACKGROUND_LABEL), "true");
    us_scenario_free(&sc);
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'bg','labels':{'kai.scheduler/background':true}}"))),
              "workloads[0].labels[\"kai.scheduler/background\"]: must be a string, not a boolean");
}

/* ---- validation errors ---------------------------------------------------- */

TEST(error_json_syntax_with_line_and_column) {
    CHECK_HAS(fails("{\n  \"name\": ,\n}"), "invalid JSON at line 2, column 11");
    CHECK_HAS(fails("{\"name\": \"x\"} x"), "invalid JSON at line 1, column 15");
    CHECK_HAS(fails(""), "invalid JSON at line 1, column 1");
    /* a NUL inside the text would otherwise hide what follows it */
    us_scenario sc;
    us_err err;
    memset(&sc, 0xAB, sizeof sc);
    CHECK(us_scenario_load_string(&sc, "{}\0{", 4, NULL, &err) == -1);
    CHECK(err.code == US_EINVAL && zeroed(&sc));
    CHECK_HAS(err.msg, "line 1, column 3");
    /* a length shorter than the text: only len bytes count */
    CHECK(us_scenario_load_string(&sc, "{}garbage", 2, NULL, &err) == 0);
    us_scenario_free(&sc);
}

TEST(error_top_level_must_be_object) {
    CHECK_HAS(fails("[1]"), "the document must be a JSON object, not an array");
    CHECK_HAS(fails("\"x\""), "the document must be a JSON object, not a string");
    CHECK_HAS(fails("null"), "the document must be a JSON object, not null");
}

TEST(error_wrong_types) {
    CHECK_HAS(fails(J("{'nodes':{}}")), "nodes: must be an array, not an object");
    CHECK_HAS(fails(J("{'name':3}")), "name: must be a string, not a number");
    CHECK_HAS(fails(J("{'nodes':[3]}")), "nodes[0]: must be an object, not a number");
    CHECK_HAS(fails(J("{'nodes':[{'name':7}]}")), "nodes[0].name: must be a string, not a number");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n','unschedulable':'yes'}]}")),
              "nodes[0].unschedulable: must be true or false, not a string");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n','labels':[]}]}")), "nodes[0].labels: must be an object, not an array");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n','labels':{'zone':1}}]}")), "nodes[0].labels.zone: must be a string, not a number");
    CHECK_HAS(fails(J("{'queues':[{'name':'q','resources':[]}]}")), "queues[0].resources: must be an object, not an array");
    CHECK_HAS(fails(J("{'queues':[{'name':'q','parent':1}]}")), "queues[0].parent: must be a string, not a number");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','replicas':'2'}"))), "workloads[0].replicas: must be a number, not a string");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','requests':4}"))), "workloads[0].requests: must be an object, not a number");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','pods':{}}"))), "workloads[0].pods: must be an array, not an object");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','node_selector':{'x':false}}"))),
              "workloads[0].node_selector.x: must be a string, not a boolean");
    CHECK_HAS(fails(J("{'timeline':[{'at':'5','action':'delete','workload':'a'}]}")), "timeline[0].at: must be a number, not a string");
    CHECK_HAS(fails(J("{'cycle_interval':'10'}")), "cycle_interval: must be a number, not a string");
}

TEST(error_missing_required_fields) {
    CHECK_HAS(fails(J("{'nodes':[{'gpu':1}]}")), "nodes[0].name: required field is missing");
    CHECK_HAS(fails(J("{'nodes':[{'name':''}]}")), "nodes[0].name: must not be empty");
    CHECK_HAS(fails(J("{'queues':[{}]}")), "queues[0].name: required field is missing");
    CHECK_HAS(fails(J(DOC("{'name':'a'}"))), "workloads[0].queue: required field is missing");
    CHECK_HAS(fails(J("{'timeline':[{'action':'cordon','node':'x'}]}")), "timeline[0].at: required field is missing");
    CHECK_HAS(fails(J("{'timeline':[{'at':1}]}")), "timeline[0].action: required field is missing");
}

TEST(error_unknown_fields) {
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','gpus':8}]}")), "nodes[0].gpus: unknown field");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','gpus':8}]}")), "(did you mean \"gpu\"?)");
    CHECK_HAS(fails(J("{'nodez':[]}")), "nodez: unknown field (did you mean \"nodes\"?)");
    CHECK_HAS(fails(J("{'frobnicate':1}")), "frobnicate: unknown field");
    CHECK_HAS(fails(J("{'queues':[{'name':'q','resources':{'gpu':{'quota':1,'weight':2}}}]}")),
              "queues[0].resources.gpu.weight: unknown field");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','requests':{'mem':'1Gi'}}"))),
              "workloads[0].requests.mem: unknown field");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','pods':[{'node':'n1','state':'running','zone':'a'}]}"))),
              "workloads[0].pods[0].zone: unknown field");
    CHECK_HAS(fails(J("{'timeline':[{'at':1,'action':'cordon','node':'x','why':'y'}]}")), "timeline[0].why: unknown field");
    CHECK_HAS(fails(J("{'nodes':[{'name':'a','name':'b'}]}")), "nodes[0].name: duplicate field");
    CHECK_HAS(fails(J("{'nodes':[{'name':'a','labels':{'k':'1','k':'2'}}]}")), "nodes[0].labels.k: duplicate key");
    /* field names are case-sensitive */
    CHECK_HAS(fails(J("{'nodes':[{'Name':'a'}]}")), "nodes[0].Name: unknown field");
}

TEST(error_duplicate_names) {
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1'},{'name':'n1'}]}")), "nodes[1].name: \"n1\" is a duplicate node name");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1'}],'timeline':[{'at':5,'action':'add_node','node':{'name':'n1'}}]}")),
              "timeline[0].node.name: \"n1\" is a duplicate node name");
    CHECK_HAS(fails(J("{'queues':[{'name':'q'},{'name':'q'}]}")), "queues[1].name: \"q\" is a duplicate queue name");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a'},{'name':'a','queue':'team-a'}"))),
              "workloads[1].name: \"a\" is a duplicate workload name");
    CHECK_HAS(fails(J(DOCT("{'name':'a','queue':'team-a'}",
                           "{'at':5,'action':'submit','workload':{'name':'a','queue':'team-a'}}"))),
              "timeline[0].workload.name: \"a\" is a duplicate workload name");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','replicas':2,"
                          " 'pods':[{'name':'p','node':'n1','state':'running'},{'name':'p','node':'n1','state':'running'}]}"))),
              "workloads[0].pods[1].name: \"p\" is a duplicate pod name");
    /* a generated name can collide with an explicit one */
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','pods':[{'name':'b-0','node':'n1','state':'running'}]},"
                          "{'name':'b','queue':'team-a','pods':[{'node':'n1','state':'running'}]}"))),
              "workloads[1].pods[0]: \"b-0\" is a duplicate pod name");
    /* a releasing pod is a former incarnation: it keeps the name of the
     * pod that replaced it, and of earlier ones (as the engine lists them,
     * and us_engine_state_json writes them) */
    us_scenario sc;
    if (loads(&sc, J(DOC("{'name':'a','queue':'team-a','replicas':1,'requests':{'gpu':1},"
                         " 'pods':[{'name':'a-0','node':'n1','state':'releasing'},"
                         "{'name':'a-0','node':'n1','state':'releasing','release_at':5},"
                         "{'name':'a-0','node':'n1','state':'running'}]}")))) {
        int n = 0;
        for (size_t i = 0; i < sc.state.npods; i++) n += !strcmp(sc.state.pods[i].name, "a-0");
        CHECK(n == 3);
        us_scenario_free(&sc);
    }
    /* a releasing daemonset pod on a node that no longer matches its
     * selector (the reason it terminates) loads; a running one does not */
    if (loads(&sc, J("{'nodes':[{'name':'n1','cpu':'8','memory':'64Gi','gpu':8}]," QUEUES ",'workloads':["
                     "{'name':'d','queue':'bg','controller':'daemonset','node_selector':{'zone':'a'},"
                     " 'labels':{'kai.scheduler/background':'true'},"
                     " 'pods':[{'node':'n1','state':'releasing'}]}]}")))
        us_scenario_free(&sc);
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','cpu':'8','memory':'64Gi','gpu':8}]," QUEUES ",'workloads':["
                      "{'name':'d','queue':'bg','controller':'daemonset','node_selector':{'zone':'a'},"
                      " 'labels':{'kai.scheduler/background':'true'},"
                      " 'pods':[{'node':'n1','state':'running'}]}]}")),
              "does not match the daemonset's node_selector");
    /* a fractional pod's device: as given, so a packing the loader's own
     * choice would not find loads (slot 0: a pipelined pod and a releasing
     * one; slot 1: two running pods); out of range or on a whole-GPU pod
     * it is refused */
    if (loads(&sc, J("{'nodes':[{'name':'n1','cpu':'8','memory':'64Gi','gpu':2}]," QUEUES ",'workloads':["
                     "{'name':'f','queue':'team-a','replicas':3,'requests':{'gpu':0.5},'pods':["
                     "{'node':'n1','state':'pipelined','device':0},{'node':'n1','state':'running','device':1},"
                     "{'node':'n1','state':'running','device':1},{'node':'n1','state':'releasing','device':0}]}]}"))) {
        CHECK(sc.state.npods == 4 && sc.state.pods[0].shared_dev == 0 && sc.state.pods[1].shared_dev == 1 &&
              sc.state.pods[2].shared_dev == 1 && sc.state.pods[3].shared_dev == 0);
        us_scenario_free(&sc);
    }
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','cpu':'8','memory':'64Gi','gpu':2}]," QUEUES ",'workloads':["
                      "{'name':'f','queue':'team-a','requests':{'gpu':0.5},'pods':[{'node':'n1','state':'running','device':2}]}]}")),
              "workloads[0].pods[0].device: 2 is not a whole number from 0 to 1");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','cpu':'8','memory':'64Gi','gpu':2}]," QUEUES ",'workloads':["
                      "{'name':'f','queue':'team-a','requests':{'gpu':1},'pods':[{'node':'n1','state':'running','device':0}]}]}")),
              "workloads[0].pods[0].device: only a pod of a fraction of one GPU shares a device");
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','cpu':'8','memory':'64Gi','gpu':2}]," QUEUES ",'workloads':["
                      "{'name':'f','queue':'team-a','replicas':3,'requests':{'gpu':0.5},'pods':["
                      "{'node':'n1','state':'running','device':0},{'node':'n1','state':'running','device':0},"
                      "{'node':'n1','state':'running','device':0}]}]}")),
              "has no GPU device left for this pod");
    /* two live ones may not */
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','replicas':2,"
                          " 'pods':[{'name':'p','node':'n1','state':'releasing'},{'name':'p','node':'n1','state':'pipelined'},"
                          "{'name':'p','node':'n1','state':'running'}]}"))),
              "workloads[0].pods[2].name: \"p\" is a duplicate pod name");
}

TEST(error_queue_parents) {
    CHECK_HAS(fails(J("{'queues':[{'name':'a'},{'name':'b'},{'name':'c','parent':'nope'}]}")),
              "queues[2].parent: \"nope\" is not a queue");
    CHECK_HAS(fails(J("{'queues':[{'name':'a','parent':'a'}]}")), "queues[0].parent: \"a\" makes a cycle: a -> a");
    CHECK_HAS(fails(J("{'queues':[{'name':'r'},{'name':'a','parent':'b'},{'name':'b','parent':'c'},{'name':'c','parent':'a'}]}")),
              "makes a cycle: a -> b -> c -> a");
    /* a parent later in the array is fine */
    us_scenario sc;
    if (!loads(&sc, J("{'queues':[{'name':'child','parent':'root'},{'name':'root'}]}"))) return;
    CHECK(sc.state.queues[0].parent == 1 && sc.state.queues[0].leaf && sc.state.queues[0].depth == 1);
    CHECK(!sc.state.queues[1].leaf);
    us_scenario_free(&sc);
}

TEST(error_workload_queue) {
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a'},{'name':'b','queue':'team-a'},"
                          "{'name':'c','queue':'team-a'},{'name':'d','queue':'team-z'}"))),
              "workloads[3].queue: \"team-z\" is not a queue");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a'},{'name':'b','queue':'research'}"))),
              "workloads[1].queue: \"research\" is not a leaf queue");
}

TEST(error_numbers_out_of_range) {
    CHECK_HAS(fails(J("{'cycle_interval':0}")), "cycle_interval: 0 is not a number > 0");
    CHECK_HAS(fails(J("{'cycle_interval':-3}")), "cycle_interval: -3 is not a number > 0");
    CHECK_HAS(fails(J("{'horizon':-1}")), "horizon: -1 is not a number >= 0");
    CHECK_HAS(fails(J("{'horizon':1e999}")), "horizon: number is too large");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','duration':0}"))), "workloads[0].duration: 0 is not a number > 0");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','termination_grace':-1}"))),
              "workloads[0].termination_grace: -1 is not a number >= 0");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','submit_at':-0.5}"))), "workloads[0].submit_at: -0.5 is not a number >= 0");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','replicas':0}"))), "workloads[0].replicas: 0 is not a whole number from 1");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','replicas':2.5}"))), "workloads[0].replicas: 2.5 is not a whole number");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','replicas':2,'min_member':3}"))),
              "workloads[0].min_member: 3 is more than replicas (2)");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','min_member':0}"))), "workloads[0].min_member: 0 is not a whole number from 1");
    /* succeeded pods are beside replicas: min_member may reach both */
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','replicas':2,'succeeded':1,'min_member':4}"))),
              "workloads[0].min_member: 4 is more than replicas (2) and succeeded (1) together");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','succeeded':-1}"))),
              "workloads[0].succeeded: -1 is not a whole number from 0");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','controller':'daemonset','succeeded':1}"))),
              "workloads[0].succeeded: a daemonset's pods do not run to completion");
    CHECK_HAS(fails(J(DOC("{'name':'a','external':true,'succeeded':1}"))),
              "workloads[0].succeeded: an external workload's pods are its own scheduler's business");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','controller':'statefulset'}"))),
              "workloads[0].controller: \"statefulset\" is not a controller (none, job, deployment, daemonset)");
    CHECK_HAS(fails(J("{'timeline':[{'at':-1,'action':'cordon','node':'x'}]}")), "timeline[0].at: -1 is not a number >= 0");
    us_scenario sc;
    if (!loads(&sc, J(DOC("{'name':'a','queue':'team-a','replicas':2,'succeeded':1,'min_member':3}")))) return;
    CHECK(sc.state.workloads[0].succeeded == 1 && sc.state.workloads[0].min_member == 3);
    us_scenario_free(&sc);
    if (!loads(&sc, J(DOC("{'name':'a','queue':'team-a','duration':300,'termination_grace':0,'submit_at':12.5}")))) return;
    CHECK(sc.state.workloads[0].duration == 300 && sc.state.workloads[0].termination_grace == 0);
    CHECK(sc.state.workloads[0].submit_at == 12.5);
    us_scenario_free(&sc);
}

TEST(error_preexisting_pods) {
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','pods':[{'node':'n7','state':'running'}]}"))),
              "workloads[0].pods[0].node: \"n7\" is not a node");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','pods':[{'node':'n1','state':'pending'}]}"))),
              "workloads[0].pods[0].state: \"pending\" is not a pre-existing pod state (running, pipelined, releasing)");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','pods':[{'node':'n1'}]}"))),
              "workloads[0].pods[0].state: required field is missing");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','replicas':1,"
                          " 'pods':[{'node':'n1','state':'running'},{'node':'n1','state':'running'}]}"))),
              "workloads[0].pods: 2 pre-existing pods that are not releasing, but only 1 replicas");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','pods':[{'node':'n1','state':'running','pin':'n2'}]}"))),
              "workloads[0].pods[0].pin: \"n2\" is not the pod's node \"n1\"");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','pods':[{'node':'n1','state':'running','pin':3}]}"))),
              "workloads[0].pods[0].pin: must be a string");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','pods':[{'node':'n1','state':'running','release_at':5}]}"))),
              "workloads[0].pods[0].release_at: only a releasing pod has one");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','pods':[{'node':'n1','state':'releasing','release_at':-1}]}"))),
              "workloads[0].pods[0].release_at: -1 is not a number >= 0");
    /* n1 has 8 GPUs: two running and one pipelined 4-GPU pod fit now, not
     * where the plan ends; two running and one releasing, not now */
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','replicas':3,'requests':{'gpu':4},"
                          " 'pods':[{'node':'n1','state':'running'},{'node':'n1','state':'running'},"
                          "         {'node':'n1','state':'pipelined'}]}"))),
              "workloads[0].pods[2].node: \"n1\" has not enough gpu for its pre-existing pods once the "
              "releasing pods are gone");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','replicas':2,'requests':{'gpu':4},"
                          " 'pods':[{'node':'n1','state':'running'},{'node':'n1','state':'running'},"
                          "         {'node':'n1','state':'releasing'}]}"))),
              "workloads[0].pods[2].node: \"n1\" has not enough gpu for its pre-existing pods");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','pool':'a100','pods':[{'node':'n1','state':'running'}]}"))),
              "workloads[0].pods[0].node: \"n1\" is in pool \"default\", not the workload's pool \"a100\"");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'bg','controller':'daemonset','node_selector':{'zone':'b'},"
                          " 'pods':[{'node':'n1','state':'running'}]}"))),
              "workloads[0].pods[0].node: \"n1\" does not match the daemonset's node_selector");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'bg','controller':'daemonset',"
                          " 'pods':[{'node':'n1','state':'running','name':'x'},{'node':'n1','state':'running','name':'y'}]}"))),
              "workloads[0].pods[1].node: \"n1\" already has a pod of this daemonset");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','submit_at':30,'pods':[{'node':'n1','state':'running'}]}"))),
              "workloads[0].pods: a workload with pre-existing pods must be submitted at 0, not 30");
    CHECK_HAS(fails(J(DOCT("{'name':'a','queue':'team-a','pods':[{'node':'n1','state':'running'}]}",
                           "{'at':30,'action':'submit','workload':'a'}"))),
              "timeline[0].workload: \"a\" has pre-existing pods, so it cannot be submitted at 30");
    /* node n1 has 8 GPUs */
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','replicas':3,'requests':{'gpu':4},"
                          " 'pods':[{'node':'n1','state':'running'},{'node':'n1','state':'running'},"
                          "         {'node':'n1','state':'running'}]}"))),
              "workloads[0].pods[2].node: \"n1\" has not enough gpu for its pre-existing pods");
    CHECK_HAS(fails(J("{" NODE1 "," QUEUES ",'workloads':[{'name':'a','queue':'team-a',"
                      " 'pods':[{'node':'n9','state':'running'}]}],"
                      "'timeline':[{'at':0,'action':'add_node','node':{'name':'n9'}}]}")),
              "workloads[0].pods[0].node: \"n9\" is not a node");
}

TEST(error_timeline) {
    CHECK_HAS(fails(J("{'timeline':[{'at':1,'action':'cordon','node':'x'},{'at':2,'action':'explode'}]}")),
              "timeline[0].node: \"x\" is not a node");
    CHECK_HAS(fails(J("{'timeline':[{'at':2,'action':'explode'}]}")),
              "timeline[0].action: \"explode\" is not an action (submit, delete, complete, add_node, "
              "remove_node, cordon, uncordon, reload_policies)");
    CHECK_HAS(fails(J(DOCT("{'name':'a','queue':'team-a'}", "{'at':1,'action':'cordon','node':'n1'},"
                                                           "{'at':2,'action':'delete','workload':'b'}"))),
              "timeline[1].workload: \"b\" is not a workload");
    CHECK_HAS(fails(J(DOCT("{'name':'a','queue':'team-a'}", "{'at':1,'action':'delete','node':'n1'}"))),
              "timeline[0].node: not a field of a \"delete\" action");
    CHECK_HAS(fails(J(DOCT("{'name':'a','queue':'team-a'}", "{'at':1,'action':'cordon','workload':'a'}"))),
              "timeline[0].workload: not a field of a \"cordon\" action");
    CHECK_HAS(fails(J(DOCT("{'name':'a','queue':'team-a'}", "{'at':1,'action':'submit','workload':'a'},"
                                                           "{'at':2,'action':'submit','workload':'a'}"))),
              "timeline[1].workload: \"a\" is already submitted by timeline[0]");
    CHECK_HAS(fails(J(DOCT("", "{'at':1,'action':'submit','workload':{'name':'x','queue':'team-a'}},"
                               "{'at':2,'action':'submit','workload':'x'}"))),
              "timeline[1].workload: \"x\" is already submitted by timeline[0]");
    CHECK_HAS(fails(J(DOCT("", "{'at':1,'action':'submit','workload':{'name':'x','queue':'team-a','submit_at':3}}"))),
              "timeline[0].workload.submit_at: not allowed in a timeline submit");
    CHECK_HAS(fails(J(DOCT("", "{'at':1,'action':'submit','workload':{'name':'x','queue':'team-a','requests':{'cpu':'1q'}}}"))),
              "timeline[0].workload.requests.cpu: \"1q\" is not a cpu quantity");
    CHECK_HAS(fails(J(DOCT("", "{'at':1,'action':'submit','workload':3}"))),
              "timeline[0].workload: must be a workload name or object, not a number");
    CHECK_HAS(fails(J(DOCT("", "{'at':1,'action':'add_node','node':{'name':'n2','gpu':0.5}}"))),
              "timeline[0].node.gpu: 0.5 is not a whole number of GPUs");
    CHECK_HAS(fails(J(DOCT("", "{'at':1,'action':'add_node','node':'n2'}"))),
              "timeline[0].node: must be an object, not a string");
    CHECK_HAS(fails(J(DOCT("", "{'at':1,'action':'reload_policies'}"))), "timeline[0].dir: required field is missing");
    CHECK_HAS(fails(J(DOCT("", "{'at':1,'action':'reload_policies','dir':'p','node':'n1'}"))),
              "timeline[0].node: not a field of a \"reload_policies\" action");
    /* a workload must be named earlier in the array than its delete */
    CHECK_HAS(fails(J(DOCT("", "{'at':9,'action':'delete','workload':'x'},"
                               "{'at':1,'action':'submit','workload':{'name':'x','queue':'team-a'}}"))),
              "timeline[0].workload: \"x\" is not a workload");
    CHECK_HAS(fails(J("{'timeline':{}}")), "timeline: must be an array, not an object");
    CHECK_HAS(fails(J("{'timeline':[[]]}")), "timeline[0]: must be an object, not an array");
}

TEST(null_reads_as_absent) {
    us_scenario sc;
    if (!loads(&sc, J("{'name':null,'horizon':null,'queues':[{'name':'q','parent':null}],"
                      "'nodes':[{'name':'n','pool':null}],'timeline':null}")))
        return;
    CHECK_STR(sc.name, "");
    CHECK(sc.horizon < 0 && sc.state.queues[0].parent == -1);
    CHECK_STR(sc.state.nodes[0].pool, "default");
    us_scenario_free(&sc);
    CHECK_HAS(fails(J("{'nodes':[{'name':null}]}")), "nodes[0].name: required field is missing");
}

/* ---- documents ------------------------------------------------------------ */

/* DESIGN.md, "Scenario format", verbatim. */
static const char design_example[] =
    "{\n"
    "  \"name\": \"seed story\",\n"
    "  \"cycle_interval\": 10,\n"
    "  \"horizon\": 600,\n"
    "  \"nodes\": [\n"
    "    {\"name\": \"n1\", \"pool\": \"default\", \"cpu\": \"64\", \"memory\": \"512Gi\", \"gpu\": 8,\n"
    "     \"labels\": {\"zone\": \"a\"}, \"unschedulable\": false}\n"
    "  ],\n"
    "  \"queues\": [\n"
    "    {\"name\": \"research\", \"priority\": 0,\n"
    "     \"resources\": {\"gpu\": {\"quota\": 8, \"over_quota_weight\": 1, \"limit\": -1}}},\n"
    "    {\"name\": \"team-a\", \"parent\": \"research\",\n"
    "     \"resources\": {\"gpu\": {\"quota\": 4, \"over_quota_weight\": 2}}},\n"
    "    {\"name\": \"infra-bg\",\n"
    "     \"resources\": {\"gpu\": {\"quota\": 0, \"over_quota_weight\": 0, \"limit\": -1},\n"
    "                   \"cpu\": {\"quota\": 0, \"over_quota_weight\": 0, \"limit\": -1},\n"
    "                   \"memory\": {\"quota\": 0, \"over_quota_weight\": 0, \"limit\": -1}}}\n"
    "  ],\n"
    "  \"workloads\": [\n"
    "    {\"name\": \"train-1\", \"queue\": \"team-a\", \"priority\": \"train\",\n"
    "     \"replicas\": 2, \"min_member\": 2,\n"
    "     \"requests\": {\"gpu\": 4, \"cpu\": \"8\", \"memory\": \"64Gi\"},\n"
    "     \"submit_at\": 30, \"duration\": 300},\n"
    "    {\"name\": \"gpu-burn\", \"queue\": \"infra-bg\",\n"
    "     \"labels\": {\"kai.scheduler/background\": \"true\"},\n"
    "     \"controller\": \"deployment\", \"replicas\": 4,\n"
    "     \"requests\": {\"gpu\": 1}, \"termination_grace\": 5},\n"
    "    {\"name\": \"node-check\", \"queue\": \"infra-bg\",\n"
    "     \"labels\": {\"kai.scheduler/background\": \"true\"},\n"
    "     \"controller\": \"daemonset\", \"requests\": {\"cpu\": \"100m\", \"memory\": \"64Mi\"},\n"
    "     \"termination_grace\": 5},\n"
    "    {\"name\": \"serve-1\", \"queue\": \"team-a\", \"priority\": \"inference\",\n"
    "     \"pods\": [{\"node\": \"n1\", \"state\": \"running\"}], \"requests\": {\"gpu\": 1}}\n"
    "  ],\n"
    "  \"timeline\": [\n"
    "    {\"at\": 120, \"action\": \"remove_node\", \"node\": \"n1\"},\n"
    "    {\"at\": 200, \"action\": \"add_node\", \"node\": {\"name\": \"n9\", \"gpu\": 8}},\n"
    "    {\"at\": 250, \"action\": \"delete\", \"workload\": \"serve-1\"}\n"
    "  ]\n"
    "}\n";

TEST(design_example_loads) {
    us_scenario sc;
    if (!loads(&sc, design_example)) return;
    us_state *st = &sc.state;
    CHECK_STR(sc.name, "seed story");
    CHECK(sc.cycle_interval == 10 && sc.horizon == 600);
    CHECK(st->nnodes == 2 && st->nqueues == 3 && st->nworkloads == 4 && st->npods == 1);
    CHECK(st->nodes[0].cap.v[US_CPU] == 64000);
    CHECK(st->nodes[0].cap.v[US_MEM] == (int64_t)512 << 30);
    CHECK(st->nodes[0].gpus == 8 && !st->nodes[0].removed);
    CHECK_STR(us_labels_get(&st->nodes[0].labels, "zone"), "a");
    CHECK_STR(st->nodes[1].name, "n9");
    CHECK(st->nodes[1].removed && st->nodes[1].gpus == 8);
    CHECK(!st->queues[0].leaf && st->queues[1].leaf && st->queues[1].parent == 0);
    CHECK(st->queues[1].res[US_GPU].quota == 4000 && st->queues[1].res[US_GPU].over_quota_weight == 2);
    CHECK(st->queues[2].res[US_MEM].over_quota_weight == 0);
    const us_workload *w = st->workloads;
    CHECK(w[0].replicas == 2 && w[0].min_member == 2 && w[0].submit_at == 30 && w[0].duration == 300);
    CHECK(w[0].request.v[US_GPU] == 4000 && w[0].request.v[US_CPU] == 8000);
    CHECK(w[0].request.v[US_MEM] == (int64_t)64 << 30);
    CHECK(w[1].background && w[1].blocked == NULL && w[1].min_member == 1 && w[1].termination_grace == 5);
    CHECK(w[2].background && w[2].blocked == NULL && w[2].controller == US_CTRL_DAEMONSET);
    CHECK(w[2].request.v[US_CPU] == 100 && w[2].request.v[US_MEM] == 64 << 20);
    CHECK(w[3].priority == 125 && w[3].preemptibility == US_NON_PREEMPTIBLE && w[3].queue == 1);
    CHECK_STR(st->pods[0].name, "serve-1-0");
    CHECK(st->pods[0].state == US_POD_RUNNING && st->pods[0].node == 0 && st->pods[0].workload == 3);
    CHECK(sc.ntimeline == 3);
    CHECK(sc.timeline[0].action == US_TL_REMOVE_NODE && sc.timeline[0].node == 0 && sc.timeline[0].at == 120);
    CHECK(sc.timeline[1].action == US_TL_ADD_NODE && sc.timeline[1].node == 1);
    CHECK(sc.timeline[2].action == US_TL_DELETE && sc.timeline[2].workload == 3 && sc.timeline[2].node == -1);
    us_scenario_free(&sc);
    CHECK(zeroed(&sc));
}

TEST(timeline_sorted_stably_and_submit_by_object) {
    us_scenario sc;
    if (!loads(&sc, J(DOCT("{'name':'a','queue':'team-a','submit_at':5}",
                           "{'at':50,'action':'cordon','node':'n1'},"
                           "{'at':10,'action':'submit','workload':{'name':'x','queue':'team-a','requests':{'cpu':'2'}}},"
                           "{'at':50,'action':'uncordon','node':'n1'},"
                           "{'at':0,'action':'submit','workload':'a'},"
                           "{'at':40,'action':'complete','workload':'x'},"
                           "{'at':50,'action':'delete','workload':'a'},"
                           "{'at':7.5,'action':'reload_policies','dir':'policies/v2'}"))))
        return;
    CHECK(sc.ntimeline == 7);
    static const us_tl_action order[] = {US_TL_SUBMIT, US_TL_RELOAD_POLICIES, US_TL_SUBMIT, US_TL_COMPLETE,
                                         US_TL_CORDON, US_TL_UNCORDON, US_TL_DELETE};
    static const double at[] = {0, 7.5, 10, 40, 50, 50, 50};
    for (size_t i = 0; i < 7 && i < sc.ntimeline; i++)
        CHECK(sc.timeline[i].action == order[i] && sc.timeline[i].at == at[i]);
    CHECK(sc.state.nworkloads == 2);
    const us_workload *a = &sc.state.workloads[0], *x = &sc.state.workloads[1];
    CHECK(a->submit_at == 0); /* the timeline's time wins over submit_at */
    CHECK_STR(x->name, "x");
    CHECK(x->submit_at == 10 && x->state == US_WL_WAITING && x->request.v[US_CPU] == 2000);
    CHECK(sc.timeline[0].workload == 0 && sc.timeline[2].workload == 1 && sc.timeline[3].workload == 1);
    CHECK_STR(sc.timeline[1].dir, "policies/v2"); /* no origin: as written */
    CHECK(sc.timeline[1].workload == -1 && sc.timeline[1].node == -1);
    us_scenario_free(&sc);
}

TEST(add_node_is_removed_until_added) {
    us_scenario sc;
    if (!loads(&sc, J(DOCT("", "{'at':20,'action':'add_node','node':{'name':'n2','pool':'a100','gpu':4,"
                               " 'cpu':'32','labels':{'zone':'b'},'unschedulable':true}},"
                               "{'at':30,'action':'uncordon','node':'n2'},"
                               "{'at':40,'action':'remove_node','node':'n2'}"))))
        return;
    CHECK(sc.state.nnodes == 2);
    const us_node *n = &sc.state.nodes[1];
    CHECK_STR(n->name, "n2");
    CHECK(n->removed && n->unschedulable && n->gpus == 4 && n->cap.v[US_CPU] == 32000);
    CHECK_STR(n->pool, "a100");
    CHECK(!sc.state.nodes[0].removed);
    CHECK(sc.timeline[0].node == 1 && sc.timeline[1].node == 1 && sc.timeline[2].node == 1);
    us_scenario_free(&sc);
    /* a node added later in the array cannot be named earlier */
    CHECK_HAS(fails(J(DOCT("", "{'at':50,'action':'cordon','node':'n2'},"
                               "{'at':20,'action':'add_node','node':{'name':'n2'}}"))),
              "timeline[0].node: \"n2\" is not a node");
}

TEST(preexisting_pods) {
    us_scenario sc;
    if (!loads(&sc, J("{'nodes':[{'name':'n1','gpu':8,'cpu':'16','labels':{'role':'gpu'}},"
                      "{'name':'n2','gpu':8,'cpu':'16','labels':{'role':'gpu'}},{'name':'n3','pool':'other'}],"
                      QUEUES ",'workloads':["
                      "{'name':'t','queue':'team-a','replicas':3,'requests':{'gpu':2},"
                      " 'pods':[{'node':'n1','state':'running'},{'name':'custom','node':'n2','state':'running'}]},"
                      "{'name':'ds','queue':'bg','controller':'daemonset','labels':{'kai.scheduler/background':'true'},"
                      " 'node_selector':{'role':'gpu'},'requests':{'cpu':'100m'},"
                      " 'pods':[{'node':'n2','state':'running'},{'node':'n1','state':'running'}]}]}")))
        return;
    const us_state *st = &sc.state;
    CHECK(st->npods == 4);
    CHECK_STR(st->pods[0].name, "t-0");
    CHECK(st->pods[0].node == 0 && st->pods[0].pin == -1 && st->pods[0].workload == 0);
    CHECK_STR(st->pods[1].name, "custom");
    CHECK(st->pods[1].node == 1);
    CHECK_STR(st->pods[2].name, "ds-n2");
    CHECK(st->pods[2].node == 1 && st->pods[2].pin == 1 && st->pods[2].workload == 1);
    CHECK_STR(st->pods[3].name, "ds-n1");
    CHECK(st->pods[3].node == 0 && st->pods[3].pin == 0);
    for (size_t i = 0; i < st->npods; i++)
        CHECK(st->pods[i].state == US_POD_RUNNING && st->pods[i].shared_dev == -1 && st->pods[i].seq == i);
    /* the simulator submits them at t=0 and creates only the missing pods */
    CHECK(st->workloads[0].state == US_WL_WAITING && st->workloads[1].state == US_WL_WAITING);
    us_scenario_free(&sc);

    /* releasing and pipelined pods: one releasing holds the room a
     * pipelined one waits for; the releasing one is not a replica */
    if (!loads(&sc, J("{'nodes':[{'name':'n1','gpu':8}]," QUEUES ",'workloads':["
                      "{'name':'old','queue':'team-a','replicas':1,'requests':{'gpu':8},'termination_grace':20,"
                      " 'pods':[{'node':'n1','state':'releasing','release_at':15}]},"
                      "{'name':'new','queue':'team-a','requests':{'gpu':8},'created_at':-30,"
                      " 'pods':[{'node':'n1','state':'pipelined'}]},"
                      "{'name':'plain','queue':'team-a','termination_grace':7,"
                      " 'pods':[{'node':'n1','state':'releasing'}]}]}")))
        return;
    st = &sc.state;
    CHECK(st->npods == 3);
    CHECK(st->pods[0].state == US_POD_RELEASING && st->pods[0].release_at == 15);
    CHECK_STR(st->pods[0].name, "old-0");
    CHECK(st->pods[1].state == US_POD_PIPELINED && st->pods[1].node == 0);
    CHECK(st->pods[2].state == US_POD_RELEASING && st->pods[2].release_at == 7);  /* its grace */
    CHECK(st->workloads[1].created_at == -30);
    CHECK(isnan(st->workloads[0].created_at));  /* its submit time, once submitted */
    us_scenario_free(&sc);
}

/* Pending pods pinned to a node (pinned_pending): loaded pending, on no
 * node, with their pins and names, among the replicas; each refusal names
 * its path. */
TEST(pinned_pending_pods) {
    us_scenario sc;
    if (!loads(&sc, J("{'nodes':[{'name':'n1','gpu':8},{'name':'n2','gpu':8}]," QUEUES ",'workloads':["
                      "{'name':'t','queue':'team-a','replicas':3,'requests':{'gpu':2},"
                      " 'pods':[{'node':'n1','state':'running','pin':'n1'},"
                      "         {'name':'t-x','node':'n2','state':'releasing'}],"
                      " 'pinned_pending':[{'name':'t-x','pin':'n2'},{'name':'t-y','pin':'n1'}]}]}")))
        return;
    const us_state *st = &sc.state;
    CHECK(st->npods == 4);
    /* the releasing t-x is the former incarnation of the pending one */
    CHECK_STR(st->pods[2].name, "t-x");
    CHECK(st->pods[2].state == US_POD_PENDING && st->pods[2].node == -1 && st->pods[2].pin == 1);
    CHECK_STR(st->pods[3].name, "t-y");
    CHECK(st->pods[3].state == US_POD_PENDING && st->pods[3].node == -1 && st->pods[3].pin == 0);
    us_scenario_free(&sc);

#define PP(extra, pending) "{'name':'a','queue':'team-a','replicas':1" extra ",'pinned_pending':[" pending "]}"
    CHECK_HAS(fails(J(DOC(PP("", "{'name':'a-0','pin':'n7'}")))),
              "workloads[0].pinned_pending[0].pin: \"n7\" is not a node");
    CHECK_HAS(fails(J(DOC(PP("", "{'name':'a-0'}")))), "workloads[0].pinned_pending[0].pin: required field is missing");
    CHECK_HAS(fails(J(DOC(PP("", "{'pin':'n1'}")))), "workloads[0].pinned_pending[0].name: required field is missing");
    CHECK_HAS(fails(J(DOC(PP("", "{'name':'a-0','pin':'n1','node':'n1'}")))),
              "workloads[0].pinned_pending[0].node: unknown field (did you mean \"name\"?)");
    CHECK_HAS(fails(J(DOC(PP("", "'n1'")))), "workloads[0].pinned_pending[0]: must be an object");
    CHECK_HAS(fails(J(DOC(PP("", "{'name':'a-0','pin':'n1'},{'name':'a-1','pin':'n1'}")))),
              "workloads[0].pinned_pending: 0 pre-existing pods that are not releasing and 2 pinned pending "
              "pods, but only 1 replicas");
    CHECK_HAS(fails(J(DOC(PP(",'pods':[{'node':'n1','state':'running'}]", "{'name':'a-0','pin':'n1'}")))),
              "workloads[0].pinned_pending: 1 pre-existing pods that are not releasing and 1 pinned pending "
              "pods, but only 1 replicas");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'team-a','replicas':2,'pods':[{'node':'n1','state':'running'}],"
                          "'pinned_pending':[{'name':'a-0','pin':'n1'}]}"))),
              "workloads[0].pinned_pending[0].name: \"a-0\" is a duplicate pod name");
    CHECK_HAS(fails(J(DOC(PP(",'pool':'a100'", "{'name':'a-0','pin':'n1'}")))),
              "workloads[0].pinned_pending[0].pin: \"n1\" is in pool \"default\", not the workload's pool \"a100\"");
    CHECK_HAS(fails(J(DOC(PP(",'submit_at':30", "{'name':'a-0','pin':'n1'}")))),
              "workloads[0].pinned_pending: a workload with pending pods must be submitted at 0, not 30");
    CHECK_HAS(fails(J(DOC("{'name':'a','queue':'bg','controller':'daemonset','pinned_pending':[{'name':'a-0','pin':'n1'}]}"))),
              "workloads[0].pinned_pending: a daemonset's pods are pinned by their node, not listed here");
    CHECK_HAS(fails(J(DOCT(PP("", "{'name':'a-0','pin':'n1'}"), "{'at':30,'action':'submit','workload':'a'}"))),
              "timeline[0].workload: \"a\" has pre-existing pods, so it cannot be submitted at 30");
    CHECK_HAS(fails(J("{" NODE1 "," QUEUES ",'workloads':[" PP("", "{'name':'a-0','pin':'n9'}") "],"
                      "'timeline':[{'at':0,'action':'add_node','node':{'name':'n9'}}]}")),
              "workloads[0].pinned_pending[0].pin: \"n9\" is not a node");
#undef PP
    /* the API takes a workload's spec: its pods belong to a whole scenario */
    us_workload w;
    us_err err = {0};
    cJSON *o = cJSON_Parse(J("{'name':'a','queue':'team-a','pinned_pending':[{'name':'a-0','pin':'n1'}]}"));
    CHECK(o != NULL);
    if (!loads(&sc, J(DOC("{'name':'b','queue':'team-a'}")))) {
        cJSON_Delete(o);
        return;
    }
    CHECK(us_scenario_parse_workload(o, &sc.state, "workload", &w, &err) < 0);
    CHECK_HAS(err.msg, "workload.pinned_pending: pending pods belong to a whole scenario");
    cJSON_Delete(o);
    us_scenario_free(&sc);
}

TEST(reload_dir_resolved_against_origin) {
    us_scenario sc;
    us_err err;
    const char *doc = "{\"timeline\":[{\"at\":1,\"action\":\"reload_policies\",\"dir\":\"pol\"},"
                      "{\"at\":2,\"action\":\"reload_policies\",\"dir\":\"/abs/pol\"}]}";
    CHECK(us_scenario_load_string(&sc, doc, strlen(doc), "examples/sub/s.json", &err) == 0);
    CHECK_STR(sc.timeline[0].dir, "examples/sub/pol");
    CHECK_STR(sc.timeline[1].dir, "/abs/pol");
    us_scenario_free(&sc);
    CHECK(us_scenario_load_string(&sc, doc, strlen(doc), "s.json", &err) == 0);
    CHECK_STR(sc.timeline[0].dir, "pol");
    us_scenario_free(&sc);
}

/* Callers prefix the file name (main.c, the Lua module): the loader must not,
 * or it would appear twice. */
TEST(messages_start_with_the_path_whatever_the_origin) {
    us_scenario sc;
    us_err err;
    const char *doc = "{\"nodes\":[{\"name\":\"n1\",\"cpu\":\"12x\"}]}";
    CHECK(us_scenario_load_string(&sc, doc, strlen(doc), "seed.json", &err) == -1);
    CHECK_STR(err.msg, "nodes[0].cpu: \"12x\" is not a cpu quantity");
    CHECK(us_scenario_load_string(&sc, "{", 1, "seed.json", &err) == -1);
    CHECK_STR(err.msg, "invalid JSON at line 1, column 2"); /* at the end */
}

TEST(load_file) {
    us_scenario sc;
    us_err err;
    char dir[] = "/tmp/us_scenario_XXXXXX", path[256];
    memset(&sc, 0xAB, sizeof sc);
    CHECK(us_scenario_load_file(&sc, "/nonexistent/dir/s.json", &err) == -1);
    CHECK(err.code == US_EIO && zeroed(&sc));
    CHECK_HAS(err.msg, "/nonexistent/dir/s.json");
    CHECK_HAS(err.msg, "No such file or directory");
    {
        char odd[400] = "/nonexistent/"; /* long, with control characters */
        for (size_t i = strlen(odd); i < sizeof odd - 1; i++) odd[i] = (char)(1 + i % 31);
        odd[sizeof odd - 1] = '\0';
        CHECK(us_scenario_load_file(&sc, odd, &err) == -1 && err.code == US_EIO);
        CHECK_HAS(err.msg, "\"/nonexistent/\\u00");
    }
    memset(&sc, 0xAB, sizeof sc);
    CHECK(us_scenario_load_file(&sc, "/tmp", &err) == -1); /* a directory */
    CHECK(err.code == US_EIO && zeroed(&sc));
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp");
        return;
    }
    snprintf(path, sizeof path, "%s/s.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(design_example, f);
    fputs("{\"at\": 1}", f); /* trailing garbage: whole file is parsed */
    fclose(f);
    CHECK(us_scenario_load_file(&sc, path, &err) == -1);
    CHECK(err.code == US_EINVAL && zeroed(&sc));
    {
        char want[64];
        int lines = 1;
        for (const char *c = design_example; *c; c++) lines += *c == '\n';
        snprintf(want, sizeof want, "invalid JSON at line %d, column 1", lines);
        CHECK_HAS(err.msg, want);
    }
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("{\"name\":\"from file\",\"timeline\":[{\"at\":1,\"action\":\"reload_policies\",\"dir\":\"p\"}]}", f);
    fclose(f);
    CHECK(us_scenario_load_file(&sc, path, &err) == 0);
    CHECK_STR(sc.name, "from file");
    char want[300];
    snprintf(want, sizeof want, "%s/p", dir);
    if (sc.ntimeline == 1) CHECK_STR(sc.timeline[0].dir, want);
    us_scenario_free(&sc);
    unlink(path);
    rmdir(dir);
}

/* ---- fuzz ------------------------------------------------------------------- */

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint64_t rnd(void) { /* xorshift64: deterministic runs */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Everything a loaded scenario links to is in range. */
static bool consistent(const us_scenario *sc) {
    const us_state *st = &sc->state;
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        if (p->workload < 0 || (size_t)p->workload >= st->nworkloads) return false;
        if (p->node < 0 || (size_t)p->node >= st->nnodes || p->state != US_POD_RUNNING) return false;
    }
    for (size_t i = 0; i < st->nworkloads; i++) {
        const us_workload *w = &st->workloads[i];
        if (w->queue < 0 || (size_t)w->queue >= st->nqueues || !st->queues[w->queue].leaf) return false;
        if (w->min_member < 1 || w->replicas < 1) return false;
    }
    for (size_t i = 0; i < st->nnodes; i++)
        if (st->nodes[i].gpus < 0 || st->nodes[i].gpus > US_MAX_GPUS) return false;
    for (size_t i = 0; i < sc->ntimeline; i++) {
        const us_tl_entry *e = &sc->timeline[i];
        if (i && e->at < sc->timeline[i - 1].at) return false;
        if (e->workload >= (int)st->nworkloads || e->node >= (int)st->nnodes) return false;
    }
    return true;
}

TEST(fuzz_mutations_load_or_fail_cleanly) {
    static const char *const tokens[] = {
        "-1", "0", "1e999", "-1e999", "0.5", "1.5", "1e-9", "\"\"", "\"8Ei\"", "\"0.5m\"", "[]", "{}",
        "null", "true", "\"n1\"", "\"team-a\"", "\"research\"", "\"daemonset\"", "\"submit\"",
        "\"add_node\"", "{\"name\":\"n1\"}", "99999999999999999999", "\"\\u0000\"", "\"-1\"", "64", "65",
        "\"x\"", "[{\"node\":\"n1\",\"state\":\"running\"}]", "\"running\"", "\"serve-1\"", "1000000"};
    static char base[sizeof design_example + 600];
    static char buf[sizeof base * 3];
    size_t blen, n;
    int nok = 0, nfail = 0, bad = 0;
    /* the example plus a few more features, for the mutations to reach */
    strcpy(base, design_example);
    blen = strlen(base);
    blen -= 6; /* cut "  ]\n}\n": reopen the timeline array */
    base[blen] = '\0';
    strcat(base, ",\n    {\"at\": 5, \"action\": \"submit\", \"workload\": {\"name\": \"late\", \"queue\": \"team-a\","
                 " \"requests\": {\"cpu\": \"1.5\", \"memory\": \"1Gi\"}, \"pods\": []}},\n"
                 "    {\"at\": 7, \"action\": \"reload_policies\", \"dir\": \"p\"},\n"
                 "    {\"at\": 8, \"action\": \"cordon\", \"node\": \"n9\"}\n  ]\n}\n");
    blen = strlen(base);
    {
        us_scenario sc;
        CHECK(loads(&sc, base)); /* the seed itself is valid */
        us_scenario_free(&sc);
    }
    for (int it = 0; it < 4000; it++) {
        int muts = 1 + (int)(rnd() % 3);
        memcpy(buf, base, blen);
        n = blen;
        for (int m = 0; m < muts && n > 0; m++) {
            size_t pos = rnd() % n, span = 1 + rnd() % 12;
            if (span > n - pos) span = n - pos;
            switch (rnd() % 10) { /* mostly value swaps: they get past the parser */
            case 0: /* a random byte, any value (NUL included) */
                buf[pos] = (char)(rnd() & 0xff);
                break;
            case 1: /* delete a span */
                memmove(buf + pos, buf + pos + span, n - pos - span);
                n -= span;
                break;
            case 2: /* truncate */
                n = pos;
                break;
            case 3: { /* copy a span elsewhere */
                size_t to = rnd() % n;
                char tmp[16];
                if (n + span >= sizeof buf) break;
                memcpy(tmp, buf + pos, span);
                memmove(buf + to + span, buf + to, n - to);
                memcpy(buf + to, tmp, span);
                n += span;
                break;
            }
            default: { /* replace a scalar value (after ':' or '[') with a token */
                const char *tok = tokens[rnd() % (sizeof tokens / sizeof tokens[0])];
                size_t tl = strlen(tok), at = pos, end;
                for (; at < n; at++) {
                    if (buf[at] != ':' && buf[at] != '[') continue;
                    while (at + 1 < n && buf[at + 1] == ' ') at++;
                    if (at + 1 < n && buf[at + 1] != '{' && buf[at + 1] != '[') break;
                }
                if (at >= n - 1) break;
                end = ++at;
                if (buf[end] == '"') { /* a string, to its closing quote */
                    for (end++; end < n && buf[end] != '"'; end++)
                        if (buf[end] == '\\') end++;
                    if (end < n) end++;
                } else {
                    while (end < n && buf[end] != ',' && buf[end] != '}' && buf[end] != ']') end++;
                }
                if (end > n) end = n;
                if (n - (end - at) + tl >= sizeof buf) break;
                memmove(buf + at + tl, buf + end, n - end);
                memcpy(buf + at, tok, tl);
                n = n - (end - at) + tl;
                break;
            }
            }
        }
        us_scenario sc;
        us_err err;
        memset(&sc, 0xAB, sizeof sc);
        memset(&err, 0, sizeof err);
        if (us_scenario_load_string(&sc, buf, n, "fuzz/s.json", &err) == 0) {
            nok++;
            if (!consistent(&sc)) bad++;
            us_scenario_free(&sc);
        } else {
            nfail++;
            if (err.code != US_EINVAL || !err.msg[0] || !zeroed(&sc)) bad++;
        }
    }
    printf("     fuzz: %d loaded, %d rejected\n", nok, nfail);
    CHECK(bad == 0);
    /* both outcomes are exercised, or the test proves little */
    CHECK(nok > 50 && nfail > 1000);
}

TEST(free_zeroes_and_is_idempotent) {
    us_scenario sc;
    if (!loads(&sc, design_example)) return;
    us_scenario_free(&sc);
    CHECK(zeroed(&sc));
    us_scenario_free(&sc); /* freeing an empty scenario is harmless */
    CHECK(zeroed(&sc));
}

/* Pre-existing fractional-GPU pods share devices as the engine counts them:
 * fractions of one device sum to at most one, and each pod knows its device. */
TEST(preexisting_fractional_pods_take_devices) {
    us_scenario sc;
    const char *two = J("{'nodes':[{'name':'n1','gpu':2}],'queues':[{'name':'q'}],"
                        "'workloads':[{'name':'f','queue':'q','controller':'deployment','replicas':3,"
                        "'requests':{'gpu':0.5},'pods':[{'node':'n1','state':'running'},"
                        "{'node':'n1','state':'running'},{'node':'n1','state':'running'}]}]}");
    if (loads(&sc, two)) {
        /* two halves share the first device, the third opens the second */
        CHECK(sc.state.pods[0].shared_dev == sc.state.pods[1].shared_dev);
        CHECK(sc.state.pods[0].shared_dev >= 0);
        CHECK(sc.state.pods[2].shared_dev >= 0);
        CHECK(sc.state.pods[2].shared_dev != sc.state.pods[0].shared_dev);
        us_scenario_free(&sc);
    }
    /* three 0.6 pods need three devices: 1.8 GPUs on a 2-GPU node is not enough */
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','gpu':2}],'queues':[{'name':'q'}],"
                      "'workloads':[{'name':'f','queue':'q','controller':'deployment','replicas':3,"
                      "'requests':{'gpu':0.6},'pods':[{'node':'n1','state':'running'},"
                      "{'node':'n1','state':'running'},{'node':'n1','state':'running'}]}]}")),
              "workloads[0].pods[2].node: \"n1\" has no GPU device left for this pod");
    /* devices run out before the sum does: 0.6 + 0.6 hold two of four
     * devices, a 2-GPU pod the other two; 3.7 of 4 GPUs would fit a 0.5 pod,
     * but no device has half of it free */
    CHECK_HAS(fails(J("{'nodes':[{'name':'n1','gpu':4}],'queues':[{'name':'q'}],"
                      "'workloads':[{'name':'f','queue':'q','controller':'deployment','replicas':2,"
                      "'requests':{'gpu':0.6},'pods':[{'node':'n1','state':'running'},"
                      "{'node':'n1','state':'running'}]},"
                      "{'name':'g','queue':'q','requests':{'gpu':2},"
                      "'pods':[{'node':'n1','state':'running'}]},"
                      "{'name':'h','queue':'q','requests':{'gpu':0.5},"
                      "'pods':[{'node':'n1','state':'running'}]}]}")),
              "workloads[2].pods[0].node: \"n1\" has no GPU device left for this pod");
}

int main(void) {
    RUN(preexisting_fractional_pods_take_devices);
    RUN(cpu_quantities_valid);
    RUN(cpu_quantities_invalid);
    RUN(memory_quantities_valid);
    RUN(memory_quantities_invalid);
    RUN(quantities_in_documents);
    RUN(node_gpu_bounds);
    RUN(gpu_requests);
    RUN(defaults_applied);
    RUN(defaults_min_member_by_controller);
    RUN(queue_pool_overrides);
    RUN(priority_classes_and_default_preemptibility);
    RUN(preemptibility_field_and_label);
    RUN(background_label);
    RUN(error_json_syntax_with_line_and_column);
    RUN(error_top_level_must_be_object);
    RUN(error_wrong_types);
    RUN(error_missing_required_fields);
    RUN(error_unknown_fields);
    RUN(error_duplicate_names);
    RUN(error_queue_parents);
    RUN(error_workload_queue);
    RUN(error_numbers_out_of_range);
    RUN(error_preexisting_pods);
    RUN(error_timeline);
    RUN(null_reads_as_absent);
    RUN(design_example_loads);
    RUN(timeline_sorted_stably_and_submit_by_object);
    RUN(add_node_is_removed_until_added);
    RUN(preexisting_pods);
    RUN(pinned_pending_pods);
    RUN(reload_dir_resolved_against_origin);
    RUN(messages_start_with_the_path_whatever_the_origin);
    RUN(load_file);
    RUN(fuzz_mutations_load_or_fail_cleanly);
    RUN(free_zeroes_and_is_idempotent);
    return check_report();
}
