/*
 * test_monitor.c — what `understory serve` exposes (serve/monitor.c):
 * every hook the later stages call records what its name says, read back
 * by a real Prometheus parser (tests/prom_check.py); API requests are
 * named by the Kubernetes verb the API server would give them.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "monitor.h"

static char dir[] = "/tmp/understory-monitor.XXXXXX";

/* The registry as the real parser reads it: one "name{labels} value"
 * line per sample (tests/prom_check.py), NUL-terminated, malloc'd. */
static char *parsed(sv_monitor *m) {
    char path[256], cmd[1024];
    size_t len = 0;
    char *text = sv_monitor_render(m, &len);
    snprintf(path, sizeof path, "%s/metrics.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f || !text) {
        if (f) fclose(f);
        free(text);
        return NULL;
    }
    fwrite(text, 1, len, f);
    fclose(f);
    free(text);
    const char *root = getenv("UNDERSTORY_ROOT");
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/prom_check.py %s", root ? root : ".", path);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 65536, n = 0;
    char *out = malloc(cap);
    while (out && n + 1 < cap && (len = fread(out + n, 1, cap - 1 - n, p)) > 0) n += len;
    if (pclose(p) != 0) {
        free(out);
        return NULL;
    }
    if (out) out[n] = '\0';
    return out;
}

TEST(hooks_record_what_they_say) {
    uv_loop_t loop;
    char err[256];
    uv_loop_init(&loop);
    sv_monitor *m = sv_monitor_start(&loop, "127.0.0.1:0", err, sizeof err);
    CHECK(m != NULL);
    if (!m) return;
    sv_monitor_cycle(m, "total", 0.003);
    sv_monitor_cycle(m, "total", 0.2);
    sv_monitor_cycle(m, "allocate", 0.0004);
    sv_monitor_decisions(m, "bind", "allocate", 3);
    sv_monitor_decisions(m, "bind", "allocate", 2);
    sv_monitor_decisions(m, "evict", "reclaim", 1);
    sv_monitor_decisions(m, "bind", NULL, 1);
    sv_monitor_policy(m, "abc");
    sv_monitor_policy(m, "def"); /* one id at a time */
    sv_monitor_evictions(m, "reclaim", 4);
    sv_monitor_pending(m, "ai", "quota", 7);
    sv_monitor_pending(m, "background", "no room", 9);
    sv_monitor_pending_clear(m); /* a new cycle: reasons gone are gone */
    sv_monitor_pending(m, "ai", "taints", 2);
    sv_monitor_reload(m, "ok");
    sv_monitor_reload(m, "refused");
    sv_monitor_reload(m, "refused");
    sv_monitor_leader(m, false);
    sv_monitor_harvest(m, 12, 3, 60);
    sv_monitor_harvest(m, 10, 5, 30.5);
    char *s = parsed(m);
    CHECK(s != NULL);
    CHECK_HAS(s, "understory_cycle_duration_seconds_bucket{le=\"0.005\",phase=\"total\"} 1.0\n");
    CHECK_HAS(s, "understory_cycle_duration_seconds_bucket{le=\"0.25\",phase=\"total\"} 2.0\n");
    CHECK_HAS(s, "understory_cycle_duration_seconds_count{phase=\"total\"} 2.0\n");
    CHECK_HAS(s, "understory_cycle_duration_seconds_sum{phase=\"total\"} 0.203\n");
    CHECK_HAS(s, "understory_cycle_duration_seconds_bucket{le=\"0.001\",phase=\"allocate\"} 1.0\n");
    CHECK_HAS(s, "understory_decisions_total{action=\"allocate\",op=\"bind\"} 5.0\n");
    CHECK_HAS(s, "understory_decisions_total{action=\"reclaim\",op=\"evict\"} 1.0\n");
    CHECK_HAS(s, "understory_decisions_total{action=\"none\",op=\"bind\"} 1.0\n");
    CHECK_HAS(s, "understory_policy_info{policy_id=\"def\"} 1.0\n");
    CHECK(s && !strstr(s, "policy_id=\"abc\""));
    CHECK_HAS(s, "understory_evictions_total{action=\"reclaim\"} 4.0\n");
    CHECK_HAS(s, "understory_pending_pods{kind=\"ai\",reason=\"taints\"} 2.0\n");
    CHECK(s && !strstr(s, "reason=\"quota\"") && !strstr(s, "no room"));
    CHECK_HAS(s, "understory_policy_reloads_total{result=\"ok\"} 1.0\n");
    CHECK_HAS(s, "understory_policy_reloads_total{result=\"refused\"} 2.0\n");
    CHECK_HAS(s, "understory_leader{} 0.0\n");
    CHECK_HAS(s, "understory_background_gpus{} 10.0\n");
    CHECK_HAS(s, "understory_idle_gpus{} 5.0\n");
    CHECK_HAS(s, "understory_background_gpu_seconds_total{} 90.5\n");
    free(s);
    sv_monitor_close(m);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
}

