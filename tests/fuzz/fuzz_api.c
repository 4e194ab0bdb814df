/*
 * fuzz_api.c — libFuzzer target: call sequences of the embedding API
 * (bindings/understory.h), decoded from the input (make fuzz;
 * docs/testing.md).
 *
 * Each input is a list of operations on one engine with the invariant
 * checker on: nodes, queues, workloads and pods upserted (as specs and as
 * JSON, some JSON taken raw from the input), removed, completed; cycles run
 * at growing times; an event callback that reads everything and tries to
 * change the engine (which must be refused) or removes itself.  No sequence
 * may crash, leak or break an invariant (abort); every call returns a code.
 * At the end the state, written as a scenario (us_engine_state_json), must
 * load back and write the same document again (abort otherwise).
 *
 * Policies: the built-in C ones, until an operation reloads a Lua
 * placement policy (the default one, one that draws from math.random, one
 * that logs on some nodes) or goes back to the built-in ones, so that
 * placement scores kept from cycle to cycle (engine/nodeclass.h) meet
 * every change the API makes between cycles.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "jsonw.h"
#include "policy.h"
#include "policysrc.h"
#include "scenario.h"
#include "statejson.h"
#include "understory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct input {
    const uint8_t *d;
    size_t n, at;
} input;

static unsigned next(input *in) { return in->at < in->n ? in->d[in->at++] : 0; }

static const us_label bg_label[] = {{"kai.scheduler/background", "true"}};
static const us_label zone_a[] = {{"zone", "a"}};

/* The placement policies an input may reload: the default one (pure: its
 * scores are kept), one that draws, one that logs on some nodes (neither
 * kept). */
static const char *placement_src(int i, size_t *len) {
    static const char *const draws =
        "return { score = function(pod, node) return math.random(4) + node.free.gpu end }\n";
    static const char *const logs =
        "return { score = function(pod, node)\n"
        "  if node.free.gpu > 4 then log('roomy', node.free.gpu) end\n"
        "  return node.free.gpu\n"
        "end }\n";
    if (i == 0) return us_policysrc_default(US_POLICY_SCORE, len);
    *len = strlen(i == 1 ? draws : logs);
    return i == 1 ? draws : logs;
}

/* Reload placement policy i from a directory holding only placement.lua
 * (the other files are the defaults), removed at once: the engine reads
 * the files whole when it loads them. */
static int reload_placement(us_engine *e, int i, us_error *err) {
    char dir[] = "/tmp/understory-fuzz-XXXXXX", path[64];
    size_t len;
    const char *src = placement_src(i, &len);
    if (!mkdtemp(dir)) abort();
    snprintf(path, sizeof path, "%s/placement.lua", dir);
    FILE *f = fopen(path, "w");
    if (!f || fwrite(src, 1, len, f) != len || fclose(f) != 0) abort();
    int rc = us_engine_reload_policies(e, dir, err);
    unlink(path);
    rmdir(dir);
    return rc;
}

/* The callback reads everything, and every change it tries is refused. */
static void on_event(us_engine *e, const us_event_info *ev, void *data) {
    us_error err;
    us_pod_info p;
    us_node_info n;
    us_queue_info q;
    us_workload_info w;
    us_decision_info d;
    int *mode = data;
    if (!ev->reason || !ev->message) abort();
    for (size_t i = 0; i < us_engine_pod_count(e); i++) us_engine_pod(e, i, &p);
    for (size_t i = 0; i < us_engine_node_count(e); i++) us_engine_node(e, i, &n);
    for (size_t i = 0; i < us_engine_queue_count(e); i++) us_engine_queue(e, i, &q);
    for (size_t i = 0; i < us_engine_workload_count(e); i++) us_engine_workload(e, i, &w);
    for (size_t i = 0; i < us_engine_decision_count(e); i++) us_engine_decision(e, i, &d);
    if (us_engine_run_cycle(e, 1e9, &err) != US_EBUSY || us_engine_remove_node(e, "n0", &err) != US_EBUSY)
        abort();
    if (*mode == 2) us_engine_on_event(e, NULL, NULL);
}

