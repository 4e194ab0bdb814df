/*
 * test_statejson.c — us_engine_state_json, the engine's state as a
 * scenario document (what `understory serve` shows on /debug/state):
 *
 *   round trip  every example scenario is fed to an engine through the
 *               public API and run a few cycles (pods bound, pipelined,
 *               evicted and releasing); its state, written, loads back as
 *               a scenario whose state writes identically, byte for byte;
 *   content     what is written is what the engine holds: its running,
 *               pipelined and releasing pods by name and node, replicas
 *               standing for the pending ones, times relative to now;
 *   the new accessors: GPU use, pending reasons, cycle phases.
 *
 * Random scenarios get the same round trip at every cycle in
 * test_random.c.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "check.h"
#include "readfile.h"
#include "scenario.h"
#include "statejson.h"
#include "understory.h"

/* The scenario document at path fed to a new engine: nodes, queues,
 * workloads (without the simulator's fields), pre-existing running pods.
 * NULL when something is refused (printed). */
static us_engine *feed(const char *path) {
    char *text = NULL, why[256];
    size_t len;
    us_engine *e = NULL;
    us_error err;
    cJSON *doc = NULL, *o;
    if (us_read_regular(path, 1 << 26, &text, &len, why, sizeof why) < 0 || !(doc = cJSON_Parse(text))) {
        fprintf(stderr, "  %s: %s\n", path, why);
        goto fail;
    }
    if (us_engine_create(NULL, &e, &err) != US_OK) goto refused;
    static const char *const kinds[] = {"nodes", "queues", "workloads"};
    for (int k = 0; k < 3; k++) {
        cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(doc, kinds[k])) {
            cJSON *c = cJSON_Duplicate(o, 1);
            cJSON_DeleteItemFromObject(c, "pods");
            cJSON_DeleteItemFromObject(c, "submit_at");
            cJSON_DeleteItemFromObject(c, "duration");
            char *s = cJSON_PrintUnformatted(c);
            cJSON_Delete(c);
            int rc = k == 0 ? us_engine_upsert_node_json(e, s, &err)
                     : k == 1 ? us_engine_upsert_queue_json(e, s, &err)
                              : us_engine_upsert_workload_json(e, s, 0, &err);
            free(s);
            if (rc != US_OK) goto refused;
            if (k < 2) continue;
            const char *wl = cJSON_GetObjectItemCaseSensitive(o, "name")->valuestring;
            int i = 0;
            cJSON *p;
            cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(o, "pods")) {
                const cJSON *st = cJSON_GetObjectItemCaseSensitive(p, "state");
                const cJSON *nm = cJSON_GetObjectItemCaseSensitive(p, "name");
                char name[300];
                if (!cJSON_IsString(st) || strcmp(st->valuestring, "running") != 0) continue;
                snprintf(name, sizeof name, "%s", cJSON_IsString(nm) ? nm->valuestring : "");
                if (!cJSON_IsString(nm)) snprintf(name, sizeof name, "%s-%d", wl, i);
                us_pod_spec ps = {.name = name, .workload = wl, .node = cJSON_GetObjectItemCaseSensitive(p, "node")->valuestring};
                if (us_engine_upsert_pod(e, &ps, &err) != US_OK) goto refused;
                i++;
            }
        }
    }
    cJSON_Delete(doc);
    free(text);
    return e;
refused:
    fprintf(stderr, "  %s: %s\n", path, err.message);
fail:
    us_engine_destroy(e);
    cJSON_Delete(doc);
    free(text);
    return NULL;
}

/* text loaded as a scenario and written again at its t=0; NULL (printed)
 * when it does not load. */
static char *reload(const char *text) {
    us_scenario sc;
    us_err err = {0};
    cJSON *doc = NULL;
    char *out = NULL;
    memset(&sc, 0, sizeof sc);
    if (us_scenario_load_string(&sc, text, strlen(text), NULL, &err) < 0) {
        fprintf(stderr, "  the state does not load back: %s\n", err.msg);
        return NULL;
    }
    if (us_statejson_write(&sc.state, 0, "engine state", &doc) == 0) out = cJSON_Print(doc);
    cJSON_Delete(doc);
    us_scenario_free(&sc);
    return out;
}

static int n_pods_written, n_releasing_written, n_pipelined_written;