/* After a real engine's cycles: its phases, decisions by op and action,
 * pending pods by kind and reason, and the harvest, as the engine says. */
TEST(after_cycle_reads_the_engine) {
    uv_loop_t loop;
    char err[256];
    us_engine *e;
    us_error ue;
    uv_loop_init(&loop);
    sv_monitor *m = sv_monitor_start(&loop, "127.0.0.1:0", err, sizeof err);
    CHECK(m != NULL && us_engine_create(NULL, &e, &ue) == US_OK);
    if (!m) return;
    CHECK(us_engine_upsert_node_json(e, "{\"name\": \"n1\", \"gpu\": 8, \"cpu\": 64, \"memory\": \"256Gi\"}", &ue) == US_OK);
    CHECK(us_engine_upsert_queue_json(e, "{\"name\": \"q\", \"resources\": {\"gpu\": {\"quota\": 8}}}", &ue) == US_OK);
    CHECK(us_engine_upsert_queue_json(e, "{\"name\": \"bg\", \"resources\": {\"gpu\": {\"quota\": 0, "
                                      "\"over_quota_weight\": 0}, \"cpu\": {\"quota\": 0, \"over_quota_weight\": 0}, "
                                      "\"memory\": {\"quota\": 0, \"over_quota_weight\": 0}}}", &ue) == US_OK);
    /* 2 AI pods of 2 GPUs; 6 background pods of 1 GPU: 4 fit, 2 wait */
    CHECK(us_engine_upsert_workload_json(e, "{\"name\": \"ai\", \"queue\": \"q\", \"replicas\": 2, "
                                         "\"requests\": {\"gpu\": 2}}", 0, &ue) == US_OK);
    CHECK(us_engine_upsert_workload_json(e, "{\"name\": \"burn\", \"queue\": \"bg\", \"controller\": \"deployment\", "
                                         "\"replicas\": 6, \"labels\": {\"kai.scheduler/background\": \"true\"}, "
                                         "\"requests\": {\"gpu\": 1}, \"termination_grace\": 5}", 0, &ue) == US_OK);
    CHECK(us_engine_run_cycle(e, 0, &ue) == US_OK);
    sv_monitor_after_cycle(m, e, 0.001, 0.002, 100);
    CHECK(us_engine_run_cycle(e, 10, &ue) == US_OK);
    sv_monitor_after_cycle(m, e, 0.001, 0.002, 110); /* 10 s at 4 background GPUs */
    char *s = parsed(m);
    CHECK_HAS(s, "understory_decisions_total{action=\"allocate\",op=\"bind\"} 2.0\n");
    CHECK_HAS(s, "understory_decisions_total{action=\"backgroundpods\",op=\"bind\"} 4.0\n");
    CHECK_HAS(s, "understory_pending_pods{kind=\"background\",reason=\"idle-resources\"} 2.0\n");
    CHECK(s && !strstr(s, "kind=\"ai\""));
    CHECK_HAS(s, "understory_background_gpus{} 4.0\n");
    CHECK_HAS(s, "understory_idle_gpus{} 0.0\n");
    CHECK_HAS(s, "understory_background_gpu_seconds_total{} 40.0\n");
    CHECK_HAS(s, "understory_cycle_duration_seconds_count{phase=\"allocate\"} 2.0\n");
    CHECK_HAS(s, "understory_cycle_duration_seconds_count{phase=\"sync\"} 2.0\n");
    CHECK_HAS(s, "understory_cycle_duration_seconds_count{phase=\"total\"} 2.0\n");
    CHECK_HAS(s, "understory_cycle_duration_seconds_count{phase=\"write\"} 2.0\n");
    free(s);
    us_engine_destroy(e);
    sv_monitor_close(m);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
}

