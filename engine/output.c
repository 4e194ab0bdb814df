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
#include "rollup.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON ---------------------------------------------------------------- */

/* Beyond this magnitude cJSON would print an integral double with an
 * exponent ("%1.15g"), so such integers are written as raw text. */
#define BIG_INT 1000000000000000LL

static cJSON *int_item(int64_t v) {
    if (v > -BIG_INT && v < BIG_INT) return cJSON_CreateNumber((double)v);
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    cJSON *it = cJSON_CreateRaw(buf);
    if (it) {
        it->valuedouble = (double)v;
        it->valueint = v > 0 ? INT32_MAX : INT32_MIN;
    }
    return it;
}

static cJSON *str_item(const char *s) {
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

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

cJSON *us_output_res(us_res r) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    if (us_output_put(o, us_res_names[US_GPU], cJSON_CreateNumber((double)r.v[US_GPU] / US_GPU_UNIT)) < 0 ||
        us_output_put(o, us_res_names[US_CPU], int_item(r.v[US_CPU])) < 0 ||
        us_output_put(o, us_res_names[US_MEM], int_item(r.v[US_MEM])) < 0)
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

/* Fair shares are fractional in engine units; output rounds them to the
 * engine's unit (milli-device, millicore, byte) so figures stay exact. */
static us_res round_fair(const double fair[US_NRES]) {
    us_res r;
    for (int i = 0; i < US_NRES; i++) r.v[i] = us_res_round(fair[i]);
    return r;
}

cJSON *us_output_decision(const us_decision *d) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    if (us_output_put(o, "op", cJSON_CreateString(us_op_names[d->op])) < 0 ||
        us_output_put(o, "pod", str_item(d->pod)) < 0 || us_output_put(o, "node", str_item(d->node)) < 0)
        goto fail;
    if (d->op == US_OP_PIPELINE) {
        cJSON *w = cJSON_CreateArray();
        if (us_output_put(o, "waits_for", w) < 0) goto fail;
        for (size_t i = 0; i < d->nwaits; i++)
            if (us_output_push(w, str_item(d->waits_for[i])) < 0) goto fail;
    }
    if (d->action != US_ACT_NONE &&
        us_output_put(o, "action", cJSON_CreateString(us_action_names[d->action])) < 0)
        goto fail;
    if (d->op == US_OP_EVICT && d->evictor && us_output_put(o, "evictor", cJSON_CreateString(d->evictor)) < 0)
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

static cJSON *event_json(const us_event *e) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    if (us_output_put(o, "type", str_item(e->type)) < 0 || us_output_put(o, "reason", str_item(e->reason)) < 0 ||
        us_output_put(o, "object", str_item(e->object)) < 0 || us_output_put(o, "message", str_item(e->message)) < 0)
        goto fail;
    if (e->annotations.n) {
        cJSON *a = cJSON_CreateObject();
        if (us_output_put(o, "annotations", a) < 0) goto fail;
        for (size_t i = 0; i < e->annotations.n; i++)
            if (us_output_put(a, e->annotations.items[i].key, str_item(e->annotations.items[i].value)) < 0)
                goto fail;
    }
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

/* A workload change names its workload, a node change its node. */
static bool about_node(us_change_kind a) { return a >= US_CH_ADD_NODE && a <= US_CH_UNCORDON; }

static cJSON *change_json(const us_change *ch) {
    cJSON *o = cJSON_CreateObject(), *pods;
    if (!o) return NULL;
    if (us_output_put(o, "action", cJSON_CreateString(us_change_names[ch->action])) < 0 ||
        us_output_put(o, about_node(ch->action) ? "node" : "workload", str_item(ch->object)) < 0 ||
        (ch->action == US_CH_COMPLETE &&
         us_output_put(o, "cause", cJSON_CreateString(ch->by_duration ? "duration" : "timeline")) < 0) ||
        us_output_put(o, "pods", pods = cJSON_CreateArray()) < 0)
        goto fail;
    for (size_t i = 0; i < ch->npods; i++)
        if (us_output_push(pods, str_item(ch->pods[i])) < 0) goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

static cJSON *cycle_json(const us_sim_result *res, const us_state *st, size_t i) {
    const us_sim_cycle *c = &res->cycles[i];
    cJSON *o = cJSON_CreateObject(), *decisions, *events, *changes;
    if (!o) return NULL;
    if (us_output_put(o, "cycle", cJSON_CreateNumber(c->index)) < 0 ||
        us_output_put(o, "time", cJSON_CreateNumber(c->time)) < 0 ||
        us_output_put(o, "policy", cJSON_CreateString(c->policy)) < 0 ||
        us_output_put(o, "changes", changes = cJSON_CreateArray()) < 0 ||
        us_output_put(o, "decisions", decisions = cJSON_CreateArray()) < 0 ||
        us_output_put(o, "events", events = cJSON_CreateArray()) < 0)
        goto fail;
    for (size_t k = 0; k < c->nchanges; k++)
        if (us_output_push(changes, change_json(&c->changes[k])) < 0) goto fail;
    for (size_t k = 0; k < c->log.ndecisions; k++)
        if (us_output_push(decisions, us_output_decision(&c->log.decisions[k])) < 0) goto fail;
    for (size_t k = 0; k < c->log.nevents; k++)
        if (us_output_push(events, event_json(&c->log.events[k])) < 0) goto fail;
    if (c->log.nlines || c->log.dropped_lines) {
        cJSON *lines = cJSON_CreateArray();
        if (us_output_put(o, "log", lines) < 0) goto fail;
        for (size_t k = 0; k < c->log.nlines; k++) {
            const us_log_line *l = &c->log.lines[k];
            cJSON *it = cJSON_CreateObject();
            if (us_output_push(lines, it) < 0 || us_output_put(it, "file", str_item(l->file)) < 0 ||
                us_output_put(it, "line", cJSON_CreateNumber(l->line)) < 0 ||
                us_output_put(it, "message", str_item(l->text)) < 0)
                goto fail;
        }
        if (c->log.dropped_lines &&
            us_output_put(o, "log_dropped", cJSON_CreateNumber((double)c->log.dropped_lines)) < 0)
            goto fail;
    }
    if (us_output_put(o, "pools", us_fig_cycle_pools(res, i)) < 0 ||
        us_output_put(o, "queues", us_fig_cycle_queues(res, st, i)) < 0)
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

static const char *workload_name(const us_state *st, int w) {
    return w >= 0 && (size_t)w < st->nworkloads ? st->workloads[w].name : NULL;
}

static const char *node_name(const us_state *st, int n) {
    return n >= 0 && (size_t)n < st->nnodes ? st->nodes[n].name : NULL;
}

static cJSON *pod_json(const us_state *st, const us_pod *p) {
    int w = p->workload;
    bool bg = w >= 0 && (size_t)w < st->nworkloads && st->workloads[w].background;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    if (us_output_put(o, "name", str_item(p->name)) < 0 ||
        us_output_put(o, "workload", str_item(workload_name(st, w))) < 0 ||
        us_output_put(o, "node", str_item(node_name(st, p->node))) < 0 ||
        us_output_put(o, "state", cJSON_CreateString(us_pod_state_names[p->state])) < 0 ||
        us_output_put(o, "background", cJSON_CreateBool(bg)) < 0)
        goto fail;
    /* only when set, so documents without external workloads are unchanged */
    if (w >= 0 && (size_t)w < st->nworkloads && st->workloads[w].external &&
        us_output_put(o, "external", cJSON_CreateBool(true)) < 0)
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

/* The figures of queue q after the last cycle; NULL when there are none. */
static const us_queue_figures *last_figures(const us_sim_result *res, size_t q) {
    if (!res->ncycles || q >= res->nqueues) return NULL;
    const us_sim_cycle *c = &res->cycles[res->ncycles - 1];
    return c->queues ? &c->queues[q] : NULL;
}

static cJSON *queue_json(const us_sim_result *res, const us_state *st, size_t q) {
    const us_queue_figures *f = last_figures(res, q);
    us_res alloc = {{0}}, fair = {{0}};
    if (f) {
        alloc = f->allocated;
        fair = round_fair(f->fair);
    }
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    if (us_output_put(o, "name", str_item(st->queues[q].name)) < 0 ||
        us_output_put(o, "allocated", us_output_res(alloc)) < 0 ||
        us_output_put(o, "fair_share", us_output_res(fair)) < 0)
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

static cJSON *final_json(const us_sim_result *res, const us_state *st) {
    cJSON *o = cJSON_CreateObject(), *pods, *queues;
    if (!o) return NULL;
    if (us_output_put(o, "time", cJSON_CreateNumber(res->final_time)) < 0 ||
        us_output_put(o, "pods", pods = cJSON_CreateArray()) < 0 ||
        us_output_put(o, "queues", queues = cJSON_CreateArray()) < 0)
        goto fail;
    for (size_t i = 0; i < st->npods; i++)
        if (!st->pods[i].gone && us_output_push(pods, pod_json(st, &st->pods[i])) < 0) goto fail;
    for (size_t q = 0; q < st->nqueues; q++)
        if (us_output_push(queues, queue_json(res, st, q)) < 0) goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

static cJSON *summary_json(const us_sim_result *res) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    if (us_output_put(o, "cycles", cJSON_CreateNumber((double)res->ncycles)) < 0 ||
        us_output_put(o, "background_evictions", cJSON_CreateNumber(res->totals.background_evictions)) < 0 ||
        us_output_put(o, "preemptions", cJSON_CreateNumber(res->totals.preemptions)) < 0 ||
        us_output_put(o, "reclaims", cJSON_CreateNumber(res->totals.reclaims)) < 0 ||
        us_output_put(o, "ai_pods_pending", cJSON_CreateNumber(res->ai_pods_pending)) < 0 ||
        us_output_put(o, "harvest", us_fig_summary(res)) < 0)
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

cJSON *us_output_document(const us_sim_result *res, const us_state *final) {
    cJSON *doc = cJSON_CreateObject(), *cycles;
    if (!doc) return NULL;
    if (us_output_put(doc, "scenario", str_item(res->scenario)) < 0 ||
        us_output_put(doc, "policy", cJSON_CreateString(res->policy)) < 0 ||
        us_output_put(doc, "cycles", cycles = cJSON_CreateArray()) < 0)
        goto fail;
    for (size_t i = 0; i < res->ncycles; i++)
        if (us_output_push(cycles, cycle_json(res, final, i)) < 0) goto fail;
    if (us_output_put(doc, "final", final_json(res, final)) < 0 || us_output_put(doc, "summary", summary_json(res)) < 0)
        goto fail;
    return doc;
fail:
    cJSON_Delete(doc);
    return NULL;
}

int us_output_json(FILE *f, const us_sim_result *res, const us_state *final, us_err *err) {
    int rc = -1;
    char *text = NULL;
    cJSON *doc = us_output_document(res, final);
    if (!doc || !(text = cJSON_Print(doc))) {
        us_err_nomem(err);
        goto cleanup;
    }
    if (fputs(text, f) == EOF || fputc('\n', f) == EOF || fflush(f) == EOF) {
        us_err_set(err, US_EIO, "cannot write the output");
        goto cleanup;
    }
    rc = 0;
cleanup:
    free(text);
    cJSON_Delete(doc);
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
        else if (us_rollup_decisions(f, "  ", &c->log, final) < 0) goto nomem;
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
    return rc;
}