/* e's state loads back and writes identically; its pods are the engine's. */
static bool round_trip(const char *what, us_engine *e) {
    char *a = NULL, *b = NULL;
    size_t len = 0;
    us_error err;
    bool ok = us_engine_state_json(e, &a, &len, &err) == US_OK && a && strlen(a) == len;
    if (!ok) fprintf(stderr, "  %s: state_json failed: %s\n", what, err.message);
    if (ok && !(b = reload(a))) ok = false;
    if (ok && strcmp(a, b) != 0) {
        fprintf(stderr, "  %s: the state written, loaded back, writes differently:\n--- first\n%s\n--- second\n%s\n",
                what, a, b);
        ok = false;
    }
    /* every running, pipelined and releasing pod is written, by name, on
     * its node; no pending pod is */
    cJSON *doc = ok ? cJSON_Parse(a) : NULL, *w, *p;
    size_t written = 0;
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(doc, "workloads"))
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(w, "pods")) {
        written++;
        const char *st = cJSON_GetObjectItemCaseSensitive(p, "state")->valuestring;
        n_releasing_written += !strcmp(st, "releasing");
        n_pipelined_written += !strcmp(st, "pipelined");
    }
    size_t placed = 0;
    for (size_t i = 0; ok && i < us_engine_pod_count(e); i++) {
        us_pod_info pi;
        us_engine_pod(e, i, &pi);
        if (pi.phase == US_PHASE_PENDING) continue;
        placed++;
        bool found = false;
        cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(doc, "workloads"))
            cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(w, "pods"))
                found = found || (!strcmp(cJSON_GetObjectItemCaseSensitive(p, "name")->valuestring, pi.name) &&
                                  !strcmp(cJSON_GetObjectItemCaseSensitive(p, "node")->valuestring, pi.node) &&
                                  !strcmp(cJSON_GetObjectItemCaseSensitive(p, "state")->valuestring, pi.phase_name));
        if (!found) {
            fprintf(stderr, "  %s: pod %s (%s on %s) not written\n", what, pi.name, pi.phase_name, pi.node);
            ok = false;
        }
    }
    if (ok && placed != written) {
        fprintf(stderr, "  %s: %zu pods written, the engine has %zu placed\n", what, written, placed);
        ok = false;
    }
    n_pods_written += (int)written;
    cJSON_Delete(doc);
    us_free(a);
    free(b);
    return ok;
}

TEST(every_example_round_trips_through_its_state) {
    DIR *d = opendir("examples");
    struct dirent *de;
    int n = 0;
    CHECK(d != NULL);
    while (d && (de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".json") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "examples/%s", de->d_name);
        us_engine *e = feed(path);
        if (!e) {
            /* examples with a timeline-only object (a node added later)
             * are fed as far as the API takes them: none is refused */
            CHECK(!"an example was refused by the API");
            continue;
        }
        us_error err;
        bool ok = round_trip(path, e); /* before any cycle: nothing placed yet */
        for (int c = 0; ok && c < 8; c++) {
            if (us_engine_run_cycle(e, c * 10.0, &err) != US_OK) {
                fprintf(stderr, "  %s: cycle %d: %s\n", path, c, err.message);
                ok = false;
            }
            ok = ok && round_trip(path, e);
        }
        CHECK(ok);
        us_engine_destroy(e);
        n++;
    }
    if (d) closedir(d);
    CHECK(n >= 10);
    /* the examples reach every state a pod is written in */
    CHECK(n_pods_written > 100);
    CHECK(n_releasing_written > 0);
    CHECK(n_pipelined_written > 0);
}

/* The seed story after training arrives: what the state says, field by
 * field, and the GPU use, pending reasons and phases beside it. */
