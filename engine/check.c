/*
 * check.c — linting a policy directory (check.h): per-file syntax, the
 * required functions, the result contract on a scenario, and the built-in
 * check scenario that exercises every policy function.
 *
 * It owns the findings and the report's wording.  It must never run a
 * policy outside the sandbox (only policy.c runs policy code; the syntax
 * check here compiles without running), never write to the policy
 * directory, and never judge a result itself: the invariants are the
 * cycle's, read back from the events it logs.
 */
#include "check.h"

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "policysrc.h"
#include "sim.h"

/* Cycle 1 (t=0) calls every function: the fair share of a queue tree; a
 * gang and a pinned evaluation job to place on three nodes; four burn-in
 * pods running on n2 and n3 of which the AI plan needs some (evictions),
 * two more burn-in pods and a daemonset pending.  Later cycles see the
 * pipelined pods bind and the evicted pods come back pending. */
const char us_check_scenario_json[] =
    "{\n"
    "  \"name\": \"built-in check\",\n"
    "  \"cycle_interval\": 10,\n"
    "  \"horizon\": 30,\n"
    "  \"nodes\": [\n"
    "    {\"name\": \"n1\", \"cpu\": \"32\", \"memory\": \"256Gi\", \"gpu\": 4, \"labels\": {\"zone\": \"a\"}},\n"
    "    {\"name\": \"n2\", \"cpu\": \"32\", \"memory\": \"256Gi\", \"gpu\": 4, \"labels\": {\"zone\": \"b\"}},\n"
    "    {\"name\": \"n3\", \"cpu\": \"32\", \"memory\": \"256Gi\", \"gpu\": 4, \"labels\": {\"zone\": \"b\"}}\n"
    "  ],\n"
    "  \"queues\": [\n"
    "    {\"name\": \"org\", \"resources\": {\"gpu\": {\"quota\": 8, \"over_quota_weight\": 1},\n"
    "      \"cpu\": {\"quota\": -1}, \"memory\": {\"quota\": -1}}},\n"
    "    {\"name\": \"team-a\", \"parent\": \"org\", \"priority\": 1,\n"
    "      \"resources\": {\"gpu\": {\"quota\": 4, \"over_quota_weight\": 2}}},\n"
    "    {\"name\": \"team-b\", \"parent\": \"org\",\n"
    "      \"resources\": {\"gpu\": {\"quota\": 2, \"over_quota_weight\": 1, \"limit\": 6}}},\n"
    "    {\"name\": \"infra-bg\", \"resources\": {\n"
    "      \"gpu\": {\"quota\": 0, \"over_quota_weight\": 0},\n"
    "      \"cpu\": {\"quota\": 0, \"over_quota_weight\": 0},\n"
    "      \"memory\": {\"quota\": 0, \"over_quota_weight\": 0}}}\n"
    "  ],\n"
    "  \"workloads\": [\n"
    "    {\"name\": \"serve\", \"queue\": \"team-a\", \"priority\": \"inference\",\n"
    "     \"requests\": {\"gpu\": 1, \"cpu\": \"4\", \"memory\": \"16Gi\"},\n"
    "     \"pods\": [{\"node\": \"n1\", \"state\": \"running\"}]},\n"
    "    {\"name\": \"burn\", \"queue\": \"infra-bg\", \"labels\": {\"kai.scheduler/background\": \"true\"},\n"
    "     \"controller\": \"deployment\", \"replicas\": 6, \"termination_grace\": 5,\n"
    "     \"requests\": {\"gpu\": 1, \"cpu\": \"1\", \"memory\": \"1Gi\"},\n"
    "     \"pods\": [{\"node\": \"n2\", \"state\": \"running\"}, {\"node\": \"n2\", \"state\": \"running\"},\n"
    "              {\"node\": \"n3\", \"state\": \"running\"}, {\"node\": \"n3\", \"state\": \"running\"}]},\n"
    "    {\"name\": \"agent\", \"queue\": \"infra-bg\", \"labels\": {\"kai.scheduler/background\": \"true\"},\n"
    "     \"controller\": \"daemonset\", \"termination_grace\": 5,\n"
    "     \"requests\": {\"cpu\": \"100m\", \"memory\": \"64Mi\"}},\n"
    "    {\"name\": \"train\", \"queue\": \"team-a\", \"replicas\": 2, \"min_member\": 2,\n"
    "     \"requests\": {\"gpu\": 3, \"cpu\": \"8\", \"memory\": \"64Gi\"}},\n"
    "    {\"name\": \"eval\", \"queue\": \"team-b\", \"replicas\": 2, \"node_selector\": {\"zone\": \"b\"},\n"
    "     \"requests\": {\"gpu\": 1, \"cpu\": \"2\", \"memory\": \"8Gi\"}}\n"
    "  ]\n"
    "}\n";

