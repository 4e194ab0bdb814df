/*
 * diff.c — comparing two runs (diff.h): decisions matched cycle by cycle as
 * multisets (the order inside a cycle is not a difference), summary figures
 * side by side, as text or as a JSON document.
 *
 * It owns the comparison and its presentation.  It must never run a cycle
 * itself (runs come from sim.c), never change a run it compares, and never
 * read a clock: the same runs render to the same bytes.
 */
#include "diff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "output.h"

/* ---- runs ---------------------------------------------------------------- */

void us_diff_run_free(us_diff_run *run) {
    free(run->dir);
    us_sim_result_free(&run->res);
    for (size_t q = 0; q < run->nqueues; q++) free(run->queues[q]);
    free(run->queues);
    free(run->fair);
    memset(run, 0, sizeof *run);
}

int us_diff_capture(us_diff_run *run, us_sim_result *res, const us_state *final, const char *dir,
                    us_err *err) {
    memset(run, 0, sizeof *run);
    run->res = *res;
    memset(res, 0, sizeof *res);
    snprintf(run->id, sizeof run->id, "%s",
             run->res.ncycles ? run->res.cycles[0].policy : run->res.policy);
    size_t nq = final->nqueues;
    run->queues = calloc(nq ? nq : 1, sizeof *run->queues);
    run->fair = calloc(nq ? nq : 1, sizeof *run->fair);
    if (!run->queues || !run->fair || (dir && !(run->dir = strdup(dir)))) goto nomem;
    run->nqueues = nq;
    const us_sim_cycle *last = run->res.ncycles ? &run->res.cycles[run->res.ncycles - 1] : NULL;
    for (size_t q = 0; q < nq; q++) {
        if (!(run->queues[q] = strdup(final->queues[q].name))) goto nomem;
        /* rounded as the simulator's output rounds them */
        for (int r = 0; r < US_NRES && last && last->queues && q < run->res.nqueues; r++)
            run->fair[q].v[r] = us_res_round(last->queues[q].fair[r]);
    }
    for (size_t i = 0; i < run->res.ncycles; i++) {
        const us_cycle_log *log = &run->res.cycles[i].log;
        run->decisions += (int)log->ndecisions;
        for (size_t k = 0; k < log->ndecisions; k++)
            if (log->decisions[k].op == US_OP_EVICT && log->decisions[k].action < US_ACT_NONE)
                run->evictions[log->decisions[k].action]++;
        for (size_t k = 0; k < log->nevents; k++) {
            const char *r = log->events[k].reason;
            if (r && (!strcmp(r, "PolicyFailed") || !strcmp(r, "PolicyRejected"))) run->policy_warnings++;
        }
    }
    return 0;
nomem:
    us_diff_run_free(run);
    return us_err_nomem(err);
}

int us_diff_run_file(us_diff_run *run, const char *scenario, const char *dir, const us_sim_opts *o,
                     us_err *err) {
    us_scenario sc;
    us_sim_result res;
    us_policy *pol = NULL;
    us_err lerr = {0};
    bool loaded = false;
    int rc = -1;

    memset(run, 0, sizeof *run);
    memset(&sc, 0, sizeof sc);
    if (us_scenario_load_file(&sc, scenario, &lerr) < 0) {
        /* a read error already names the file */
        if (lerr.code == US_EIO) us_err_set(err, US_EIO, "%s", lerr.msg);
        else us_err_set(err, lerr.code, "%s: %s", scenario, lerr.msg);
        goto cleanup;
    }
    loaded = true;
    us_check_drop_reloads(&sc);
    if (dir && !(pol = us_policy_load(dir, &o->limits, &lerr))) {
        us_err_set(err, lerr.code == US_ENOMEM ? US_ENOMEM : US_EPOLICY, "policies %s: %s", dir,
                   lerr.msg);
        goto cleanup;
    }
    if (us_sim_run(&sc, pol, o, &res, err) < 0) goto cleanup;
    rc = us_diff_capture(run, &res, &sc.state, dir, err);
cleanup:
    us_policy_free(pol);
    if (loaded) us_scenario_free(&sc);
    return rc;
}

/* ---- matching decisions ---------------------------------------------------- */

/* Everything a decision says, as one string: two decisions are the same
 * when their keys are. */
