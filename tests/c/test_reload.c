/*
 * test_reload.c — policy operations in the engine: the deep copy of a
 * state, the checked hot reload (every way a policy directory can fail it,
 * and the state and the running policy left untouched), the simulator's
 * timeline reloads (ownership of the caller's policy, fallback to the last
 * good version), the built-in check scenario, and the per-cycle seeding
 * that keeps runs deterministic.
 *
 * Run from the repository root (or with UNDERSTORY_ROOT set): it reads
 * ./policies.  Policy directories under test are written to /tmp.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"               /* the test harness, tests/c/check.h */
#include "../../engine/check.h"  /* the policy lint; the harness shadows its name */
#include "cycle.h"
#include "lifecycle.h"
#include "policy.h"
#include "reload.h"
#include "scenario.h"
#include "sim.h"
#include "state.h"

static const char *const FILES[3] = {"fairshare.lua", "placement.lua", "background.lua"};

static const char *root(void) {
    const char *r = getenv("UNDERSTORY_ROOT");
    return r && *r ? r : ".";
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1))) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    return buf;
}

static int write_file(const char *dir, const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = strlen(text);
    int rc = fwrite(text, 1, n, f) == n ? 0 : -1;
    return fclose(f) == 0 ? rc : -1;
}

/* A policy directory under /tmp: the default policies, with the files
 * given (non-NULL) replaced.  dir receives its path. */
static int make_dir(char *dir, const char *fs, const char *pl, const char *bg) {
    const char *over[3] = {fs, pl, bg};
    strcpy(dir, "/tmp/us-reload-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    for (int i = 0; i < 3; i++) {
        char path[512];
        char *def = NULL;
        snprintf(path, sizeof path, "%s/policies/%s", root(), FILES[i]);
        if (!over[i] && !(def = slurp(path))) return -1;
        int rc = write_file(dir, FILES[i], over[i] ? over[i] : def);
        free(def);
        if (rc < 0) return -1;
    }
    return 0;
}

static void remove_dir(const char *dir) {
    char path[256];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, FILES[i]);
        unlink(path);
    }
    rmdir(dir);
}

static int load_json(us_scenario *sc, const char *json) {
    us_err err = {0};
    int rc = us_scenario_load_string(sc, json, strlen(json), NULL, &err);
    if (rc < 0) fprintf(stderr, "  load: %s\n", err.msg);
    return rc;
}

/* The seed story, as the simulator has it after the cycles up to time t:
 * something is pending or placed in the cycle at t (t=30: the gang). */
static int seed_state(us_scenario *sc, double t) {
    char path[512];
    us_err err = {0};
    snprintf(path, sizeof path, "%s/examples/seed-story.json", root());
    if (us_scenario_load_file(sc, path, &err) < 0) {
        fprintf(stderr, "  %s\n", err.msg);
        return -1;
    }
    us_cycle_opts o;
    us_cycle_opts_default(&o);
    for (double now = 0; now < t; now += sc->cycle_interval) {
        us_cycle_log log;
        us_cycle_log_init(&log);
        for (size_t w = 0; w < sc->state.nworkloads; w++)
            if (sc->state.workloads[w].state == US_WL_WAITING && sc->state.workloads[w].submit_at <= now)
                us_life_submit(&sc->state, (int)w, now);
        int rc = us_cycle_run(&sc->state, NULL, now, &o, &log, NULL, NULL, &err);
        us_cycle_log_free(&log);
        if (rc < 0) return -1;
    }
    for (size_t w = 0; w < sc->state.nworkloads; w++)
        if (sc->state.workloads[w].state == US_WL_WAITING && sc->state.workloads[w].submit_at <= t)
            us_life_submit(&sc->state, (int)w, t);
    return 0;
}

/* Decisions of a log as one string, for comparing two cycles. */
static void log_text(const us_cycle_log *log, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < log->ndecisions && at < n; i++) {
        const us_decision *d = &log->decisions[i];
        at += (size_t)snprintf(buf + at, n - at, "%d %d %s %s %s;", (int)d->op, (int)d->action, d->pod,
                               d->node ? d->node : "-", d->evictor ? d->evictor : "-");
    }
    for (size_t i = 0; i < log->nevents && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s %s %s;", log->events[i].reason,
                               log->events[i].object, log->events[i].message);
}