/* The state as a scenario loads back, and writes the same document. */
static void state_round_trips(const us_engine *e) {
    char *a = NULL, *b = NULL;
    us_error err;
    us_err lerr = {0};
    us_scenario sc;
    cJSON *doc = NULL;
    memset(&sc, 0, sizeof sc);
    if (us_engine_state_json(e, &a, NULL, &err) != US_OK) {
        if (err.code == US_ENOMEM) return;
        abort();
    }
    if (us_scenario_load_string(&sc, a, strlen(a), NULL, &lerr) < 0) {
        fprintf(stderr, "the state does not load back: %s\n%s\n", lerr.msg, a);
        abort();
    }
    /* printed as the engine prints it (us_jw_print: cJSON_Print's text, its
     * numbers without a printf each; fuzz_json holds it to cJSON_Print) */
    if (us_statejson_write(&sc.state, 0, "engine state", &doc) == 0) b = us_jw_print(doc);
    if (b && strcmp(a, b) != 0) {
        fprintf(stderr, "the state loaded back writes differently:\n%s\n---\n%s\n", a, b);
        abort();
    }
    cJSON_Delete(doc);
    free(b);
    us_scenario_free(&sc);
    us_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    input in = {data, size, 0};
    us_engine_options o;
    us_engine *e = NULL;
    us_error err;
    double now = 0;
    int mode = 0;
    char name[32], other[32], json[512];

    us_engine_options_init(&o);
    o.check_invariants = 1;
    if (us_engine_create(&o, &e, &err) != US_OK) abort();
    for (int ops = 0; in.at < in.n && ops < 64; ops++) {
        unsigned op = next(&in) % 12, k = next(&in), v = next(&in);
        int rc = US_OK;
        switch (op) {
        case 0: {
            us_node_spec s = {0};
            snprintf(name, sizeof name, "n%u", k % 4);
            s.name = name;
            s.capacity = (us_resources){(double)(v % 9), (v & 16) ? 0 : 64000, (v & 32) ? 0 : 1LL << 38};
            s.unschedulable = (v & 64) != 0;
            if (v & 128) {
                s.labels = zone_a;
                s.nlabels = 1;
            }
            rc = us_engine_upsert_node(e, &s, &err);
            break;
        }
        case 1:
            snprintf(name, sizeof name, "n%u", k % 4);
            rc = us_engine_remove_node(e, name, &err);
            break;
        case 2: {
            us_queue_spec s;
            us_queue_spec_init(&s);
            snprintf(name, sizeof name, "q%u", k % 4);
            snprintf(other, sizeof other, "q%u", v % 4);
            s.name = name;
            s.parent = (v & 4) ? other : NULL;
            s.quota.gpu = (double)(v % 5);
            if (v & 8) s.limit.gpu = (double)(v % 7);
            if (v & 16) s.over_quota_weight = (us_weights){0, 0, 0};
            if (v & 32) s.quota = (us_resources){0, 0, 0};
            rc = us_engine_upsert_queue(e, &s, &err);
            break;
        }
        case 3:
            snprintf(name, sizeof name, "q%u", k % 4);
            rc = us_engine_remove_queue(e, name, &err);
            break;
        case 4: {
            us_workload_spec s;
            us_workload_spec_init(&s);
            snprintf(name, sizeof name, "w%u", k % 6);
            snprintf(other, sizeof other, "q%u", v % 4);
            s.name = name;
            s.queue = other;
            s.replicas = (int)(next(&in) % 6);
            s.min_member = (int)(next(&in) % 4);
            s.requests = (us_resources){(double)(v % 3) + ((v & 8) ? 0.5 : 0), 100 * (v % 5),
                                        (int64_t)(v % 4) << 28};
            s.controller = (us_controller_kind)(k / 6 % 4);
            s.termination_grace = (double)(k % 3) * 5;
            s.priority = (k & 64) ? 50 : 100;
            if (v & 64) {
                s.labels = bg_label;
                s.nlabels = 1;
            }
            if (v & 128) {
                s.node_selector = zone_a;
                s.nnode_selector = 1;
            }
            rc = us_engine_upsert_workload(e, &s, now, &err);
            break;
        }
        case 5:
        case 6:
            snprintf(name, sizeof name, "w%u", k % 6);
            rc = op == 5 ? us_engine_remove_workload(e, name, now, &err)
                         : us_engine_complete_workload(e, name, now, &err);
            break;
        case 7: {
            us_pod_spec s = {0};
            char pin[16], wl[16];
            snprintf(name, sizeof name, "w%u-%u", k % 6, v % 4);
            snprintf(other, sizeof other, "n%u", v % 4);
            snprintf(pin, sizeof pin, "n%u", (v >> 4) % 4);
            snprintf(wl, sizeof wl, "w%u", k % 6);
            s.name = name;
            s.node = (v & 8) ? other : NULL;
            /* pinned (a DaemonSet's node affinity), or being deleted by
             * someone else; an unknown pod names its workload */
            s.pin = (v & 64) ? pin : NULL;
            s.terminating = (v & 128) != 0;
            s.workload = (v & 32) ? wl : NULL;
            rc = us_engine_upsert_pod(e, &s, &err);
            break;
        }
        case 8:
            snprintf(name, sizeof name, "w%u-%u", k % 6, v % 4);
            rc = us_engine_remove_pod(e, name, &err);
            break;
        case 9:
            now += (double)(v % 20);
            rc = us_engine_run_cycle(e, now, &err);
            if (rc == US_EINVARIANT) {
                fprintf(stderr, "invariant: %s\n", err.message);
                abort();
            }
            break;
        case 10: {
            /* raw JSON from the input, to one of the JSON entry points */
            size_t len = v % 64;
            if (len > in.n - in.at) len = in.n - in.at;
            memcpy(json, in.d + in.at, len);
            json[len] = '\0';
            in.at += len;
            switch (k % 4) {
            case 0: rc = us_engine_upsert_node_json(e, json, &err); break;
            case 1: rc = us_engine_upsert_queue_json(e, json, &err); break;
            case 2: rc = us_engine_upsert_workload_json(e, json, now, &err); break;
            default: rc = us_engine_upsert_pod_json(e, json, &err); break;
            }
            break;
        }
        default:
            if (k % 4 == 3) {  /* another placement policy, or the built-in one */
                if (v % 4 == 3) rc = us_engine_load_policies(e, NULL, &err);
                else rc = reload_placement(e, (int)(v % 4), &err);
                break;
            }
            mode = (int)(v % 3);
            us_engine_on_event(e, mode ? on_event : NULL, &mode);
            break;
        }
#ifdef FUZZ_TRACE /* to read a finding: cc -DFUZZ_TRACE, see docs/testing.md */
        fprintf(stderr, "op %u k %u v %u now %g -> %d %s\n", op, k, v, now, rc,
                rc == US_OK ? "" : err.message);
#endif
        if (rc != US_OK && !err.message[0]) abort(); /* a refusal always says why */
    }
    state_round_trips(e);
    us_engine_destroy(e);
    return 0;
}
