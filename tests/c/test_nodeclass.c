/*
 * test_nodeclass.c — node classes kept from one cycle to the next
 * (nodeclass.h, us_classes_renew; cyclecache.h).
 *
 * A cluster runs cycle after cycle twice from the same state: once with a
 * cycle cache, which hands each pool's node classes to the next cycle,
 * and once without (every cycle finds them afresh).  Between cycles the
 * same changes reach both: work submitted and completed, a node cordoned,
 * a node relabelled, a workload selecting on a label key nothing named
 * before.  After every cycle both made the same decisions; and the cached
 * run kept every class a node could keep (its use in the AI view
 * unchanged) while its nodes and their static views held, and none in
 * the cycle after each change to them.  Checking builds also find the
 * classes afresh at every renewal and hold the kept ones to them
 * (invariant "node-classes"), here and in every cached cycle of the suite.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "cycle.h"
#include "cyclecache.h"
#include "lifecycle.h"
#include "scenario.h"

/* 24 nodes in two zones, each with a unique hostname nothing selects on,
 * every fourth tainted; one queue; a deployment of two 2-GPU pods every
 * 10 s, each third one on zone a. */
static char *scenario(void) {
    size_t cap = 16384, at = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
#define PUT(...) at += (size_t)snprintf(b + at, at < cap ? cap - at : 0, __VA_ARGS__)
    PUT("{\"name\":\"classes\",\"nodes\":[");
    for (int i = 0; i < 24; i++)
        PUT("%s{\"name\":\"n%02d\",\"gpu\":8,\"cpu\":\"64\",\"memory\":\"512Gi\",\"labels\":{\"zone\":\"%s\","
            "\"kubernetes.io/hostname\":\"n%02d\"}%s}",
            i ? "," : "", i, i % 2 ? "b" : "a", i,
            i % 4 == 3 ? ",\"taints\":[{\"key\":\"gpu\",\"effect\":\"NoSchedule\"}]" : "");
    PUT("],\"queues\":[{\"name\":\"team\",\"resources\":{\"gpu\":{\"quota\":192}}}],\"workloads\":[");
    for (int k = 0; k < 8; k++)
        PUT("%s{\"name\":\"w%d\",\"queue\":\"team\",\"controller\":\"deployment\",\"replicas\":2,"
            "\"requests\":{\"gpu\":2,\"cpu\":\"1\"},\"submit_at\":%d%s}",
            k ? "," : "", k, 10 * k, k % 3 == 2 ? ",\"node_selector\":{\"zone\":\"a\"}" : "");
    PUT("]}");
#undef PUT
    return b;
}

/* The changes made before the cycle at step s, to one state; what the
 * cached run's cycle may then keep: 'all' (no node changed, and every
 * node's use is the last cycle's end), 'none' (the nodes' static views
 * changed), or 'some' (pods left some nodes). */
typedef enum { KEEP_ALL, KEEP_NONE, KEEP_SOME } keep;

static keep change(us_state *st, int s, double now) {
    switch (s) {
    case 2:  /* a node cordoned */
        us_life_cordon(st, 5, true);
        return KEEP_NONE;
    case 3: { /* a workload completes: its nodes' use changes */
        int w = us_state_workload_index(st, "w0");
        CHECK(w >= 0 && us_life_complete(st, w, now) == 0);
        return KEEP_SOME;
    }
    case 4: { /* a node's zone changes */
        us_node *n = &st->nodes[6];
        for (size_t i = 0; i < n->labels.n; i++)
            if (strcmp(n->labels.items[i].key, "zone") == 0) {
                char *v = strdup("b");
                CHECK(v != NULL);
                free(n->labels.items[i].value);
                n->labels.items[i].value = v;
            }
        CHECK(us_life_node_changed(st, 6, now) == 0);
        return KEEP_NONE;
    }
    case 6: { /* a workload selects on a key nothing named: it matters now */
        cJSON *o = cJSON_Parse("{\"name\":\"pinned\",\"queue\":\"team\",\"replicas\":1,"
                               "\"requests\":{\"gpu\":1},\"node_selector\":{\"kubernetes.io/hostname\":\"n09\"}}");
        us_workload w;
        us_err err = {0};
        CHECK(o && us_scenario_parse_workload(o, st, "workload", &w, &err) == 0);
        w.submit_at = now;
        CHECK(us_state_add_workload(st, &w) >= 0);
        cJSON_Delete(o);
        return KEEP_NONE;
    }
    default:
        return KEEP_ALL;
    }
}