int us_check_load_builtin(us_scenario *sc, us_err *err) {
    return us_scenario_load_string(sc, us_check_scenario_json, sizeof us_check_scenario_json - 1,
                                   NULL, err);
}

/* ---- findings ---------------------------------------------------------- */

void us_check_findings_free(us_check_findings *f) {
    for (size_t i = 0; i < f->n; i++) {
        free(f->items[i].file);
        free(f->items[i].reason);
        free(f->items[i].message);
    }
    free(f->items);
    memset(f, 0, sizeof *f);
}

static bool is_policy_event(const us_event *e) {
    return e->reason && e->object &&
           (strcmp(e->reason, "PolicyFailed") == 0 || strcmp(e->reason, "PolicyRejected") == 0);
}

/* The event's message up to the note plan.c appends about the fallback
 * ("; this cycle uses ..."): in a check nothing falls back, the policy is
 * simply wrong. */
static size_t message_len(const char *msg) {
    const char *note = strstr(msg, "; this cycle uses ");
    return note ? (size_t)(note - msg) : strlen(msg);
}

static bool starts_with_file(const char *msg, const char *file) {
    size_t n = strlen(file);
    return strncmp(msg, file, n) == 0 && msg[n] == ':';
}

int us_check_collect(us_check_findings *f, const us_cycle_log *log, int cycle, double time) {
    int rc = -1;
    char *msg = NULL;
    for (size_t i = 0; i < log->nevents; i++) {
        const us_event *e = &log->events[i];
        if (!is_policy_event(e)) continue;
        const char *text = e->message ? e->message : "";
        size_t len = message_len(text);
        /* every message should already start with its file; make sure */
        bool named = starts_with_file(text, e->object);
        size_t size = len + (named ? 0 : strlen(e->object) + 2) + 1;
        if (!(msg = malloc(size))) goto cleanup;
        if (named) snprintf(msg, size, "%.*s", (int)len, text);
        else snprintf(msg, size, "%s: %.*s", e->object, (int)len, text);

        size_t k = 0;
        while (k < f->n && !(strcmp(f->items[k].file, e->object) == 0 &&
                             strcmp(f->items[k].message, msg) == 0))
            k++;
        if (k < f->n) {
            f->items[k].count++;
            free(msg);
            msg = NULL;
            continue;
        }
        if (f->n == f->cap) {
            size_t ncap = f->cap ? 2 * f->cap : 8;
            us_check_finding *x = realloc(f->items, ncap * sizeof *x);
            if (!x) goto cleanup;
            f->items = x;
            f->cap = ncap;
        }
        us_check_finding *it = &f->items[f->n];
        memset(it, 0, sizeof *it);
        it->file = strdup(e->object);
        it->reason = strdup(e->reason);
        if (!it->file || !it->reason) {
            free(it->file);
            free(it->reason);
            goto cleanup;
        }
        it->message = msg;
        msg = NULL;
        it->cycle = cycle;
        it->time = time;
        it->count = 1;
        f->n++;
    }
    rc = 0;
cleanup:
    free(msg);
    return rc;
}