static char *decision_key(const us_decision *d) {
    size_t n = 64 + strlen(d->pod ? d->pod : "") + strlen(d->node ? d->node : "") +
               strlen(d->evictor ? d->evictor : "");
    for (size_t i = 0; i < d->nwaits; i++) n += strlen(d->waits_for[i] ? d->waits_for[i] : "") + 1;
    char *k = malloc(n);
    if (!k) return NULL;
    size_t at = (size_t)snprintf(k, n, "%d\t%d\t%s\t%s\t%s", (int)d->op, (int)d->action,
                                 d->pod ? d->pod : "", d->node ? d->node : "",
                                 d->evictor ? d->evictor : "");
    for (size_t i = 0; i < d->nwaits && at < n; i++)
        at += (size_t)snprintf(k + at, n - at, "\t%s", d->waits_for[i] ? d->waits_for[i] : "");
    return k;
}

typedef struct keyed {
    char *key;
    size_t idx;
} keyed;

static int by_key(const void *x, const void *y) {
    const keyed *a = x, *b = y;
    int c = strcmp(a->key, b->key);
    return c ? c : (a->idx > b->idx) - (a->idx < b->idx);
}

static void free_keys(keyed *k, size_t n) {
    for (size_t i = 0; k && i < n; i++) free(k[i].key);
    free(k);
}

static keyed *sorted_keys(const us_cycle_log *log) {
    size_t n = log ? log->ndecisions : 0;
    keyed *k = calloc(n ? n : 1, sizeof *k);
    if (!k) return NULL;
    for (size_t i = 0; i < n; i++) {
        k[i].idx = i;
        if (!(k[i].key = decision_key(&log->decisions[i]))) {
            free_keys(k, n);
            return NULL;
        }
    }
    qsort(k, n, sizeof *k, by_key);
    return k;
}

/* Mark the decisions of a (b) that b (a) lacks, counting duplicates: two
 * identical binds on one side and one on the other leave one unmatched.
 * Logs may be NULL (a cycle one run did not have).  Returns how many are
 * marked, or -1 when memory runs out. */
static int match(const us_cycle_log *a, const us_cycle_log *b, bool *only_a, bool *only_b) {
    size_t na = a ? a->ndecisions : 0, nb = b ? b->ndecisions : 0, i = 0, j = 0;
    int marked = 0, rc = -1;
    keyed *ka = sorted_keys(a), *kb = sorted_keys(b);
    if (!ka || !kb) goto cleanup;
    while (i < na || j < nb) {
        int c = i == na ? 1 : j == nb ? -1 : strcmp(ka[i].key, kb[j].key);
        if (c == 0) {
            i++;
            j++;
        } else if (c < 0) {
            only_a[ka[i++].idx] = true;
            marked++;
        } else {
            only_b[kb[j++].idx] = true;
            marked++;
        }
    }
    rc = marked;
cleanup:
    free_keys(ka, na);
    free_keys(kb, nb);
    return rc;
}

static size_t max_cycles(const us_diff_run *a, const us_diff_run *b) {
    return a->res.ncycles > b->res.ncycles ? a->res.ncycles : b->res.ncycles;
}

static const us_sim_cycle *cycle_at(const us_diff_run *r, size_t i) {
    return i < r->res.ncycles ? &r->res.cycles[i] : NULL;
}

/* The two sides of cycle i, their flags (calloc'd, freed by the caller)
 * and how many decisions differ; -1 when memory runs out. */
typedef struct cycle_cmp {
    const us_sim_cycle *ca, *cb;
    bool *only_a, *only_b;
    int ndiff;
} cycle_cmp;

static int compare_cycle(const us_diff_run *a, const us_diff_run *b, size_t i, cycle_cmp *c) {
    c->ca = cycle_at(a, i);
    c->cb = cycle_at(b, i);
    size_t na = c->ca ? c->ca->log.ndecisions : 0, nb = c->cb ? c->cb->log.ndecisions : 0;
    c->only_a = calloc(na ? na : 1, sizeof *c->only_a);
    c->only_b = calloc(nb ? nb : 1, sizeof *c->only_b);
    if (!c->only_a || !c->only_b) goto fail;
    c->ndiff = match(c->ca ? &c->ca->log : NULL, c->cb ? &c->cb->log : NULL, c->only_a, c->only_b);
    if (c->ndiff < 0) goto fail;
    return 0;
fail:
    free(c->only_a);
    free(c->only_b);
    c->only_a = c->only_b = NULL;
    return -1;
}

static void cycle_cmp_free(cycle_cmp *c) {
    free(c->only_a);
    free(c->only_b);
}