static char *decisions(const us_cycle_log *log) {
    size_t cap = 1, at = 0;
    for (size_t i = 0; i < log->ndecisions; i++) cap += 128 + strlen(log->decisions[i].pod);
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    for (size_t i = 0; i < log->ndecisions; i++) {
        const us_decision *d = &log->decisions[i];
        at += (size_t)snprintf(s + at, cap - at, "%d %s %s;", (int)d->op, d->pod, d->node ? d->node : "-");
    }
    return s;
}

TEST(kept_node_classes_decide_as_fresh_ones_and_follow_node_changes) {
    char *doc = scenario();
    us_scenario cached, fresh;
    us_err err = {0};
    CHECK(doc != NULL);
    if (!doc || us_scenario_load_string(&cached, doc, strlen(doc), NULL, &err) < 0) {
        fprintf(stderr, "  %s\n", err.msg);
        CHECK(0);
        free(doc);
        return;
    }
    CHECK(us_scenario_load_string(&fresh, doc, strlen(doc), NULL, &err) == 0);
    free(doc);
    us_cycle_cache *cache = us_cycle_cache_new();
    CHECK(cache != NULL);
    int kept_all = 0, kept_none = 0, kept_some = 0;
    for (int s = 0; s < 8; s++) {
        double now = 10.0 * s;
        keep want = change(&cached.state, s, now);
        (void)change(&fresh.state, s, now);
        char *got[2] = {NULL, NULL};
        us_cycle_profile prof[2];
        for (int run = 0; run < 2; run++) {
            us_state *st = run ? &fresh.state : &cached.state;
            us_cycle_opts o;
            us_cycle_opts_default(&o);
            o.cache = run ? NULL : cache;
            o.check_invariants = true;
            memset(&prof[run], 0, sizeof prof[run]);
            o.profile = &prof[run];
            bool any;
            CHECK(us_life_submit_due(st, now, &any) == 0);
            us_cycle_log log;
            us_cycle_log_init(&log);
            int rc = us_cycle_run(st, NULL, now, &o, &log, NULL, NULL, &err);
            if (rc < 0) fprintf(stderr, "  step %d: %s\n", s, err.msg);
            CHECK(rc == 0);
            got[run] = decisions(&log);
            us_cycle_log_free(&log);
        }
        CHECK(got[0] && got[1]);
        if (got[0] && got[1] && strcmp(got[0], got[1]) != 0)
            fprintf(stderr, "  step %d: kept classes decided %s\n  fresh ones %s\n", s, got[0], got[1]);
        CHECK(got[0] && got[1] && strcmp(got[0], got[1]) == 0);
        CHECK(*got[0] != '\0'); /* each step places something: the classes are used */
        free(got[0]);
        free(got[1]);
        /* every node of the pool is classed once per cycle, in both runs;
         * only the cached run keeps any */
        CHECK(prof[0].nodes_classed == 24 && prof[1].nodes_classed == 24);
        CHECK(prof[1].nodes_class_kept == 0);
        unsigned long long k = prof[0].nodes_class_kept;
        if (s == 0 || want == KEEP_NONE) {
            CHECK(k == 0);
            kept_none += s > 0;
        } else if (want == KEEP_ALL) {
            CHECK(k == 24);
            kept_all++;
        } else {
            CHECK(k > 0 && k < 24);
            kept_some++;
        }
    }
    CHECK(kept_all >= 3 && kept_none == 3 && kept_some == 1);
    us_cycle_cache_free(cache);
    us_scenario_free(&cached);
    us_scenario_free(&fresh);
}

int main(void) {
    RUN(kept_node_classes_decide_as_fresh_ones_and_follow_node_changes);
    return check_report();
}