bool us_check_offers_background(const us_state *st) {
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        const us_workload *w = &st->workloads[p->workload];
        if (p->gone || !w->background || w->blocked || w->state != US_WL_ACTIVE) continue;
        if (p->state == US_POD_PENDING) return true;
    }
    return false;
}

bool us_check_has_background(const us_state *st) {
    for (size_t i = 0; i < st->nworkloads; i++)
        if (st->workloads[i].background && !st->workloads[i].blocked) return true;
    return false;
}

void us_check_drop_reloads(us_scenario *sc) {
    size_t j = 0;
    for (size_t i = 0; i < sc->ntimeline; i++) {
        if (sc->timeline[i].action == US_TL_RELOAD_POLICIES) {
            free(sc->timeline[i].dir);
            continue;
        }
        sc->timeline[j++] = sc->timeline[i];
    }
    sc->ntimeline = j;
}

int us_check_run_scenario(us_scenario *sc, us_policy *pol, const us_cycle_opts *o,
                          us_check_findings *f, us_err *err) {
    us_sim_opts so;
    us_sim_result res;
    int rc = -1;

    if (us_policy_previous(pol))
        return us_err_set(err, US_EINVAL, "a contract check runs a policy alone, without a "
                          "previous version to fall back to");
    us_check_drop_reloads(sc);
    us_sim_opts_default(&so);
    if (o) so.cycle = *o;
    if (us_sim_run(sc, pol, &so, &res, err) < 0) return -1;
    for (size_t i = 0; i < res.ncycles; i++)
        if (us_check_collect(f, &res.cycles[i].log, res.cycles[i].index, res.cycles[i].time) < 0) {
            us_err_nomem(err);
            goto cleanup;
        }
    rc = 0;
cleanup:
    us_sim_result_free(&res);
    return rc;
}

/* ---- the lint ---------------------------------------------------------- */

void us_check_opts_default(us_check_opts *o) {
    memset(o, 0, sizeof *o);
    us_cycle_opts_default(&o->cycle);
}

/* A problem line: messages that start with a file name get the directory
 * in front, so that the line reads path:line: message, as compilers write
 * them and CI annotators read them. */
static void problem(FILE *out, const char *dir, const char *msg, const char *extra) {
    bool named = false;
    for (int m = 0; m < US_POLICY_NFN; m++) named = named || starts_with_file(msg, us_policy_files[m]);
    if (named) fprintf(out, "%s/%s", dir, msg);
    else fprintf(out, "%s: %s", dir, msg);
    fprintf(out, "%s\n", extra ? extra : "");
}

/* Compile each file without running it: every file's syntax errors are
 * reported, not only the first file's.  Returns the number of problems,
 * or -1 when memory runs out. */
static int check_syntax(FILE *out, const char *dir) {
    int problems = 0;
    us_err e = {0};
    if (us_policysrc_check_dir(dir, &e) < 0) {
        problem(out, dir, e.msg, NULL);
        return 1;
    }
    for (int m = 0; m < US_POLICY_NFN; m++) {
        char why[1200], chunk[64];
        char *buf = NULL;
        size_t len = 0;
        bool is_default = false;
        if (us_policysrc_read(dir, m, &buf, &len, &is_default, &e) < 0) {
            if (e.code == US_ENOMEM) return -1;
            problem(out, dir, e.msg, NULL);
            problems++;
            continue;
        }
        /* Compiling runs no code and allocates in proportion to the file,
         * which is capped: a plain state is enough. */
        lua_State *L = luaL_newstate();
        if (!L) {
            free(buf);
            return -1;
        }
        snprintf(chunk, sizeof chunk, "@%s", us_policy_files[m]);
        int st = luaL_loadbufferx(L, buf, len, chunk, "t");
        if (st != LUA_OK) {
            const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error";
            if (starts_with_file(msg, us_policy_files[m])) {
                problem(out, dir, msg, NULL);
            } else {
                snprintf(why, sizeof why, "%s: %s", us_policy_files[m], msg);
                problem(out, dir, why, NULL);
            }
            problems++;
        }
        lua_close(L);
        free(buf);
    }
    return problems;
}