/* What cycles reused, summed over cycles as the engine reports each
 * (us_engine_cycle_reuse): with the default Lua policies, three nodes and
 * a workload of one kind arriving each cycle, the second and third cycles
 * keep every node's class and some scores. */
TEST(after_cycle_counts_what_cycles_reused) {
    uv_loop_t loop;
    char err[256], dirp[512], want[160];
    us_engine *e;
    us_error ue;
    const char *root = getenv("UNDERSTORY_ROOT");
    snprintf(dirp, sizeof dirp, "%s/policies", root ? root : ".");
    uv_loop_init(&loop);
    sv_monitor *m = sv_monitor_start(&loop, "127.0.0.1:0", err, sizeof err);
    CHECK(m != NULL && us_engine_create(NULL, &e, &ue) == US_OK);
    if (!m) return;
    CHECK(us_engine_load_policies(e, dirp, &ue) == US_OK);
    for (int n = 0; n < 3; n++) {
        char json[128];
        snprintf(json, sizeof json, "{\"name\": \"n%d\", \"gpu\": 8, \"cpu\": 64, \"memory\": \"256Gi\"}", n);
        CHECK(us_engine_upsert_node_json(e, json, &ue) == US_OK);
    }
    CHECK(us_engine_upsert_queue_json(e, "{\"name\": \"q\", \"resources\": {\"gpu\": {\"quota\": 24}}}", &ue) == US_OK);
    unsigned long long calls = 0, kept = 0, fresh = 0, scores = 0;
    for (int c = 0; c < 3; c++) {
        char json[128];
        snprintf(json, sizeof json, "{\"name\": \"w%d\", \"queue\": \"q\", \"replicas\": 2, \"requests\": {\"gpu\": 2}}", c);
        CHECK(us_engine_upsert_workload_json(e, json, 10.0 * c, &ue) == US_OK);
        CHECK(us_engine_run_cycle(e, 10.0 * c, &ue) == US_OK);
        sv_monitor_after_cycle(m, e, 0.001, 0.002, 100 + 10.0 * c);
        us_cycle_reuse r;
        CHECK(us_engine_cycle_reuse(e, &r) == US_OK);
        calls += r.policy_calls;
        kept += r.nodes_class_kept;
        fresh += r.nodes_classed - r.nodes_class_kept;
        scores += r.scores_kept;
    }
    CHECK(kept == 6 && fresh == 3 && scores > 0 && calls > 0);
    char *s = parsed(m);
    snprintf(want, sizeof want, "understory_policy_calls_total{} %llu.0\n", calls);
    CHECK_HAS(s, want);
    snprintf(want, sizeof want, "understory_node_classes_total{reuse=\"kept\"} %llu.0\n", kept);
    CHECK_HAS(s, want);
    snprintf(want, sizeof want, "understory_node_classes_total{reuse=\"fresh\"} %llu.0\n", fresh);
    CHECK_HAS(s, want);
    snprintf(want, sizeof want, "understory_scores_kept_total{} %llu.0\n", scores);
    CHECK_HAS(s, want);
    free(s);
    us_engine_destroy(e);
    sv_monitor_close(m);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
}

/* The families are there before anything is recorded, and the hooks take
 * a NULL monitor (a stage that runs without an admin endpoint). */