TEST(state_content_and_accessors) {
    us_engine *e = feed("examples/seed-story.json");
    us_error err;
    CHECK(e != NULL);
    if (!e) return;
    us_gpu_use g;
    CHECK(us_engine_gpu_use(e, &g) == US_OK);
    CHECK(us_engine_gpu_use(NULL, &g) == US_EINVAL);
    double cap = g.capacity;
    CHECK(cap == 32 && g.idle + g.ai + g.background + g.external == cap);
    us_cycle_phase_info ph;
    CHECK(us_engine_cycle_phase_count(e) == 7);
    CHECK(us_engine_cycle_phase(e, 0, &ph) == US_OK && !strcmp(ph.name, "snapshot") && ph.seconds == 0);
    CHECK(us_engine_cycle_phase(e, 7, &ph) == US_ENOENT);
    CHECK(us_engine_run_cycle(e, 0, &err) == US_OK);
    CHECK(us_engine_gpu_use(e, &g) == US_OK);
    /* the burn-in took what AI left; the sums hold */
    CHECK(g.background > 0 && g.idle >= 0 && g.idle + g.ai + g.background + g.external == cap);
    double total = 0;
    for (size_t i = 0; i < us_engine_cycle_phase_count(e); i++) {
        CHECK(us_engine_cycle_phase(e, i, &ph) == US_OK && ph.seconds >= 0);
        total += ph.seconds;
    }
    CHECK(total > 0);
    /* pending reasons: each workload with pending pods has one */
    for (size_t i = 0; i < us_engine_workload_count(e); i++) {
        us_workload_info w;
        us_engine_workload(e, i, &w);
        size_t pending = 0;
        for (size_t j = 0; j < us_engine_pod_count(e); j++) {
            us_pod_info p;
            us_engine_pod(e, j, &p);
            pending += p.phase == US_PHASE_PENDING && !strcmp(p.workload, w.name);
        }
        const char *why = us_engine_workload_pending_reason(e, i);
        if (pending && w.background) CHECK(why && !strcmp(why, "idle-resources"));
        else if (pending) CHECK(why != NULL);
        else CHECK(why == NULL);
    }
    CHECK(us_engine_workload_pending_reason(e, 100000) == NULL);
    CHECK(us_engine_run_cycle(e, 10, &err) == US_OK);
    char *a;
    size_t len;
    CHECK(us_engine_state_json(e, &a, &len, &err) == US_OK);
    cJSON *doc = cJSON_Parse(a);
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(doc, "name")->valuestring, "engine state");
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "nodes")) == 4);
    const cJSON *n0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "nodes"), 0);
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(n0, "cpu")->valuestring, "64000m");
    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(n0, "memory")));
    us_free(a);
    cJSON_Delete(doc);
    CHECK(us_engine_state_json(NULL, &a, &len, &err) == US_EINVAL && a == NULL);
    us_free(NULL);
    us_engine_destroy(e);
}

/* A pin given through the API (not a DaemonSet's, which its controller
 * implies) is part of the state: written with its pod, and loaded back
 * it is still the pod's pin. */
TEST(a_pin_from_the_api_is_written) {
    us_engine *e;
    us_error err;
    CHECK(us_engine_create(NULL, &e, &err) == US_OK);
    CHECK(us_engine_upsert_node_json(e, "{\"name\":\"n1\",\"gpu\":8,\"cpu\":\"64\",\"memory\":\"512Gi\"}", &err) == US_OK);
    CHECK(us_engine_upsert_node_json(e, "{\"name\":\"n2\",\"gpu\":8,\"cpu\":\"64\",\"memory\":\"512Gi\"}", &err) == US_OK);
    CHECK(us_engine_upsert_queue_json(e, "{\"name\":\"q\",\"resources\":{\"gpu\":{\"quota\":8}}}", &err) == US_OK);
    CHECK(us_engine_upsert_workload_json(e, "{\"name\":\"w\",\"queue\":\"q\",\"replicas\":2,"
                                         "\"requests\":{\"gpu\":1,\"cpu\":\"1\",\"memory\":\"1Gi\"}}", 0, &err) == US_OK);
    us_pod_spec pinned = {.name = "w-a", .workload = "w", .node = "n2", .pin = "n2"};
    us_pod_spec free_pod = {.name = "w-b", .workload = "w", .node = "n1"};
    CHECK(us_engine_upsert_pod(e, &pinned, &err) == US_OK);
    CHECK(us_engine_upsert_pod(e, &free_pod, &err) == US_OK);
    char *a = NULL;
    size_t la;
    CHECK(us_engine_state_json(e, &a, &la, &err) == US_OK);
    if (!a) {
        us_engine_destroy(e);
        return;
    }
    cJSON *doc = cJSON_Parse(a);
    const cJSON *pods = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "workloads"), 0), "pods");
    int pins = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, pods) {
        const cJSON *pin = cJSON_GetObjectItemCaseSensitive(p, "pin");
        if (!pin) continue;
        pins++;
        CHECK_STR(cJSON_GetObjectItemCaseSensitive(p, "name")->valuestring, "w-a");
        CHECK_STR(pin->valuestring, "n2");
    }
    CHECK(pins == 1);
    cJSON_Delete(doc);
    /* loaded back: the state writes the same, pin included */
    CHECK(round_trip("a pinned pod", e));
    us_free(a);
    us_engine_destroy(e);
}

/* An engine with node n1 (8 GPUs), queue q and workload w of one
 * single-GPU replica; NULL when that fails (checked). */
