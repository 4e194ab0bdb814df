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
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "cycle.h"
#include "cyclecache.h"
#include "lifecycle.h"
#include "policy.h"
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

static char *log_lines(const us_cycle_log *log);

/* One cycle of st at now, scored by pol (NULL: built-in), with cache
 * (NULL: none), invariants checked: its decisions and policy log lines
 * (malloc'd) in *got and *lines (lines may be NULL), its profile in
 * *prof. */
static void one_cycle(us_state *st, us_policy *pol, double now, us_cycle_cache *cache, int step,
                      us_cycle_profile *prof, char **got, char **lines) {
    us_cycle_opts o;
    us_err err = {0};
    bool any;
    us_cycle_opts_default(&o);
    o.cache = cache;
    o.check_invariants = true;
    memset(prof, 0, sizeof *prof);
    o.profile = prof;
    if (pol) us_policy_seed(pol, (uint64_t)step + 1);  /* as the simulator seeds each cycle */
    CHECK(us_life_submit_due(st, now, &any) == 0);
    us_cycle_log log;
    us_cycle_log_init(&log);
    int rc = us_cycle_run(st, pol, now, &o, &log, NULL, NULL, &err);
    if (rc < 0) fprintf(stderr, "  step %d: %s\n", step, err.msg);
    CHECK(rc == 0);
    *got = decisions(&log);
    if (lines) *lines = log_lines(&log);
    us_cycle_log_free(&log);
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
        for (int run = 0; run < 2; run++)
            one_cycle(run ? &fresh.state : &cached.state, NULL, now, run ? NULL : cache, s, &prof[run],
                      &got[run], NULL);
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

/* ---- placement scores kept across cycles ---------------------------------- */

/* Placement policies: PURE scores from the views alone; DRAWS asks
 * math.random for most of its score; LOGS logs each call; OTHER is a
 * second pure version (a reload). */
static const char *const PL_PURE =
    "return { score = function(pod, node)\n"
    "  return node.free.gpu * 10 + (node.labels.zone == 'a' and 3 or 0) - pod.requests.gpu\n"
    "end }\n";
static const char *const PL_DRAWS =
    "return { score = function(pod, node)\n"
    "  return math.random(1000) + node.free.gpu\n"
    "end }\n";
static const char *const PL_LOGS =
    "return { score = function(pod, node)\n"
    "  log('scored', node.free.gpu, node.labels.zone)\n"
    "  return node.free.gpu\n"
    "end }\n";
static const char *const PL_OTHER =
    "return { score = function(pod, node)\n"
    "  return -node.free.gpu * 10 - (node.labels.zone == 'a' and 3 or 0)\n"
    "end }\n";

/* Two instances of a policy directory holding only placement.lua (the
 * other files are the defaults): one per run, since a version's random
 * sequence and module state are its own. */
static int load_twice(const char *src, us_policy *pol[2]) {
    char dir[64], path[96];
    us_err err = {0};
    pol[0] = pol[1] = NULL;
    strcpy(dir, "/tmp/us-scorekeep-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(path, sizeof path, "%s/placement.lua", dir);
    FILE *f = fopen(path, "wb");
    int rc = -1;
    if (f) {
        rc = fputs(src, f) >= 0 ? 0 : -1;
        if (fclose(f) != 0) rc = -1;
    }
    for (int i = 0; i < 2 && rc == 0; i++)
        if (!(pol[i] = us_policy_load(dir, NULL, &err))) {
            fprintf(stderr, "  %s\n", err.msg);
            rc = -1;
        }
    unlink(path);
    rmdir(dir);
    return rc;
}

static char *log_lines(const us_cycle_log *log) {
    size_t cap = 1, at = 0;
    for (size_t i = 0; i < log->nlines; i++) cap += 32 + strlen(log->lines[i].file) + strlen(log->lines[i].text);
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    for (size_t i = 0; i < log->nlines; i++)
        at += (size_t)snprintf(s + at, cap - at, "%s:%d %s;", log->lines[i].file, log->lines[i].line,
                               log->lines[i].text);
    return s;
}

/* The cluster above, cycle after cycle, with a cycle cache and without,
 * scored by placement source src (and from step reload_at on, when >= 0,
 * by PL_OTHER).  Both decide the same and log the same every cycle.
 * *kept: scores kept per step in the cached run; *calls: policy calls of
 * the whole cached and uncached runs. */
static void run_scored(const char *src, int reload_at, unsigned long long kept[8],
                       unsigned long long calls[2]) {
    char *doc = scenario();
    us_scenario sc[2];
    us_err err = {0};
    us_policy *pol[2] = {NULL, NULL}, *other[2] = {NULL, NULL};
    memset(kept, 0, 8 * sizeof *kept);
    calls[0] = calls[1] = 0;
    CHECK(doc != NULL);
    if (!doc || us_scenario_load_string(&sc[0], doc, strlen(doc), NULL, &err) < 0) {
        fprintf(stderr, "  %s\n", err.msg);
        CHECK(0);
        free(doc);
        return;
    }
    CHECK(us_scenario_load_string(&sc[1], doc, strlen(doc), NULL, &err) == 0);
    free(doc);
    CHECK(load_twice(src, pol) == 0);
    if (reload_at >= 0) CHECK(load_twice(PL_OTHER, other) == 0);
    us_cycle_cache *cache = us_cycle_cache_new();
    CHECK(cache != NULL);
    for (int s = 0; s < 8 && pol[0] && pol[1] && cache; s++) {
        double now = 10.0 * s;
        (void)change(&sc[0].state, s, now);
        (void)change(&sc[1].state, s, now);
        char *got[2] = {NULL, NULL}, *lines[2] = {NULL, NULL};
        us_cycle_profile prof[2];
        for (int run = 0; run < 2; run++) {
            us_policy *v = reload_at >= 0 && s >= reload_at && other[run] ? other[run] : pol[run];
            one_cycle(&sc[run].state, v, now, run ? NULL : cache, s, &prof[run], &got[run], &lines[run]);
        }
        CHECK(got[0] && got[1] && lines[0] && lines[1]);
        if (got[0] && got[1] && strcmp(got[0], got[1]) != 0)
            fprintf(stderr, "  step %d: with kept scores %s\n  without %s\n", s, got[0], got[1]);
        CHECK(got[0] && got[1] && strcmp(got[0], got[1]) == 0);
        CHECK(lines[0] && lines[1] && strcmp(lines[0], lines[1]) == 0);
        CHECK(got[0] && *got[0] != '\0');  /* each step places something */
        CHECK(prof[1].scores_kept == 0);   /* nothing to keep without a cache */
        kept[s] = prof[0].scores_kept;
        calls[0] += prof[0].policy_calls;
        calls[1] += prof[1].policy_calls;
        for (int run = 0; run < 2; run++) {
            free(got[run]);
            free(lines[run]);
        }
    }
    us_cycle_cache_free(cache);
    for (int run = 0; run < 2; run++) {
        us_policy_free(pol[run]);
        us_policy_free(other[run]);
        us_scenario_free(&sc[run]);
    }
}

TEST(pure_scores_are_kept_across_cycles_and_decide_as_fresh_ones) {
    unsigned long long kept[8], calls[2];
    run_scored(PL_PURE, -1, kept, calls);
    /* none in the first cycle, nor after a change to the nodes' static
     * views (steps 2, 4, 6: the classes are found afresh) */
    CHECK(kept[0] == 0 && kept[2] == 0 && kept[4] == 0 && kept[6] == 0);
    /* while the views hold, pods of the last cycle's class (w1 after w0,
     * w7 after w6: no selector either) meet the same node classes */
    CHECK(kept[1] > 0 && kept[7] > 0);
    /* fewer placement calls for it, the same decisions (run_scored) */
    CHECK(calls[0] < calls[1]);
}

TEST(scores_of_calls_that_draw_or_log_are_not_kept) {
    /* a drawn score differs from cycle to cycle, and a call that logs
     * writes a line each cycle: keeping either would change the output */
    const char *srcs[2] = {PL_DRAWS, PL_LOGS};
    for (int i = 0; i < 2; i++) {
        unsigned long long kept[8], calls[2];
        run_scored(srcs[i], -1, kept, calls);
        for (int s = 0; s < 8; s++) CHECK(kept[s] == 0);
        CHECK(calls[0] == calls[1] && calls[0] > 0);  /* asked every time, in both runs */
    }
}

TEST(a_new_placement_version_scores_afresh) {
    unsigned long long kept[8], calls[2];
    /* step 1 changes no node: the pure version's scores would be kept
     * there (above); another version is in force from it */
    run_scored(PL_PURE, 1, kept, calls);
    CHECK(kept[1] == 0);  /* nothing kept from the last version */
    CHECK(kept[7] > 0);   /* its own are, later */
}

int main(void) {
    RUN(kept_node_classes_decide_as_fresh_ones_and_follow_node_changes);
    RUN(pure_scores_are_kept_across_cycles_and_decide_as_fresh_ones);
    RUN(scores_of_calls_that_draw_or_log_are_not_kept);
    RUN(a_new_placement_version_scores_afresh);
    return check_report();
}