TEST(families_before_anything) {
    uv_loop_t loop;
    char err[256];
    uv_loop_init(&loop);
    sv_monitor *m = sv_monitor_start(&loop, "127.0.0.1:0", err, sizeof err);
    CHECK(m != NULL);
    if (!m) return;
    size_t len;
    char *t = sv_monitor_render(m, &len);
    static const char *const families[] = {
        "understory_api_requests_total counter", "understory_background_gpu_seconds_total counter",
        "understory_background_gpus gauge", "understory_cycle_duration_seconds histogram",
        "understory_decisions_total counter", "understory_evictions_total counter", "understory_idle_gpus gauge",
        "understory_informer_lists_total counter", "understory_informer_objects gauge",
        "understory_informer_synced gauge", "understory_informer_watch_restarts_total counter",
        "understory_leader gauge", "understory_pending_pods gauge", "understory_policy_reloads_total counter",
        "understory_api_retries_total counter", "understory_api_rate_limiter_wait_seconds_total counter",
        "understory_policy_info gauge", "understory_policy_calls_total counter",
        "understory_node_classes_total counter", "understory_scores_kept_total counter",
        "understory_nodes_short gauge"};
    for (size_t i = 0; i < sizeof families / sizeof *families; i++) {
        char want[128];
        snprintf(want, sizeof want, "# TYPE %s\n", families[i]);
        CHECK_HAS(t, want);
    }
    CHECK_HAS(t, "\nunderstory_leader 1\n"); /* no election: it leads */
    free(t);
    sv_monitor_cycle(NULL, "total", 1);
    sv_monitor_decisions(NULL, "bind", "allocate", 1);
    sv_monitor_policy(NULL, "x");
    sv_monitor_after_cycle(NULL, NULL, 0, 0, 0);
    sv_monitor_evictions(NULL, "reclaim", 1);
    sv_monitor_pending_clear(NULL);
    sv_monitor_pending(NULL, "ai", "quota", 1);
    sv_monitor_reload(NULL, "ok");
    sv_monitor_leader(NULL, true);
    sv_monitor_harvest(NULL, 1, 1, 1);
    sv_monitor_nodes_short(NULL, 1);
    sv_monitor_close(m);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
}

/* Requests named as the API server's own metrics name them. */
TEST(kubernetes_verbs) {
    static const char *const cases[][3] = {
        {"GET", "/api/v1/nodes?limit=500", "list"},
        {"GET", "/api/v1/nodes?watch=1&allowWatchBookmarks=true&resourceVersion=5", "watch"},
        {"GET", "/api/v1/nodes/gpu-0", "get"},
        {"GET", "/api/v1/namespaces/ns/pods", "list"},
        {"GET", "/api/v1/namespaces/ns/pods/p", "get"},
        {"GET", "/api/v1/namespaces/ns", "get"},
        {"GET", "/apis/scheduling.run.ai/v2/queues?limit=500", "list"},
        {"GET", "/apis/scheduling.run.ai/v2/queues/team-a", "get"},
        {"GET", "/apis/scheduling.run.ai/v2alpha2/namespaces/ns/podgroups?watch=true", "watch"},
        {"POST", "/api/v1/namespaces/ns/pods/p/binding", "create"},
        {"POST", "/api/v1/namespaces/ns/events", "create"},
        {"PUT", "/api/v1/namespaces/ns/pods/p/status", "update"},
        {"PATCH", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/understory", "patch"},
        {"DELETE", "/api/v1/namespaces/ns/pods/p", "delete"},
        {"DELETE", "/api/v1/namespaces/ns/pods", "deletecollection"},
        {"OPTIONS", "/api/v1/nodes", "other"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *got = sv_monitor_k8s_verb(cases[i][0], cases[i][1]);
        CHECK_STR(got, cases[i][2]);
    }
}

int main(void) {
    if (!mkdtemp(dir)) return 2;
    RUN(hooks_record_what_they_say);
    RUN(after_cycle_reads_the_engine);
    RUN(after_cycle_counts_what_cycles_reused);
    RUN(families_before_anything);
    RUN(kubernetes_verbs);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 2;
    return check_report();
}