static int print_findings(FILE *out, const char *dir, const us_check_findings *f) {
    for (size_t i = 0; i < f->n; i++) {
        const us_check_finding *it = &f->items[i];
        char extra[160];
        if (it->count > 1)
            snprintf(extra, sizeof extra, "  (%s; first in cycle %d, t=%gs; %d times in all)",
                     it->reason, it->cycle, it->time, it->count);
        else
            snprintf(extra, sizeof extra, "  (%s in cycle %d, t=%gs)", it->reason, it->cycle,
                     it->time);
        problem(out, dir, it->message, extra);
    }
    return (int)f->n;
}

/* Run the contract on one scenario with a fresh load of dir (a policy's own
 * state must not carry over from one scenario to the next).  Fills calls[]
 * with how often each function ran.  Returns the number of problems, or -1
 * with err. */
static int check_contract(FILE *out, const char *dir, us_scenario *sc, const us_check_opts *o,
                          unsigned long calls[US_POLICY_NFN], us_err *err) {
    us_check_findings f = {0};
    us_err lerr = {0};
    int rc = -1;
    char name[256];
    us_policy *pol = us_policy_load(dir, &o->limits, &lerr);

    snprintf(name, sizeof name, "%s", sc->name && *sc->name ? sc->name : "(unnamed)");
    if (!pol) {
        /* it loaded a moment ago: the files are changing under us */
        problem(out, dir, lerr.msg, "  (on reloading for the contract check)");
        rc = 1;
        goto cleanup;
    }
    if (us_check_run_scenario(sc, pol, &o->cycle, &f, err) < 0) goto cleanup;
    for (int m = 0; m < US_POLICY_NFN; m++) calls[m] = us_policy_calls(pol, (us_policy_fn)m);
    rc = print_findings(out, dir, &f);
    fprintf(out, "  %-4s result contract on scenario \"%s\": compute called %lu times, score %lu, "
            "reoffer %lu\n", rc ? "FAIL" : "ok", name, calls[0], calls[1], calls[2]);
cleanup:
    us_check_findings_free(&f);
    us_policy_free(pol);
    return rc;
}

/* ---- scores: a score must depend on its views alone ------------------------ */

/* How a run scores: with the class cache, kept from cycle to cycle (as
 * every run does); with the class cache found afresh each cycle
 * (`--full-cycles`); with every (pod, node) pair scored on its own. */
typedef enum { SCORES_KEPT, SCORES_AFRESH, SCORES_UNCACHED } score_mode;

/* Run a copy of sc (its state cloned; sc is left as it was) with a fresh
 * load of dir, scoring as mode says.  0, or -1 with err. */
static int run_copy(const us_scenario *sc, const char *dir, const us_check_opts *o, score_mode mode,
                    us_sim_result *res, us_err *err) {
    us_scenario copy = *sc; /* shares name and timeline, which a run only reads */
    us_sim_opts so;
    us_policy *pol = NULL;
    int rc = -1;
    if (us_state_clone(&copy.state, &sc->state) < 0) return us_err_nomem(err);
    if (!(pol = us_policy_load(dir, &o->limits, err))) goto cleanup;
    us_sim_opts_default(&so);
    so.cycle = o->cycle;
    so.cycle.full_cycles = mode != SCORES_KEPT;
    so.cycle.score_cache = mode != SCORES_UNCACHED;
    so.cycle.profile = NULL;
    rc = us_sim_run(&copy, pol, &so, res, err);
cleanup:
    us_policy_free(pol);
    us_state_free(&copy.state);
    return rc;
}