int us_diff_count(const us_diff_run *a, const us_diff_run *b) {
    int n = 0;
    for (size_t i = 0; i < max_cycles(a, b); i++) {
        cycle_cmp c;
        if (compare_cycle(a, b, i, &c) < 0) return -1;
        n += c.ndiff > 0;
        cycle_cmp_free(&c);
    }
    return n;
}

/* ---- figures --------------------------------------------------------------- */

static const us_res *fair_of(const us_diff_run *r, const char *queue) {
    for (size_t q = 0; q < r->nqueues; q++)
        if (!strcmp(r->queues[q], queue)) return &r->fair[q];
    return NULL;
}

/* Queue names of a, then those only b has (a scenario edited between two
 * watched runs may have gained or lost queues). */
static size_t union_queues(const us_diff_run *a, const us_diff_run *b, const char **out) {
    size_t n = 0;
    for (size_t q = 0; q < a->nqueues; q++) out[n++] = a->queues[q];
    for (size_t q = 0; q < b->nqueues; q++)
        if (!fair_of(a, b->queues[q])) out[n++] = b->queues[q];
    return n;
}

/* ---- text -------------------------------------------------------------- */

static int slen(const char *s) { return s ? (int)strlen(s) : 0; }

/* v with at most dec decimals, no trailing zeros; with a sign when signed. */
static const char *fmt_num(char *buf, size_t n, double v, int dec, bool sign) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.*f", dec, v);
    if (strchr(tmp, '.')) {
        char *e = tmp + strlen(tmp) - 1;
        while (*e == '0') *e-- = '\0';
        if (*e == '.') *e = '\0';
    }
    if (!strcmp(tmp, "-0")) strcpy(tmp, "0");
    snprintf(buf, n, "%s%s", sign && v > 0 && strcmp(tmp, "0") ? "+" : "", tmp);
    return buf;
}