/* ---- us_state_clone -------------------------------------------------------- */

TEST(clone_is_deep_and_decides_the_same) {
    us_scenario sc;
    us_state copy;
    static char a[1 << 16], b[1 << 16];
    us_err err = {0};
    us_cycle_opts o;
    us_cycle_opts_default(&o);
    if (seed_state(&sc, 30) < 0) {
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    /* a status latch, so that the copy of last_status is exercised */
    int w = us_state_workload_index(st, "gpu-burn");
    CHECK(w >= 0);
    CHECK(us_state_clone(&copy, st) == 0);
    CHECK(copy.nnodes == st->nnodes && copy.nqueues == st->nqueues);
    CHECK(copy.nworkloads == st->nworkloads && copy.npods == st->npods);
    CHECK(copy.next_seq == st->next_seq);
    for (size_t i = 0; i < st->nnodes; i++) {
        CHECK_STR(copy.nodes[i].name, st->nodes[i].name);
        CHECK(copy.nodes[i].name != st->nodes[i].name);
        CHECK(copy.nodes[i].pool != st->nodes[i].pool);
        CHECK(copy.nodes[i].labels.n == st->nodes[i].labels.n);
        for (size_t k = 0; k < st->nodes[i].labels.n; k++) {
            CHECK_STR(copy.nodes[i].labels.items[k].value, st->nodes[i].labels.items[k].value);
            CHECK(copy.nodes[i].labels.items[k].key != st->nodes[i].labels.items[k].key);
        }
    }
    for (size_t i = 0; i < st->nworkloads; i++) {
        const us_workload *x = &st->workloads[i], *y = &copy.workloads[i];
        CHECK_STR(y->name, x->name);
        CHECK(y->name != x->name && y->pool != x->pool);
        CHECK(y->labels.n == x->labels.n && y->node_selector.n == x->node_selector.n);
        CHECK((x->last_status == NULL) == (y->last_status == NULL));
        if (x->last_status) {
            CHECK_STR(y->last_status, x->last_status);
            CHECK(y->last_status != x->last_status);
        }
        CHECK(y->blocked == x->blocked && y->state == x->state && y->started_at == x->started_at);
    }
    for (size_t i = 0; i < st->npods; i++) {
        CHECK_STR(copy.pods[i].name, st->pods[i].name);
        CHECK(copy.pods[i].name != st->pods[i].name);
        CHECK(copy.pods[i].state == st->pods[i].state && copy.pods[i].node == st->pods[i].node);
    }

    /* the same cycle on both decides the same; the copy then lives on
     * alone (ASan would see any string still shared) */
    us_cycle_log la, lb;
    us_cycle_log_init(&la);
    us_cycle_log_init(&lb);
    CHECK(us_cycle_run(st, NULL, 30, &o, &la, NULL, NULL, &err) == 0);
    CHECK(us_cycle_run(&copy, NULL, 30, &o, &lb, NULL, NULL, &err) == 0);
    log_text(&la, a, sizeof a);
    log_text(&lb, b, sizeof b);
    CHECK(la.ndecisions > 0);
    CHECK_STR(a, b);
    us_cycle_log_free(&la);
    us_cycle_log_free(&lb);
    us_scenario_free(&sc);
    us_cycle_log_init(&lb);
    CHECK(us_cycle_run(&copy, NULL, 40, &o, &lb, NULL, NULL, &err) == 0);
    us_cycle_log_free(&lb);
    us_state_free(&copy);
}

TEST(clone_of_pool_overrides_and_empty_state) {
    us_scenario sc;
    us_state copy, empty;
    if (load_json(&sc, "{\"nodes\":[{\"name\":\"n1\",\"pool\":\"p\",\"gpu\":2}],"
                       "\"queues\":[{\"name\":\"q\",\"pools\":{\"p\":{\"gpu\":{\"quota\":1}}}}],"
                       "\"workloads\":[{\"name\":\"w\",\"queue\":\"q\",\"pool\":\"p\","
                       "\"node_selector\":{\"a\":\"b\"},\"requests\":{\"gpu\":1}}]}") < 0) {
        CHECK(0);
        return;
    }
    CHECK(us_state_clone(&copy, &sc.state) == 0);
    CHECK(copy.queues[0].npools == 1);
    if (copy.queues[0].npools == 1) {
        CHECK_STR(copy.queues[0].pools[0].pool, "p");
        CHECK(copy.queues[0].pools[0].pool != sc.state.queues[0].pools[0].pool);
        CHECK(copy.queues[0].pools[0].res[US_GPU].quota == 1000);
    }
    CHECK_STR(copy.workloads[0].node_selector.items[0].value, "b");
    us_scenario_free(&sc);
    us_state_free(&copy);

    us_state_init(&empty);
    CHECK(us_state_clone(&copy, &empty) == 0);
    CHECK(copy.nnodes == 0 && copy.npods == 0);
    CHECK(us_state_add_pod(&copy, 0, "x", -1) == 0);  /* the copy can grow */
    us_state_free(&copy);
}

/* ---- us_reload_check --------------------------------------------------------- */

/* Reload check of a directory with the given files replaced, on the seed
 * story at t (30: a gang to place, background to evict).  Returns the
 * result; err filled; the policy (if any) freed, after checking that the
 * state was left as it was. */
static int reload_src(double t, const char *fs, const char *pl, const char *bg,
                      const us_policy_limits *lim, us_err *err) {
    char dir[64];
    us_scenario sc;
    us_state before;
    us_policy *out = (us_policy *)1;
    us_cycle_opts o;
    static char a[1 << 16], b[1 << 16];
    int rc = -1;

    us_cycle_opts_default(&o);
    if (make_dir(dir, fs, pl, bg) < 0 || seed_state(&sc, t) < 0) {
        us_err_set(err, US_EIO, "test setup failed");
        return -2;
    }
    CHECK(us_state_clone(&before, &sc.state) == 0);
    rc = us_reload_check(&sc.state, t, dir, lim, &o, &out, err);
    CHECK(rc == 0 ? out != NULL : out == NULL);
    if (out) CHECK_STR(us_policy_dir(out), dir);
    us_policy_free(out);
    remove_dir(dir);

    /* the state is unchanged: the next cycle decides as on the copy */
    us_cycle_log la, lb;
    us_err e2 = {0};
    us_cycle_log_init(&la);
    us_cycle_log_init(&lb);
    CHECK(us_cycle_run(&sc.state, NULL, t, &o, &la, NULL, NULL, &e2) == 0);
    CHECK(us_cycle_run(&before, NULL, t, &o, &lb, NULL, NULL, &e2) == 0);
    log_text(&la, a, sizeof a);
    log_text(&lb, b, sizeof b);
    CHECK_STR(a, b);
    us_cycle_log_free(&la);
    us_cycle_log_free(&lb);
    us_state_free(&before);
    us_scenario_free(&sc);
    return rc;
}

static void refused(const char *what, int rc, const us_err *err, const char *want1,
                    const char *want2) {
    if (rc != -1 || !strstr(err->msg, want1) || (want2 && !strstr(err->msg, want2))) {
        fprintf(stderr, "  %s: rc %d, \"%s\" (wanted \"%s\"%s%s)\n", what, rc, err->msg, want1,
                want2 ? " and " : "", want2 ? want2 : "");
        check_cur_failed = 1;
    }
}

TEST(reload_accepts_good_policies) {
    us_err err = {0};
    int rc = reload_src(30, NULL, NULL, NULL, NULL, &err);
    if (rc != 0) fprintf(stderr, "  %s\n", err.msg);
    CHECK(rc == 0);
}

TEST(reload_refuses_what_does_not_load) {
    us_err err = {0};
    us_policy *out = (us_policy *)1;
    us_scenario sc;
    if (seed_state(&sc, 0) < 0) {
        CHECK(0);
        return;
    }
    int rc = us_reload_check(&sc.state, 0, "/nonexistent/us-policies", NULL, NULL, &out, &err);
    CHECK(rc == -1 && out == NULL);
    CHECK(err.code == US_EIO);
    CHECK_HAS(err.msg, "cannot open the directory: No such file or directory");
    us_scenario_free(&sc);

    rc = reload_src(30, NULL, "local M = {}\nlocal x = = 1\nreturn M\n", NULL, NULL, &err);
    refused("syntax", rc, &err, "placement.lua:2:", NULL);
    rc = reload_src(30, NULL, "return { scor = function() return 0 end }\n", NULL, NULL, &err);
    refused("missing function", rc, &err, "placement.lua: must return a table with a function \"score\"", NULL);
    rc = reload_src(30, NULL, NULL, "local x = 1\nerror('boom')\n", NULL, &err);
    refused("main chunk error", rc, &err, "background.lua:2: boom", NULL);
}

/* Failures only a call shows: each is caught by the dry run, named with
 * file:line, and the reason says it was the dry run. */
static const char *BROKEN_SCORE = "local M = {}\nfunction M.score(pod, node)\n  return pod.nope.x\nend\nreturn M\n";
static const char *LOOP_SCORE = "local M = {}\nfunction M.score(pod, node)\n  while true do end\nend\nreturn M\n";
static const char *RECURSE_SCORE =
    "local M = {}\nlocal function f(n)\n  return f(n + 1) + 1\nend\n"
    "function M.score(pod, node)\n  return f(1)\nend\nreturn M\n";
static const char *BOMB_REOFFER =
    "local M = {}\nfunction M.reoffer(view)\n  local t = {}\n"
    "  local s = 'x' for i = 1, 64 do t[i] = s s = s .. s end\nend\nreturn M\n";
static const char *OVERFILL_REOFFER =
    "local M = {}\nfunction M.reoffer(view)\n  local keep, place = {}, {}\n"
    "  for _, p in ipairs(view.running) do keep[#keep + 1] = p.name end\n"
    "  for _, p in ipairs(view.pending) do\n"
    "    if p.candidates[1] then place[p.name] = p.candidates[1] end\n"
    "  end\n  return { keep = keep, place = place }\nend\nreturn M\n";
static const char *GREEDY_FAIRSHARE =
    "local M = {}\nfunction M.compute(view)\n  local out = {}\n"
    "  for _, q in ipairs(view.queues) do out[q.name] = { gpu = 1000, cpu = 0, memory = 0 } end\n"
    "  return out\nend\nreturn M\n";
static const char *WRONG_TYPE_FAIRSHARE =
    "local M = {}\nfunction M.compute(view)\n  return 42\nend\nreturn M\n";

TEST(reload_dry_run_catches_runtime_failures) {
    us_err err = {0};
    us_policy_limits lim = {200000, (size_t)16 << 20, 60000}; /* time: not what is tested */
    int rc;

    rc = reload_src(30, NULL, BROKEN_SCORE, NULL, NULL, &err);
    refused("error", rc, &err, "dry run on the current state (t=30s)", "placement.lua:3: attempt to index");
    CHECK(err.code == US_EPOLICY);
    rc = reload_src(30, NULL, LOOP_SCORE, NULL, &lim, &err);
    refused("loop", rc, &err, "placement.lua:3: instruction budget exceeded (200000 instructions)", NULL);
    rc = reload_src(30, NULL, RECURSE_SCORE, NULL, &lim, &err);
    refused("recursion", rc, &err, "placement.lua:3:", "PolicyFailed");
    rc = reload_src(30, NULL, NULL, BOMB_REOFFER, &lim, &err);
    refused("memory bomb", rc, &err, "background.lua:4: memory budget exceeded (16777216 bytes)", NULL);
}

TEST(reload_dry_run_enforces_the_result_contract) {
    us_err err = {0};
    int rc;
    rc = reload_src(30, NULL, NULL, OVERFILL_REOFFER, NULL, &err);
    refused("overfill", rc, &err, "PolicyRejected: background.lua: result rejected", "over capacity");
    rc = reload_src(30, GREEDY_FAIRSHARE, NULL, NULL, NULL, &err);
    refused("greedy fair share", rc, &err, "PolicyRejected: fairshare.lua: result rejected", "more gpu than");
    rc = reload_src(30, WRONG_TYPE_FAIRSHARE, NULL, NULL, NULL, &err);
    refused("wrong type", rc, &err, "fairshare.lua: compute must return a table, got number", NULL);
    /* the message is the event's, without the note about falling back */
    CHECK(!strstr(err.msg, "this cycle uses"));
}

/* On a snapshot that asks no placement (an empty cluster), the built-in
 * check scenario calls what the dry run could not. */
TEST(reload_exercises_every_function) {
    us_scenario sc;
    us_err err = {0};
    us_policy *out = NULL;
    char dir[64];
    if (load_json(&sc, "{\"name\":\"empty\"}") < 0) {
        CHECK(0);
        return;
    }
    CHECK(make_dir(dir, NULL, BROKEN_SCORE, NULL) == 0);
    int rc = us_reload_check(&sc.state, 0, dir, NULL, NULL, &out, &err);
    refused("empty cluster", rc, &err, "dry run on the built-in check scenario", "placement.lua:3:");
    remove_dir(dir);

    CHECK(make_dir(dir, NULL, NULL, NULL) == 0);
    rc = us_reload_check(&sc.state, 0, dir, NULL, NULL, &out, &err);
    CHECK(rc == 0 && out != NULL);
    /* a fresh instance goes live: no calls counted from the dry runs */
    for (int m = 0; out && m < US_POLICY_NFN; m++) CHECK(us_policy_calls(out, (us_policy_fn)m) == 0);
    us_policy_free(out);
    remove_dir(dir);
    us_scenario_free(&sc);
}

TEST(builtin_check_scenario_calls_every_function) {
    us_scenario sc;
    us_err err = {0};
    us_check_findings f = {0};
    char path[512];
    snprintf(path, sizeof path, "%s/policies", root());
    us_policy *p = us_policy_load(path, NULL, &err);
    CHECK(p != NULL);
    CHECK(us_check_load_builtin(&sc, &err) == 0);
    if (!p) return;
    CHECK(us_check_run_scenario(&sc, p, NULL, &f, &err) == 0);
    CHECK(f.n == 0);
    for (int m = 0; m < US_POLICY_NFN; m++) CHECK(us_policy_calls(p, (us_policy_fn)m) > 0);
    us_check_findings_free(&f);
    us_scenario_free(&sc);

    /* and it has everything a reoffer is about: an eviction */
    us_sim_result res;
    CHECK(us_check_load_builtin(&sc, &err) == 0);
    CHECK(us_sim_run(&sc, NULL, NULL, &res, &err) == 0);
    CHECK(res.totals.background_evictions > 0);
    us_sim_result_free(&res);
    us_scenario_free(&sc);
    us_policy_free(p);
}

/* ---- the simulator's timeline reloads ---------------------------------------- */

/* The seed story with reloads from dirs[] at times[]; runs it with the
 * caller's policy pol. */
static int run_with_reloads(us_policy *pol, const char *const *dirs, const double *times, size_t n,
                            us_sim_result *res, us_scenario *sc) {
    char path[512];
    us_err err = {0};
    snprintf(path, sizeof path, "%s/examples/seed-story.json", root());
    char *text = slurp(path);
    if (!text) return -1;
    /* splice the reloads into the timeline array */
    char *tl = strstr(text, "\"timeline\"");
    char *open = tl ? strchr(tl, '[') : NULL;
    if (!open) {
        free(text);
        return -1;
    }
    size_t cap = strlen(text) + n * 512 + 16;
    char *doc = malloc(cap);
    size_t at = (size_t)(open + 1 - text);
    memcpy(doc, text, at);
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(doc + at, cap - at,
                               "{\"at\": %g, \"action\": \"reload_policies\", \"dir\": \"%s\"},",
                               times[i], dirs[i]);
    snprintf(doc + at, cap - at, "%s", open + 1);
    free(text);
    int rc = us_scenario_load_string(sc, doc, strlen(doc), NULL, &err);
    free(doc);
    if (rc < 0) {
        fprintf(stderr, "  %s\n", err.msg);
        return -1;
    }
    us_sim_opts o;
    us_sim_opts_default(&o);
    rc = us_sim_run(sc, pol, &o, res, &err);
    if (rc < 0) fprintf(stderr, "  %s\n", err.msg);
    return rc;
}

static const us_event *find_event(const us_sim_result *res, const char *reason, int *cycle) {
    for (size_t i = 0; i < res->ncycles; i++)
        for (size_t k = 0; k < res->cycles[i].log.nevents; k++)
            if (!strcmp(res->cycles[i].log.events[k].reason, reason)) {
                if (cycle) *cycle = res->cycles[i].index;
                return &res->cycles[i].log.events[k];
            }
    return NULL;
}

/* The caller's policy is lent: reloads over it (good ones and refused ones)
 * never free it, and it is usable afterwards.  ASan checks the rest. */
TEST(sim_reload_leaves_the_callers_policy_alone) {
    char good1[64], good2[64], bad[64], path[512];
    us_err err = {0};
    us_sim_result res;
    us_scenario sc;
    snprintf(path, sizeof path, "%s/policies", root());
    us_policy *mine = us_policy_load(path, NULL, &err);
    CHECK(mine != NULL);
    CHECK(make_dir(good1, NULL, "return { score = function() return 1 end }\n", NULL) == 0);
    CHECK(make_dir(good2, NULL, "return { score = function() return 2 end }\n", NULL) == 0);
    CHECK(make_dir(bad, NULL, BROKEN_SCORE, NULL) == 0);
    if (!mine) return;

    const char *dirs[] = {good1, bad, good2, good1};
    const double times[] = {20, 25, 50, 300};
    CHECK(run_with_reloads(mine, dirs, times, 4, &res, &sc) == 0);
    int c1 = 0, c2 = 0;
    const us_event *ok = find_event(&res, "PolicyReloaded", &c1);
    const us_event *no = find_event(&res, "PolicyReloadRefused", &c2);
    CHECK(ok && no);
    if (ok) CHECK_HAS(ok->message, us_policy_id(mine));  /* "... replaces <mine>" */
    if (no) {
        CHECK_STR(no->type, "Warning");
        CHECK_HAS(no->message, "placement.lua:3:");
        CHECK_HAS(no->message, bad);
    }
    CHECK(c1 == 3 && c2 == 4);
    /* per-cycle ids: mine until the first reload, then good1's */
    CHECK_STR(res.cycles[0].policy, us_policy_id(mine));
    CHECK(strcmp(res.cycles[2].policy, us_policy_id(mine)) != 0);
    CHECK_STR(res.cycles[3].policy, res.cycles[2].policy);  /* refused: unchanged */
    us_sim_result_free(&res);
    us_scenario_free(&sc);

    CHECK(strlen(us_policy_id(mine)) == 16);
    CHECK(us_policy_previous(mine) == NULL);
    us_policy_free(mine);

    /* with the built-in policies in force, the first reload has no
     * previous version; the last one's id is reported at the end */
    const char *one[] = {good2};
    const double at[] = {0};
    CHECK(run_with_reloads(NULL, one, at, 1, &res, &sc) == 0);
    CHECK(strcmp(res.cycles[0].policy, "builtin") != 0);
    CHECK_STR(res.policy, res.cycles[0].policy);
    const us_event *e = find_event(&res, "PolicyReloaded", NULL);
    CHECK(e != NULL);
    if (e) CHECK_HAS(e->message, "replaces builtin");
    us_sim_result_free(&res);
    us_scenario_free(&sc);
    remove_dir(good1);
    remove_dir(good2);
    remove_dir(bad);
}

/* A version that passed its check but fails later falls back to the last
 * good version, not the built-in: decisions stay those of that version. */
TEST(sim_falls_back_to_the_last_good_version) {
    char spread[64], fails_later[64];
    us_err err = {0};
    us_sim_result only, both;
    us_scenario sa, sb;
    const char *SPREAD =
        "local M = {}\nfunction M.score(pod, node)\n"
        "  return -(1000 * (node.allocated.gpu + pod.requests.gpu) / node.capacity.gpu)\nend\nreturn M\n";
    /* fails for eval-b only, which arrives at t=60, after the reload */
    const char *LATER =
        "local M = {}\nfunction M.score(pod, node)\n"
        "  if pod.workload == 'eval-b' then error('no eval today') end\n"
        "  return 0\nend\nreturn M\n";
    CHECK(make_dir(spread, NULL, SPREAD, NULL) == 0);
    CHECK(make_dir(fails_later, NULL, LATER, NULL) == 0);
    us_policy *v1 = us_policy_load(spread, NULL, &err);
    us_policy *v1b = us_policy_load(spread, NULL, &err);
    CHECK(v1 && v1b);
    if (!v1 || !v1b) return;
    const char *dirs[] = {fails_later};
    const double times[] = {50};
    CHECK(run_with_reloads(v1, NULL, NULL, 0, &only, &sa) == 0);
    CHECK(run_with_reloads(v1b, dirs, times, 1, &both, &sb) == 0);
    int cyc = 0;
    const us_event *f = find_event(&both, "PolicyFailed", &cyc);
    CHECK(f != NULL);
    if (f) {
        CHECK_HAS(f->message, "placement.lua:3: no eval today");
        char want[128];
        snprintf(want, sizeof want, "uses the previous version (%s)", us_policy_id(v1));
        CHECK_HAS(f->message, want);
    }
    /* the eval-b placement is v1's (spread) in both runs */
    static char a[1 << 16], b[1 << 16];
    CHECK(cyc == 7 && only.ncycles > 7 && both.ncycles > 7);
    if (cyc == 7 && only.ncycles > 7 && both.ncycles > 7) {
        us_cycle_log la = only.cycles[6].log, lb = both.cycles[6].log;
        la.nevents = lb.nevents = 0;  /* decisions only */
        log_text(&la, a, sizeof a);
        log_text(&lb, b, sizeof b);
        CHECK_STR(a, b);
        CHECK_HAS(a, "eval-b-0");
    }
    us_sim_result_free(&only);
    us_sim_result_free(&both);
    us_scenario_free(&sa);
    us_scenario_free(&sb);
    us_policy_free(v1);
    us_policy_free(v1b);
    remove_dir(spread);
    remove_dir(fails_later);
}

/* math.random is seeded per cycle: the same run twice gives the same
 * output, and a refused reload's dry run draws nothing from the live
 * policy's generator. */
TEST(random_policies_stay_deterministic) {
    char rnd[64], bad[64];
    us_err err = {0};
    us_sim_result r1, r2, r3;
    us_scenario s1, s2, s3;
    static char a[1 << 16], b[1 << 16];
    const char *RANDOM = "local M = {}\nfunction M.score(pod, node)\n  return math.random(1, 1000)\nend\nreturn M\n";
    CHECK(make_dir(rnd, NULL, RANDOM, NULL) == 0);
    CHECK(make_dir(bad, NULL, BROKEN_SCORE, NULL) == 0);
    us_policy *p1 = us_policy_load(rnd, NULL, &err), *p2 = us_policy_load(rnd, NULL, &err);
    us_policy *p3 = us_policy_load(rnd, NULL, &err);
    CHECK(p1 && p2 && p3);
    if (!p1 || !p2 || !p3) return;
    const char *dirs[] = {bad, bad};
    const double times[] = {30, 60};
    CHECK(run_with_reloads(p1, NULL, NULL, 0, &r1, &s1) == 0);
    CHECK(run_with_reloads(p2, NULL, NULL, 0, &r2, &s2) == 0);
    CHECK(run_with_reloads(p3, dirs, times, 2, &r3, &s3) == 0);
    CHECK(r1.ncycles == r2.ncycles && r1.ncycles == r3.ncycles);
    for (size_t i = 0; i < r1.ncycles && i < r2.ncycles && i < r3.ncycles; i++) {
        us_cycle_log l1 = r1.cycles[i].log, l2 = r2.cycles[i].log, l3 = r3.cycles[i].log;
        l1.nevents = l2.nevents = l3.nevents = 0;
        log_text(&l1, a, sizeof a);
        log_text(&l2, b, sizeof b);
        CHECK_STR(a, b);
        log_text(&l3, b, sizeof b);
        CHECK_STR(a, b);
    }
    CHECK(find_event(&r3, "PolicyReloadRefused", NULL) != NULL);
    us_sim_result_free(&r1);
    us_sim_result_free(&r2);
    us_sim_result_free(&r3);
    us_scenario_free(&s1);
    us_scenario_free(&s2);
    us_scenario_free(&s3);
    us_policy_free(p1);
    us_policy_free(p2);
    us_policy_free(p3);
    remove_dir(rnd);
    remove_dir(bad);
}

/* Each cycle starts from its own seed: draws made in earlier cycles (here
 * by a workload only one of two runs has) do not shift a later cycle's. */
static const char *SEED_DOC =
    "{\"name\":\"seed\",\"cycle_interval\":10,\"horizon\":60,"
    "\"nodes\":[{\"name\":\"n1\",\"gpu\":8},{\"name\":\"n2\",\"gpu\":8},{\"name\":\"n3\",\"gpu\":8},"
    "{\"name\":\"n4\",\"gpu\":8},{\"name\":\"n5\",\"gpu\":8},{\"name\":\"n6\",\"gpu\":8}],"
    "\"queues\":[{\"name\":\"q\",\"resources\":{\"gpu\":{\"quota\":48}}}],"
    "\"workloads\":[%s{\"name\":\"y\",\"queue\":\"q\",\"replicas\":12,\"min_member\":1,"
    "\"requests\":{\"gpu\":1},\"submit_at\":40}]}";

TEST(random_draws_start_from_the_cycle_seed) {
    char rnd[64], doc[2048];
    us_err err = {0};
    static char a[1 << 16], b[1 << 16];
    const char *RANDOM = "local M = {}\nfunction M.score(pod, node)\n  return math.random(1, 1000000)\nend\nreturn M\n";
    const char *extra = "{\"name\":\"x\",\"queue\":\"q\",\"replicas\":5,\"min_member\":1,"
                        "\"requests\":{\"gpu\":1},\"duration\":10},";
    us_sim_result r[2];
    CHECK(make_dir(rnd, NULL, RANDOM, NULL) == 0);
    for (int i = 0; i < 2; i++) {
        us_scenario sc;
        snprintf(doc, sizeof doc, SEED_DOC, i ? extra : "");
        us_policy *p = us_policy_load(rnd, NULL, &err);
        CHECK(p != NULL);
        CHECK(load_json(&sc, doc) == 0);
        CHECK(us_sim_run(&sc, p, NULL, &r[i], &err) == 0);
        us_scenario_free(&sc);
        us_policy_free(p);
    }
    /* cycle 5 (t=40) places y: x is long gone in the second run */
    CHECK(r[0].ncycles >= 5 && r[1].ncycles >= 5);
    if (r[0].ncycles >= 5 && r[1].ncycles >= 5) {
        us_cycle_log l0 = r[0].cycles[4].log, l1 = r[1].cycles[4].log;
        l0.nevents = l1.nevents = 0;
        log_text(&l0, a, sizeof a);
        log_text(&l1, b, sizeof b);
        CHECK(l0.ndecisions == 12);
        CHECK_STR(a, b);
    }
    us_sim_result_free(&r[0]);
    us_sim_result_free(&r[1]);
    remove_dir(rnd);
}

int main(void) {
    RUN(clone_is_deep_and_decides_the_same);
    RUN(clone_of_pool_overrides_and_empty_state);
    RUN(reload_accepts_good_policies);
    RUN(reload_refuses_what_does_not_load);
    RUN(reload_dry_run_catches_runtime_failures);
    RUN(reload_dry_run_enforces_the_result_contract);
    RUN(reload_exercises_every_function);
    RUN(builtin_check_scenario_calls_every_function);
    RUN(sim_reload_leaves_the_callers_policy_alone);
    RUN(sim_falls_back_to_the_last_good_version);
    RUN(random_policies_stay_deterministic);
    RUN(random_draws_start_from_the_cycle_seed);
    return check_report();
}
