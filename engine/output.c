/*
 * output.c — rendering a finished simulation as the JSON document of
 * docs/scenario.md or as a per-cycle account in words.
 *
 * Owns only the presentation: output units (gpu in devices, cpu in
 * millicores or cores, memory in bytes or binary units) and layout.  It must
 * never change the result or the state it reads, and never read a clock:
 * the same run always renders to the same bytes.
 */
#include "output.h"

#include "figures.h"
#include "jsonw.h"
#include "rollup.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON ----------------------------------------------------------------
 * The document is described once, against the writer (jsonw.h): streamed
 * as text by us_output_json, built as a tree by us_output_document. */

int us_output_put(cJSON *obj, const char *key, cJSON *item) {
    if (!item) return -1;
    if (!cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

int us_output_push(cJSON *arr, cJSON *item) {
    if (!item) return -1;
    if (!cJSON_AddItemToArray(arr, item)) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

static void res_w(us_jw *w, const char *key, us_res r) {
    us_jw_begin_object(w, key);
    us_jw_number(w, us_res_names[US_GPU], (double)r.v[US_GPU] / US_GPU_UNIT);
    us_jw_int(w, us_res_names[US_CPU], r.v[US_CPU]);
    us_jw_int(w, us_res_names[US_MEM], r.v[US_MEM]);
    us_jw_end(w);
}

/* One value written to a tree of its own. */
static cJSON *tree_of(us_jw *w) {
    cJSON *t;
    return us_jw_finish(w, &t, NULL) < 0 ? NULL : t;
}

cJSON *us_output_res(us_res r) {
    us_jw w;
    us_jw_tree(&w);
    res_w(&w, NULL, r);
    return tree_of(&w);
}

/* Fair shares are fractional in engine units; output rounds them to the
 * engine's unit (milli-device, millicore, byte) so figures stay exact. */
static us_res round_fair(const double fair[US_NRES]) {
    us_res r;
    for (int i = 0; i < US_NRES; i++) r.v[i] = us_res_round(fair[i]);
    return r;
}

static void decision_w(us_jw *w, const us_decision *d) {
    us_jw_begin_object(w, NULL);
    us_jw_string(w, "op", us_op_names[d->op]);
    us_jw_string(w, "pod", d->pod);
    us_jw_string(w, "node", d->node);
    if (d->op == US_OP_PIPELINE) {
        us_jw_begin_array(w, "waits_for");
        for (size_t i = 0; i < d->nwaits; i++) us_jw_string(w, NULL, d->waits_for[i]);
        us_jw_end(w);
    }
    if (d->action != US_ACT_NONE) us_jw_string(w, "action", us_action_names[d->action]);
    if (d->op == US_OP_EVICT && d->evictor) us_jw_string(w, "evictor", d->evictor);
    us_jw_end(w);
}

cJSON *us_output_decision(const us_decision *d) {
    us_jw w;
    us_jw_tree(&w);
    decision_w(&w, d);
    return tree_of(&w);
}

static void event_w(us_jw *w, const us_event *e) {
    us_jw_begin_object(w, NULL);
    us_jw_string(w, "type", e->type);
    us_jw_string(w, "reason", e->reason);
    us_jw_string(w, "object", e->object);
    us_jw_string(w, "message", e->message);
    if (e->annotations.n) {
        us_jw_begin_object(w, "annotations");
        for (size_t i = 0; i < e->annotations.n; i++)
            us_jw_string(w, e->annotations.items[i].key, e->annotations.items[i].value);
        us_jw_end(w);
    }
    us_jw_end(w);
}

/* A workload change names its workload, a node change its node. */
static bool about_node(us_change_kind a) { return a >= US_CH_ADD_NODE && a <= US_CH_UNCORDON; }

static void change_w(us_jw *w, const us_change *ch) {
    us_jw_begin_object(w, NULL);
    us_jw_string(w, "action", us_change_names[ch->action]);
    us_jw_string(w, about_node(ch->action) ? "node" : "workload", ch->object);
    if (ch->action == US_CH_COMPLETE) us_jw_string(w, "cause", ch->by_duration ? "duration" : "timeline");
    us_jw_begin_array(w, "pods");
    for (size_t i = 0; i < ch->npods; i++) us_jw_string(w, NULL, ch->pods[i]);
    us_jw_end(w);
    us_jw_end(w);
}

static void cycle_w(us_jw *w, const us_sim_result *res, const us_state *st, size_t i) {
    const us_sim_cycle *c = &res->cycles[i];
    us_jw_begin_object(w, NULL);
    us_jw_number(w, "cycle", c->index);
    us_jw_number(w, "time", c->time);
    us_jw_string(w, "policy", c->policy);
    us_jw_begin_array(w, "changes");
    for (size_t k = 0; k < c->nchanges; k++) change_w(w, &c->changes[k]);
    us_jw_end(w);
    us_jw_begin_array(w, "decisions");
    for (size_t k = 0; k < c->log.ndecisions; k++) decision_w(w, &c->log.decisions[k]);
    us_jw_end(w);
    us_jw_begin_array(w, "events");
    for (size_t k = 0; k < c->log.nevents; k++) event_w(w, &c->log.events[k]);
    us_jw_end(w);
    if (c->log.nlines || c->log.dropped_lines) {
        us_jw_begin_array(w, "log");
        for (size_t k = 0; k < c->log.nlines; k++) {
            const us_log_line *l = &c->log.lines[k];
            us_jw_begin_object(w, NULL);
            us_jw_string(w, "file", l->file);
            us_jw_number(w, "line", l->line);
            us_jw_string(w, "message", l->text);
            us_jw_end(w);
        }
        us_jw_end(w);
        if (c->log.dropped_lines) us_jw_number(w, "log_dropped", (double)c->log.dropped_lines);
    }
    us_jw_take(w, "pools", us_fig_cycle_pools(res, i));
    us_jw_take(w, "queues", us_fig_cycle_queues(res, st, i));
    us_jw_end(w);
}

static const char *workload_name(const us_state *st, int w) {
    return w >= 0 && (size_t)w < st->nworkloads ? st->workloads[w].name : NULL;
}

static const char *node_name(const us_state *st, int n) {
    return n >= 0 && (size_t)n < st->nnodes ? st->nodes[n].name : NULL;
}

static void pod_w(us_jw *jw, const us_state *st, const us_pod *p) {
    int w = p->workload;
    bool known = w >= 0 && (size_t)w < st->nworkloads;
    us_jw_begin_object(jw, NULL);
    us_jw_string(jw, "name", p->name);
    us_jw_string(jw, "workload", workload_name(st, w));
    us_jw_string(jw, "node", node_name(st, p->node));
    us_jw_string(jw, "state", us_pod_state_names[p->state]);
    us_jw_bool(jw, "background", known && st->workloads[w].background);
    /* only when set, so documents without external workloads are unchanged */
    if (known && st->workloads[w].external) us_jw_bool(jw, "external", true);
    us_jw_end(jw);
}

/* The figures of queue q after the last cycle; NULL when there are none. */
static const us_queue_figures *last_figures(const us_sim_result *res, size_t q) {
    if (!res->ncycles || q >= res->nqueues) return NULL;
    const us_sim_cycle *c = &res->cycles[res->ncycles - 1];
    return c->queues ? &c->queues[q] : NULL;
}

static void queue_w(us_jw *w, const us_sim_result *res, const us_state *st, size_t q) {
    const us_queue_figures *f = last_figures(res, q);
    us_res alloc = {{0}}, fair = {{0}};
    if (f) {
        alloc = f->allocated;
        fair = round_fair(f->fair);
    }
    us_jw_begin_object(w, NULL);
    us_jw_string(w, "name", st->queues[q].name);
    res_w(w, "allocated", alloc);
    res_w(w, "fair_share", fair);
    us_jw_end(w);
}

static void final_w(us_jw *w, const us_sim_result *res, const us_state *st) {
    us_jw_begin_object(w, "final");
    us_jw_number(w, "time", res->final_time);
    us_jw_begin_array(w, "pods");
    for (size_t i = 0; i < st->npods && !w->failed; i++)
        if (!st->pods[i].gone) pod_w(w, st, &st->pods[i]);
    us_jw_end(w);
    us_jw_begin_array(w, "queues");
    for (size_t q = 0; q < st->nqueues; q++) queue_w(w, res, st, q);
    us_jw_end(w);
    us_jw_end(w);
}

static void summary_w(us_jw *w, const us_sim_result *res) {
    us_jw_begin_object(w, "summary");
    us_jw_number(w, "cycles", (double)res->ncycles);
    us_jw_number(w, "background_evictions", res->totals.background_evictions);
    us_jw_number(w, "preemptions", res->totals.preemptions);
    us_jw_number(w, "reclaims", res->totals.reclaims);
    us_jw_number(w, "ai_pods_pending", res->ai_pods_pending);
    us_jw_take(w, "harvest", us_fig_summary(res));
    us_jw_end(w);
}

static void document_w(us_jw *w, const us_sim_result *res, const us_state *final) {
    us_jw_begin_object(w, NULL);
    us_jw_string(w, "scenario", res->scenario);
    us_jw_string(w, "policy", res->policy);
    us_jw_begin_array(w, "cycles");
    for (size_t i = 0; i < res->ncycles && !w->failed; i++) cycle_w(w, res, final, i);
    us_jw_end(w);
    final_w(w, res, final);
    summary_w(w, res);
    us_jw_end(w);
}

cJSON *us_output_document(const us_sim_result *res, const us_state *final) {
    us_jw w;
    us_jw_tree(&w);
    document_w(&w, res, final);
    return tree_of(&w);
}

int us_output_json(FILE *f, const us_sim_result *res, const us_state *final, us_err *err) {
    us_jw w;
    us_jw_text(&w, f);
    document_w(&w, res, final);
    int rc = us_jw_finish(&w, NULL, err);
    if (rc == 0 && (fputc('\n', f) == EOF || fflush(f) == EOF))
        rc = us_err_set(err, US_EIO, "cannot write the output");
    return rc;
}

/* ---- text ---------------------------------------------------------------- */

/* v with at most dec decimals and no trailing zeros: "16", "0.1", "2.667". */
static const char *fmt_num(char *buf, size_t n, double v, int dec) {
    snprintf(buf, n, "%.*f", dec, v);
    if (strchr(buf, '.')) {
        char *e = buf + strlen(buf) - 1;
        while (*e == '0') *e-- = '\0';
        if (*e == '.') *e = '\0';
    }
    if (strcmp(buf, "-0") == 0) strcpy(buf, "0");
    return buf;
}

/* Bytes in the largest binary unit that keeps the figure >= 1: "64Mi". */
static const char *fmt_bytes(char *buf, size_t n, int64_t b) {
    static const char *const units[] = {"B", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    double x = (double)b;
    int u = 0;
    if (b == 0) {
        snprintf(buf, n, "0");
        return buf;
    }
    while (fabs(x) >= 1024 && u < 6) {
        x /= 1024;
        u++;
    }
    char num[64];
    snprintf(buf, n, "%s%s", fmt_num(num, sizeof num, x, 1), units[u]);
    return buf;
}

/* One resource of r as a person reads it: devices, cores, binary bytes. */
static const char *fmt_res(char *buf, size_t n, us_res r, int i) {
    switch (i) {
    case US_GPU: return fmt_num(buf, n, (double)r.v[US_GPU] / US_GPU_UNIT, 3);
    case US_CPU: return fmt_num(buf, n, (double)r.v[US_CPU] / 1000.0, 3);
    default: return fmt_bytes(buf, n, r.v[US_MEM]);
    }
}

static const char *fmt_time(char *buf, size_t n, double t) {
    char num[64];
    snprintf(buf, n, "%ss", fmt_num(num, sizeof num, t, 3));
    return buf;
}

static int imax(int a, int b) { return a > b ? a : b; }
static int slen(const char *s) { return s ? (int)strlen(s) : 0; }
static const char *nz(const char *s) { return s ? s : "-"; }

void us_output_decision_text(FILE *f, const char *lead, const us_decision *d, int width) {
    fprintf(f, "%s%-8s  %-*s  %s %s", lead, us_op_names[d->op], width, nz(d->pod),
            d->op == US_OP_EVICT ? "from" : "->", nz(d->node));
    if (d->op == US_OP_PIPELINE && d->nwaits) {
        fputs("  waiting for ", f);
        for (size_t k = 0; k < d->nwaits; k++) fprintf(f, "%s%s", k ? ", " : "", nz(d->waits_for[k]));
    }
    if (d->action == US_ACT_NONE)
        fputs("  (after pipeline)", f);
    else if (d->op == US_OP_EVICT && d->evictor)
        fprintf(f, "  (%s, for %s)", us_action_names[d->action], d->evictor);
    else
        fprintf(f, "  (%s)", us_action_names[d->action]);
    fputc('\n', f);
}

static void text_decisions(FILE *f, const us_cycle_log *log) {
    int w = 0;
    for (size_t i = 0; i < log->ndecisions; i++) w = imax(w, slen(log->decisions[i].pod));
    for (size_t i = 0; i < log->ndecisions; i++) us_output_decision_text(f, "  ", &log->decisions[i], w);
}

/* Policy log lines: "log  placement.lua:12: text". */
static void text_log_lines(FILE *f, const us_cycle_log *log) {
    for (size_t i = 0; i < log->nlines; i++)
        fprintf(f, "  log      %s:%d: %s\n", nz(log->lines[i].file), log->lines[i].line, nz(log->lines[i].text));
    if (log->dropped_lines)
        fprintf(f, "  log      (%lu more lines dropped: a policy may log %d lines a cycle)\n", log->dropped_lines,
                US_POLICY_LOG_MAX);
}

/* "submit    train-1  2 pods: train-1-0, train-1-1"; long pod lists are
 * cut (the JSON document has them whole). */
static void text_changes(FILE *f, const us_sim_cycle *c) {
    int w = 0;
    for (size_t i = 0; i < c->nchanges; i++) w = imax(w, slen(c->changes[i].object));
    for (size_t i = 0; i < c->nchanges; i++) {
        const us_change *ch = &c->changes[i];
        bool more = ch->by_duration || ch->npods;
        fprintf(f, "  %-11s %-*s", us_change_names[ch->action], more ? w : 0, nz(ch->object));
        if (ch->by_duration) fputs("  its duration ran out", f);
        if (ch->npods) fprintf(f, "  %zu pod%s: ", ch->npods, ch->npods == 1 ? "" : "s");
        for (size_t k = 0; k < ch->npods && k < 4; k++) fprintf(f, "%s%s", k ? ", " : "", ch->pods[k]);
        if (ch->npods > 4) fputs(", ...", f);
        fputc('\n', f);
    }
}

static void text_events(FILE *f, const us_cycle_log *log) {
    int w = 0;
    for (size_t i = 0; i < log->nevents; i++) w = imax(w, slen(log->events[i].object));
    for (size_t i = 0; i < log->nevents; i++) {
        const us_event *e = &log->events[i];
        fprintf(f, "  %-7s  %-*s  %s: %s\n", nz(e->type), w, nz(e->object), nz(e->reason),
                nz(e->message));
    }
}

/* A queue table row as text cells: name, then "used / fair" per resource. */
typedef struct row {
    const char *name;
    int depth;
    char used[US_NRES][32], fair[US_NRES][32];
} row;

/* Queue q's figures after cycle c, rounded as output shows them. */
static void queue_figures(const us_sim_cycle *c, size_t q, us_res *alloc, us_res *fair) {
    *alloc = c->queues[q].allocated;
    *fair = round_fair(c->queues[q].fair);
}

/* shown[2q], shown[2q+1]: queue q's allocated and fair share as last
 * printed (zero before the first table). */
static bool figures_changed(const us_sim_cycle *c, size_t nq, const us_res *shown) {
    for (size_t q = 0; c->queues && q < nq; q++) {
        us_res alloc, fair;
        queue_figures(c, q, &alloc, &fair);
        if (memcmp(&alloc, &shown[2 * q], sizeof alloc) || memcmp(&fair, &shown[2 * q + 1], sizeof fair))
            return true;
    }
    return false;
}

/* Columns a queue's name is indented by: two per level, up to
 * MAX_INDENT_LEVELS levels, so that a chain thousands of queues deep does
 * not print a table quadratic in its depth (--json has every parent). */
#define MAX_INDENT_LEVELS 12
static int indent(int depth) { return 2 * (depth < MAX_INDENT_LEVELS ? depth : MAX_INDENT_LEVELS); }

/* Print the queues whose figures differ from shown[], then remember them. */
static int text_queue_table(FILE *f, const us_state *st, const us_sim_cycle *c, size_t nq,
                            us_res *shown) {
    static const char *const heads[US_NRES] = {"gpu", "cpu (cores)", "memory"};
    int rc = -1;
    size_t n = 0;
    row *rows = NULL;
    if (!c->queues || !nq) return 0;
    if (!(rows = calloc(nq, sizeof *rows))) goto cleanup;
    for (size_t q = 0; q < nq; q++) {
        us_res alloc, fair;
        queue_figures(c, q, &alloc, &fair);
        if (!memcmp(&alloc, &shown[2 * q], sizeof alloc) &&
            !memcmp(&fair, &shown[2 * q + 1], sizeof fair))
            continue;
        row *r = &rows[n++];
        r->name = st->queues[q].name;
        r->depth = st->queues[q].depth;
        for (int i = 0; i < US_NRES; i++) {
            fmt_res(r->used[i], sizeof r->used[i], alloc, i);
            fmt_res(r->fair[i], sizeof r->fair[i], fair, i);
        }
        shown[2 * q] = alloc;
        shown[2 * q + 1] = fair;
    }
    rc = 0;
    if (!n) goto cleanup;
    int wn = (int)strlen("queue"), wu[US_NRES] = {0}, wf[US_NRES] = {0};
    for (size_t k = 0; k < n; k++) {
        wn = imax(wn, indent(rows[k].depth) + slen(rows[k].name));
        for (int i = 0; i < US_NRES; i++) {
            wu[i] = imax(wu[i], slen(rows[k].used[i]));
            wf[i] = imax(wf[i], slen(rows[k].fair[i]));
        }
    }
    /* Each cell is "used / fair", aligned on the slash; a header wider than
     * its cells widens the fair part. */
    for (int i = 0; i < US_NRES; i++) wf[i] = imax(wf[i], slen(heads[i]) - wu[i] - 3);
    fprintf(f, "  %-*s", wn, "queue");
    for (int i = 0; i < US_NRES; i++) fprintf(f, "   %-*s", wu[i] + 3 + wf[i], heads[i]);
    fputs("   (used / fair share)\n", f);
    for (size_t k = 0; k < n; k++) {
        const row *r = &rows[k];
        fprintf(f, "  %*s%-*s", indent(r->depth), "", wn - indent(r->depth), nz(r->name));
        for (int i = 0; i < US_NRES; i++) {
            int pad = i + 1 < US_NRES ? wf[i] : 0; /* no trailing blanks */
            fprintf(f, "   %*s / %-*s", wu[i], r->used[i], pad, r->fair[i]);
        }
        fputc('\n', f);
    }
cleanup:
    free(rows);
    return rc;
}

static void text_quiet(FILE *f, const us_sim_result *res, size_t from, size_t to) {
    char t1[64], t2[64];
    const us_sim_cycle *a = &res->cycles[from], *b = &res->cycles[to];
    if (from == to)
        fprintf(f, "cycle %d  t=%s: no change\n\n", a->index, fmt_time(t1, sizeof t1, a->time));
    else
        fprintf(f, "cycles %d-%d  t=%s-%s: no change\n\n", a->index, b->index,
                fmt_time(t1, sizeof t1, a->time), fmt_time(t2, sizeof t2, b->time));
}

/* The run's figures: counts, then the harvest and disturbance tables. */
static void text_summary(FILE *f, const us_sim_result *res) {
    fputs("summary\n", f);
    fprintf(f, "  cycles                %zu\n", res->ncycles);
    fprintf(f, "  background evictions  %d\n", res->totals.background_evictions);
    fprintf(f, "  preemptions           %d\n", res->totals.preemptions);
    fprintf(f, "  reclaims              %d\n", res->totals.reclaims);
    fprintf(f, "  AI pods pending       %d\n", res->ai_pods_pending);
    us_fig_text(f, res);
    fputc('\n', f);
}

/* Write text with every control character shown as an escape: names and
 * messages come from the input and from policies, and a terminal escape
 * sequence in one must not reach the reader's terminal.  Kept: newlines.
 * C0 controls and DEL become \xNN, C1 controls (U+0080..U+009F, which
 * some terminals obey too) \uNNNN. */
static int write_escaped(FILE *f, const char *s, size_t n) {
    size_t run = 0;  /* start of the bytes not yet written, all plain */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i], d = i + 1 < n ? (unsigned char)s[i + 1] : 0;
        bool c0 = (c < 0x20 && c != '\n') || c == 0x7f, c1 = c == 0xc2 && d >= 0x80 && d <= 0x9f;
        if (!c0 && !c1) continue;
        if (fwrite(s + run, 1, i - run, f) != i - run) return -1;
        if (c1 ? fprintf(f, "\\u%04x", d) < 0 : fprintf(f, "\\x%02x", c) < 0) return -1;
        i += c1;
        run = i + 1;
    }
    return fwrite(s + run, 1, n - run, f) == n - run ? 0 : -1;
}

static int render_text(FILE *f, const us_sim_result *res, const us_state *final, bool verbose,
                       us_err *err);

int us_output_text(FILE *f, const us_sim_result *res, const us_state *final, us_err *err) {
    return us_output_account(f, res, final, false, err);
}

int us_output_account(FILE *f, const us_sim_result *res, const us_state *final, bool verbose, us_err *err) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    int rc;
    if (!m) return us_err_nomem(err);
    rc = render_text(m, res, final, verbose, err);
    if (fclose(m) != 0 && rc == 0) rc = us_err_nomem(err);
    if (rc == 0 && (write_escaped(f, buf, len) < 0 || fflush(f) != 0))
        rc = us_err_set(err, US_EIO, "cannot write the output");
    free(buf);
    return rc;
}

static int render_text(FILE *f, const us_sim_result *res, const us_state *final, bool verbose, us_err *err) {
    int rc = -1;
    char t1[64], t2[64];
    size_t nq = res->nqueues < final->nqueues ? res->nqueues : final->nqueues;
    us_res *shown = calloc(2 * nq + 1, sizeof *shown);
    us_rollup_names *ix = NULL;  /* built at the first cycle with decisions */
    if (!shown) {
        us_err_nomem(err);
        goto cleanup;
    }

    fprintf(f, "understory simulation: %s\n", res->scenario ? res->scenario : "(unnamed)");
    size_t active_nodes = 0, workloads = 0;
    for (size_t i = 0; i < final->nnodes; i++) active_nodes += !final->nodes[i].removed;
    /* submitted and not deleted: what the cluster still holds */
    for (size_t i = 0; i < final->nworkloads; i++)
        workloads += final->workloads[i].state == US_WL_ACTIVE ||
                     final->workloads[i].state == US_WL_COMPLETED;
    fprintf(f, "  %zu cycle%s", res->ncycles, res->ncycles == 1 ? "" : "s");
    if (res->ncycles)
        fprintf(f, ", t=%s to %s", fmt_time(t1, sizeof t1, res->cycles[0].time),
                fmt_time(t2, sizeof t2, res->cycles[res->ncycles - 1].time));
    fprintf(f, "; %zu node%s, %zu queue%s, %zu workload%s at the end\n", active_nodes,
            active_nodes == 1 ? "" : "s", final->nqueues, final->nqueues == 1 ? "" : "s",
            workloads, workloads == 1 ? "" : "s");
    fprintf(f, "  policy %s\n", res->ncycles ? res->cycles[0].policy : res->policy);
    if (!verbose) fputs("  decisions rolled up per workload; --verbose lists every pod\n", f);
    fputc('\n', f);
    text_summary(f, res);
    us_rollup_legend(f);
    fputc('\n', f);

    size_t quiet_from = 0;
    bool quiet = false;
    for (size_t i = 0; i < res->ncycles; i++) {
        const us_sim_cycle *c = &res->cycles[i];
        bool new_policy = i > 0 && strcmp(c->policy, res->cycles[i - 1].policy) != 0;
        if (!c->nchanges && !c->log.ndecisions && !c->log.nevents && !c->log.nlines && !c->log.dropped_lines &&
            !new_policy &&
            !figures_changed(c, nq, shown)) {
            if (!quiet) quiet_from = i;
            quiet = true;
            continue;
        }
        if (quiet) text_quiet(f, res, quiet_from, i - 1);
        quiet = false;
        fprintf(f, "cycle %d  t=%s\n", c->index, fmt_time(t1, sizeof t1, c->time));
        if (new_policy) fprintf(f, "  policy now %s\n", c->policy);
        text_changes(f, c);
        if (verbose) text_decisions(f, &c->log);
        else if ((!ix && !(ix = us_rollup_names_new(final))) || us_rollup_decisions(f, "  ", &c->log, ix) < 0)
            goto nomem;
        text_events(f, &c->log);
        text_log_lines(f, &c->log);
        if (text_queue_table(f, final, c, nq, shown) < 0) goto nomem;
        fputc('\n', f);
    }
    if (quiet) text_quiet(f, res, quiet_from, res->ncycles - 1);

    fprintf(f, "final  t=%s\n", fmt_time(t1, sizeof t1, res->final_time));
    size_t live = 0;
    for (size_t i = 0; i < final->npods; i++) live += !final->pods[i].gone;
    if (!live) fputs("  no pods\n", f);
    if ((verbose ? us_rollup_pods_each(f, final) : us_rollup_pods(f, final)) < 0) goto nomem;
    if (fflush(f) == EOF || ferror(f)) {
        us_err_set(err, US_EIO, "cannot write the output");
        goto cleanup;
    }
    rc = 0;
    goto cleanup;
nomem:
    us_err_nomem(err);
cleanup:
    free(shown);
    us_rollup_names_free(ix);
    return rc;
}