static us_engine *one_workload(void) {
    us_engine *e = NULL;
    us_error err;
    CHECK(us_engine_create(NULL, &e, &err) == US_OK);
    if (!e) return NULL;
    CHECK(us_engine_upsert_node_json(e, "{\"name\":\"n1\",\"gpu\":8,\"cpu\":\"64\",\"memory\":\"512Gi\"}", &err) == US_OK);
    CHECK(us_engine_upsert_queue_json(e, "{\"name\":\"q\",\"resources\":{\"gpu\":{\"quota\":8}}}", &err) == US_OK);
    CHECK(us_engine_upsert_workload_json(e, "{\"name\":\"w\",\"queue\":\"q\",\"replicas\":1,"
                                         "\"requests\":{\"gpu\":1,\"cpu\":\"1\",\"memory\":\"1Gi\"}}", 0, &err) == US_OK);
    return e;
}

/* A pinned pod of a removed workload, still terminating, is written under
 * the live workload of that name: when that one is a DaemonSet (whose pods
 * carry no pin in the document), the pin is not written either, so that
 * the state loads back and writes the same (found by fuzz_api). */
TEST(a_pinned_pod_of_a_former_workload_under_a_daemonset_round_trips) {
    us_engine *e = one_workload();
    us_error err;
    if (!e) return;
    us_pod_spec pinned = {.name = "w-a", .workload = "w", .node = "n1", .pin = "n1"};
    CHECK(us_engine_upsert_pod(e, &pinned, &err) == US_OK);
    pinned.terminating = 1;
    CHECK(us_engine_upsert_pod(e, &pinned, &err) == US_OK);
    CHECK(us_engine_remove_workload(e, "w", 1, &err) == US_OK);
    CHECK(round_trip("a pinned pod of a removed workload", e));
    CHECK(us_engine_upsert_workload_json(e, "{\"name\":\"w\",\"queue\":\"q\",\"controller\":\"daemonset\","
                                         "\"requests\":{\"gpu\":1,\"cpu\":\"1\",\"memory\":\"1Gi\"}}", 1, &err) == US_OK);
    CHECK(round_trip("the same under a daemonset of its name", e));
    us_engine_destroy(e);
}

/* A pod someone else deletes (us_pod_spec.terminating) holds its room
 * until it is removed: the state says so with until_removed (no time to
 * write), loads back the same, and the loader refuses the field where it
 * has no meaning. */
TEST(a_deletion_nobody_times_is_until_removed) {
    us_engine *e = one_workload();
    us_error err;
    if (!e) return;
    us_pod_spec dying = {.name = "w-a", .workload = "w", .node = "n1", .terminating = 1};
    CHECK(us_engine_upsert_pod(e, &dying, &err) == US_OK);
    char *a = NULL;
    size_t la;
    CHECK(us_engine_state_json(e, &a, &la, &err) == US_OK);
    if (a) {
        CHECK_HAS(a, "\"until_removed\":\ttrue");
        CHECK(strstr(a, "release_at") == NULL);
        CHECK(round_trip("a pod deleted by someone else", e));
        us_free(a);
    }
    us_engine_destroy(e);
    static const char *const bad[][2] = {
        {"\"state\": \"running\", \"until_removed\": true", "only a releasing pod has one"},
        {"\"state\": \"releasing\", \"release_at\": 3, \"until_removed\": true", "not both"},
        {"\"state\": \"releasing\", \"until_removed\": 1", "must be true or false"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[1024];
        snprintf(doc, sizeof doc,
                 "{\"name\":\"x\",\"nodes\":[{\"name\":\"n1\",\"gpu\":8,\"cpu\":\"64\",\"memory\":\"512Gi\"}],"
                 "\"queues\":[{\"name\":\"q\"}],\"workloads\":[{\"name\":\"w\",\"queue\":\"q\",\"replicas\":1,"
                 "\"requests\":{\"gpu\":1},\"pods\":[{\"name\":\"w-0\",\"node\":\"n1\",%s}]}]}", bad[i][0]);
        us_scenario sc;
        us_err lerr = {0};
        memset(&sc, 0, sizeof sc);
        int rc = us_scenario_load_string(&sc, doc, strlen(doc), NULL, &lerr);
        CHECK(rc < 0);
        if (rc < 0) {
            CHECK_HAS(lerr.msg, bad[i][1]);
            CHECK_HAS(lerr.msg, "workloads[0].pods[0].until_removed");
        } else {
            us_scenario_free(&sc);
        }
    }
}

int main(void) {
    RUN(every_example_round_trips_through_its_state);
    RUN(state_content_and_accessors);
    RUN(a_pin_from_the_api_is_written);
    RUN(a_pinned_pod_of_a_former_workload_under_a_daemonset_round_trips);
    RUN(a_deletion_nobody_times_is_until_removed);
    return check_report();
}