static const char *fmt_bytes(char *buf, size_t n, int64_t b, bool sign) {
    static const char *const units[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    double x = (double)b;
    int u = 0;
    char num[64];
    while (fabs(x) >= 1024 && u < 6) {
        x /= 1024;
        u++;
    }
    fmt_num(num, sizeof num, x, 1, sign);
    snprintf(buf, n, "%s%s", num, strcmp(num, "0") ? units[u] : "");
    return buf;
}

/* Resource r of v as a person reads it: devices, cores, binary bytes. */
static const char *fmt_res(char *buf, size_t n, const us_res *v, int r, bool sign) {
    if (r == US_GPU) return fmt_num(buf, n, (double)v->v[US_GPU] / US_GPU_UNIT, 3, sign);
    if (r == US_CPU) return fmt_num(buf, n, (double)v->v[US_CPU] / 1000.0, 3, sign);
    return fmt_bytes(buf, n, v->v[US_MEM], sign);
}

static void row(FILE *f, int w, const char *label, const char *x, const char *y, const char *d) {
    fprintf(f, "  %-*s  %10s  %10s  %10s\n", w, label, x, y, d);
}

static void count_row(FILE *f, int w, const char *label, long x, long y) {
    char a[32], b[32], d[32];
    snprintf(a, sizeof a, "%ld", x);
    snprintf(b, sizeof b, "%ld", y);
    snprintf(d, sizeof d, y > x ? "+%ld" : "%ld", y - x);
    row(f, w, label, a, b, d);
}

static int text_cycles(FILE *f, const us_diff_run *a, const us_diff_run *b) {
    size_t total = max_cycles(a, b);
    int differ = 0, only_a = 0, only_b = 0;
    char t[64];
    for (size_t i = 0; i < total; i++) {
        cycle_cmp c;
        if (compare_cycle(a, b, i, &c) < 0) return -1;
        if (c.ndiff > 0) {
            const us_sim_cycle *any = c.ca ? c.ca : c.cb;
            int w = 0;
            for (size_t k = 0; c.ca && k < c.ca->log.ndecisions; k++)
                if (c.only_a[k] && slen(c.ca->log.decisions[k].pod) > w) w = slen(c.ca->log.decisions[k].pod);
            for (size_t k = 0; c.cb && k < c.cb->log.ndecisions; k++)
                if (c.only_b[k] && slen(c.cb->log.decisions[k].pod) > w) w = slen(c.cb->log.decisions[k].pod);
            fprintf(f, "cycle %d  t=%ss\n", any->index, fmt_num(t, sizeof t, any->time, 3, false));
            for (size_t k = 0; c.ca && k < c.ca->log.ndecisions; k++)
                if (c.only_a[k]) {
                    us_output_decision_text(f, "  - ", &c.ca->log.decisions[k], w);
                    only_a++;
                }
            for (size_t k = 0; c.cb && k < c.cb->log.ndecisions; k++)
                if (c.only_b[k]) {
                    us_output_decision_text(f, "  + ", &c.cb->log.decisions[k], w);
                    only_b++;
                }
            fputc('\n', f);
            differ++;
        }
        cycle_cmp_free(&c);
    }
    if (differ)
        fprintf(f, "%d of %zu cycles differ: %d decision%s only in the first, %d only in the "
                "second\n\n", differ, total, only_a, only_a == 1 ? "" : "s", only_b);
    else
        fprintf(f, "no decision differs in %zu cycle%s\n\n", total, total == 1 ? "" : "s");
    return 0;
}

int us_diff_text(FILE *f, const us_diff_run *a, const us_diff_run *b, const char *name_a,
                 const char *name_b, us_err *err) {
    static const char *const res_label[US_NRES] = {"gpu", "cpu (cores)", "memory"};
    const char **names = NULL;
    int rc = -1;
    size_t nq;
    /* the label column fits the longest action's row and every queue's */
    int w = 0;
    for (int act = 0; act < US_ACT_NONE; act++)
        if ((int)strlen("evictions ()") + slen(us_action_names[act]) > w)
            w = (int)strlen("evictions ()") + slen(us_action_names[act]);

    if (text_cycles(f, a, b) < 0) {
        us_err_nomem(err);
        goto cleanup;
    }
    if (!(names = calloc(a->nqueues + b->nqueues + 1, sizeof *names))) {
        us_err_nomem(err);
        goto cleanup;
    }
    nq = union_queues(a, b, names);
    int qw = 0;
    for (size_t q = 0; q < nq; q++)
        if (slen(names[q]) > qw) qw = slen(names[q]);
    if (qw + 2 + slen(res_label[US_CPU]) > w) w = qw + 2 + slen(res_label[US_CPU]);

    fprintf(f, "%-*s  %10s  %10s  %10s\n", w + 2, "summary", name_a, name_b, "change");
    count_row(f, w, "cycles", (long)a->res.ncycles, (long)b->res.ncycles);
    count_row(f, w, "decisions", a->decisions, b->decisions);
    for (int act = 0; act < US_ACT_NONE; act++) {
        char label[64];
        snprintf(label, sizeof label, "evictions (%s)", us_action_names[act]);
        count_row(f, w, label, a->evictions[act], b->evictions[act]);
    }
    count_row(f, w, "AI pods pending", a->res.ai_pods_pending, b->res.ai_pods_pending);
    count_row(f, w, "policy warnings", a->policy_warnings, b->policy_warnings);
    fputs("fair share at the end\n", f);
    for (size_t q = 0; q < nq; q++) {
        const us_res *fa = fair_of(a, names[q]), *fb = fair_of(b, names[q]);
        us_res zero = {{0}}, d;
        if (!fa) fa = &zero;
        if (!fb) fb = &zero;
        d = us_res_sub(*fb, *fa);
        for (int r = 0; r < US_NRES; r++) {
            char label[512], x[80], y[80], z[80];
            snprintf(label, sizeof label, "%-*s  %s", qw, r == 0 ? names[q] : "", res_label[r]);
            row(f, w, label, fmt_res(x, sizeof x, fa, r, false), fmt_res(y, sizeof y, fb, r, false),
                fmt_res(z, sizeof z, &d, r, true));
        }
    }
    if (fflush(f) == EOF || ferror(f)) {
        us_err_set(err, US_EIO, "cannot write the output");
        goto cleanup;
    }
    rc = 0;
cleanup:
    free(names);
    return rc;
}

/* ---- JSON ------------------------------------------------------------------ */

static cJSON *side_json(const us_diff_run *r) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    if (us_output_put(o, "dir", r->dir ? cJSON_CreateString(r->dir) : cJSON_CreateNull()) < 0 ||
        us_output_put(o, "id", cJSON_CreateString(r->id)) < 0) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* A summary object; with b, the change from a to b. */
typedef struct figures {
    long cycles, decisions, evictions[US_ACT_NONE], pending, warnings;
} figures;

static figures figures_of(const us_diff_run *r) {
    figures x = {(long)r->res.ncycles, r->decisions, {0}, r->res.ai_pods_pending, r->policy_warnings};
    for (int act = 0; act < US_ACT_NONE; act++) x.evictions[act] = r->evictions[act];
    return x;
}

static cJSON *summary_json(figures x, const char *const *names, size_t nq, const us_diff_run *a,
                           const us_diff_run *b, int side) {
    cJSON *o = cJSON_CreateObject(), *ev, *fs;
    if (!o) return NULL;
    if (us_output_put(o, "cycles", cJSON_CreateNumber((double)x.cycles)) < 0 ||
        us_output_put(o, "decisions", cJSON_CreateNumber((double)x.decisions)) < 0 ||
        us_output_put(o, "evictions", ev = cJSON_CreateObject()) < 0)
        goto fail;
    for (int act = 0; act < US_ACT_NONE; act++)
        if (us_output_put(ev, us_action_names[act], cJSON_CreateNumber((double)x.evictions[act])) < 0) goto fail;
    if (us_output_put(o, "ai_pods_pending", cJSON_CreateNumber((double)x.pending)) < 0 ||
        us_output_put(o, "policy_warnings", cJSON_CreateNumber((double)x.warnings)) < 0 ||
        us_output_put(o, "fair_share", fs = cJSON_CreateObject()) < 0)
        goto fail;
    for (size_t q = 0; q < nq; q++) {
        const us_res *fa = fair_of(a, names[q]), *fb = fair_of(b, names[q]);
        us_res zero = {{0}}, v;
        if (!fa) fa = &zero;
        if (!fb) fb = &zero;
        v = side == 0 ? *fa : side == 1 ? *fb : us_res_sub(*fb, *fa);
        if (us_output_put(fs, names[q], us_output_res(v)) < 0) goto fail;
    }
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

static cJSON *decisions_json(const us_sim_cycle *c, const bool *only) {
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return NULL;
    for (size_t k = 0; c && k < c->log.ndecisions; k++)
        if (only[k] && us_output_push(arr, us_output_decision(&c->log.decisions[k])) < 0) {
            cJSON_Delete(arr);
            return NULL;
        }
    return arr;
}

cJSON *us_diff_document(const us_diff_run *a, const us_diff_run *b) {
    cJSON *doc = cJSON_CreateObject(), *cycles, *summary;
    const char **names = calloc(a->nqueues + b->nqueues + 1, sizeof *names);
    cycle_cmp c = {0};
    if (!doc || !names) goto fail;
    size_t nq = union_queues(a, b, names);
    const char *scenario = a->res.scenario ? a->res.scenario : b->res.scenario;
    if (us_output_put(doc, "scenario", scenario ? cJSON_CreateString(scenario) : cJSON_CreateNull()) < 0 ||
        us_output_put(doc, "from", side_json(a)) < 0 || us_output_put(doc, "to", side_json(b)) < 0 ||
        us_output_put(doc, "cycles", cycles = cJSON_CreateArray()) < 0)
        goto fail;
    for (size_t i = 0; i < max_cycles(a, b); i++) {
        if (compare_cycle(a, b, i, &c) < 0) goto fail;
        if (c.ndiff > 0) {
            const us_sim_cycle *any = c.ca ? c.ca : c.cb;
            cJSON *o = cJSON_CreateObject();
            if (us_output_push(cycles, o) < 0 || us_output_put(o, "cycle", cJSON_CreateNumber(any->index)) < 0 ||
                us_output_put(o, "time", cJSON_CreateNumber(any->time)) < 0 ||
                us_output_put(o, "only_from", decisions_json(c.ca, c.only_a)) < 0 ||
                us_output_put(o, "only_to", decisions_json(c.cb, c.only_b)) < 0)
                goto fail;
        }
        cycle_cmp_free(&c);
        memset(&c, 0, sizeof c);
    }
    figures fa = figures_of(a), fb = figures_of(b), d;
    d.cycles = fb.cycles - fa.cycles;
    d.decisions = fb.decisions - fa.decisions;
    for (int act = 0; act < US_ACT_NONE; act++) d.evictions[act] = fb.evictions[act] - fa.evictions[act];
    d.pending = fb.pending - fa.pending;
    d.warnings = fb.warnings - fa.warnings;
    if (us_output_put(doc, "summary", summary = cJSON_CreateObject()) < 0 ||
        us_output_put(summary, "from", summary_json(fa, names, nq, a, b, 0)) < 0 ||
        us_output_put(summary, "to", summary_json(fb, names, nq, a, b, 1)) < 0 ||
        us_output_put(summary, "change", summary_json(d, names, nq, a, b, 2)) < 0)
        goto fail;
    free(names);
    return doc;
fail:
    cycle_cmp_free(&c);
    free(names);
    cJSON_Delete(doc);
    return NULL;
}