static bool same_str(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

static bool same_decision(const us_decision *a, const us_decision *b) {
    return a->op == b->op && a->action == b->action && same_str(a->pod, b->pod) && same_str(a->node, b->node) &&
           same_str(a->evictor, b->evictor);
}

static void describe(char *buf, size_t n, const us_decision *d) {
    if (!d) snprintf(buf, n, "nothing");
    else snprintf(buf, n, "%s %s %s %s", us_op_names[d->op], d->pod ? d->pod : "-",
                  d->op == US_OP_EVICT ? "from" : "on", d->node ? d->node : "-");
}

/* The first decision where a and b differ: 1 with *cycle, *da and *db
 * (either may be "nothing") written; 0 when they decide the same. */
static int first_difference(const us_sim_result *a, const us_sim_result *b, const us_sim_cycle **cycle,
                            char *da, char *db, size_t n) {
    for (size_t i = 0; i < a->ncycles || i < b->ncycles; i++) {
        const us_cycle_log *la = i < a->ncycles ? &a->cycles[i].log : NULL,
                           *lb = i < b->ncycles ? &b->cycles[i].log : NULL;
        size_t na = la ? la->ndecisions : 0, nb = lb ? lb->ndecisions : 0;
        for (size_t k = 0; k < na || k < nb; k++) {
            const us_decision *x = k < na ? &la->decisions[k] : NULL, *y = k < nb ? &lb->decisions[k] : NULL;
            if (x && y && same_decision(x, y)) continue;
            describe(da, n, x);
            describe(db, n, y);
            *cycle = i < a->ncycles ? &a->cycles[i] : &b->cycles[i];
            return 1;
        }
    }
    return 0;
}

/* The engine scores a (pod class, node class) pair once (nodeclass.h) and
 * keeps the score for later cycles, so a score that reads anything but its
 * two views decides differently from what it means.  Runs sc three ways
 * and compares the decisions: scores kept across cycles against every
 * cycle scoring afresh (a score that depends on what earlier cycles saw,
 * such as state another policy file left in a shared module), then that
 * against every pair scored on its own (a score that reads names).  Prints
 * a line for each.  Returns the number of problems (0 to 2), or -1 with
 * err. */
static int check_scores(FILE *out, const char *dir, const us_scenario *sc, const us_check_opts *o,
                        us_err *err) {
    us_sim_result kept, afresh, alone;
    const us_sim_cycle *c;
    char da[300], db[300], msg[1000];
    memset(&kept, 0, sizeof kept);
    memset(&afresh, 0, sizeof afresh);
    memset(&alone, 0, sizeof alone);
    int rc = -1, problems = 0;
    if (run_copy(sc, dir, o, SCORES_KEPT, &kept, err) < 0 || run_copy(sc, dir, o, SCORES_AFRESH, &afresh, err) < 0 ||
        run_copy(sc, dir, o, SCORES_UNCACHED, &alone, err) < 0)
        goto cleanup;
    rc = 0;
    if (first_difference(&kept, &afresh, &c, da, db, sizeof da)) {
        snprintf(msg, sizeof msg, "placement.lua: the score depends on what earlier cycles saw, not only on "
                 "its views: with scores kept from cycle to cycle, cycle %d (t=%gs) decides %s; with every "
                 "cycle scoring afresh, %s", c->index, c->time, da, db);
        problem(out, dir, msg, NULL);
        problems++;
    }
    fprintf(out, "  %-4s score independent of earlier cycles: %s\n", problems ? "FAIL" : "ok",
            problems ? "decisions change when every cycle scores afresh"
                     : "the same decisions with every cycle scoring afresh");
    if (first_difference(&afresh, &alone, &c, da, db, sizeof da)) {
        snprintf(msg, sizeof msg, "placement.lua: the score depends on node or pod names: scored once per "
                 "class of identical nodes and pods, cycle %d (t=%gs) decides %s; with every (pod, node) "
                 "pair scored on its own, %s", c->index, c->time, da, db);
        problem(out, dir, msg, NULL);
        rc = 1;
    }
    fprintf(out, "  %-4s score independent of names: %s\n", rc ? "FAIL" : "ok",
            rc ? "decisions change when every (pod, node) pair is scored on its own"
               : "the same decisions with every (pod, node) pair scored on its own");
    rc += problems;
cleanup:
    us_sim_result_free(&kept);
    us_sim_result_free(&afresh);
    us_sim_result_free(&alone);
    return rc;
}

/* The checks proper, in order, each printing its line; a stage that fails
 * ends them (a file that does not compile cannot be run).  sc is the
 * loaded scenario; *loaded says whether it still is (the built-in scenario
 * may replace it).  Returns the number of problems, or -1 with err. */
static int run_checks(FILE *out, const char *dir, us_scenario *sc, bool *loaded,
                      const us_check_opts *o, us_err *err) {
    unsigned long calls[US_POLICY_NFN] = {0};
    us_err lerr = {0};
    us_policy *pol;
    int problems, n;

    if ((n = check_syntax(out, dir)) < 0) return us_err_nomem(err);
    fprintf(out, "  %-4s syntax: fairshare.lua, placement.lua, background.lua\n", n ? "FAIL" : "ok");
    if (n) return n;

    if (!(pol = us_policy_load(dir, &o->limits, &lerr))) {
        if (lerr.code == US_ENOMEM) return us_err_nomem(err);
        problem(out, dir, lerr.msg, NULL);
        fprintf(out, "  FAIL required functions: compute, score, reoffer\n");
        return 1;
    }
    fprintf(out, "  ok   required functions: compute, score, reoffer (policy id %s)\n",
            us_policy_id(pol));
    for (int m = 0; m < US_POLICY_NFN; m++)
        if (us_policy_file_is_default(pol, (us_policy_fn)m))
            fprintf(out, "  note %s is not in %s: the default is used\n", us_policy_files[m], dir);
    us_policy_free(pol);

    bool background = us_check_has_background(&sc->state);
    us_check_drop_reloads(sc);
    int named = check_scores(out, dir, sc, o, err);
    if (named < 0) {
        if (err && err->code != US_ENOMEM) {
            /* a policy that fails to run is the contract check's to report */
            named = 0;
        } else {
            return -1;
        }
    }
    if ((problems = check_contract(out, dir, sc, o, calls, err)) < 0) return -1;
    problems += named;
    if (!o->scenario || (calls[0] && calls[1] && calls[2] && background)) return problems;

    /* The scenario left a function unexercised: check it on the built-in
     * scenario too, so that every function is held to the contract at
     * least once. */
    fprintf(out, "  note the scenario never called%s%s%s; checking the built-in scenario too\n",
            calls[0] ? "" : " compute", calls[1] ? "" : " score",
            !calls[2] ? " reoffer" : !background ? " reoffer with background pods" : "");
    us_scenario_free(sc);
    *loaded = false;
    if (us_check_load_builtin(sc, err) < 0) return -1;
    *loaded = true;
    if ((n = check_contract(out, dir, sc, o, calls, err)) < 0) return -1;
    return problems + n;
}

int us_check_dir(FILE *out, const char *dir, const us_check_opts *o, us_err *err) {
    us_check_opts defaults;
    us_scenario sc;
    bool loaded = false;
    int problems = -1;

    memset(&sc, 0, sizeof sc);
    if (!o) {
        us_check_opts_default(&defaults);
        o = &defaults;
    }
    /* The scenario first: when it does not load, the check cannot run,
     * which is not the policy's fault. */
    if (o->scenario ? us_scenario_load_file(&sc, o->scenario, err) < 0
                    : us_check_load_builtin(&sc, err) < 0)
        goto cleanup;
    loaded = true;

    fprintf(out, "check %s\n", dir);
    if ((problems = run_checks(out, dir, &sc, &loaded, o, err)) < 0) goto cleanup;
    if (problems) fprintf(out, "%s: FAILED, %d problem%s\n", dir, problems, problems == 1 ? "" : "s");
    else fprintf(out, "%s: passed\n", dir);
cleanup:
    if (loaded) us_scenario_free(&sc);
    return problems;
}
