/*
 * events.c — appending decisions and events to a cycle log.
 */
#include "events.h"
#include "utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const us_op_names[] = {"bind", "pipeline", "evict"};
const char *const us_action_names[] = {"allocate", "reclaim", "preempt", "backgroundpods",
                                       "stalegangeviction", "none"};

void us_cycle_log_init(us_cycle_log *log) { memset(log, 0, sizeof *log); }

static void decision_free(us_decision *d) {
    free(d->pod);
    free(d->node);
    free(d->evictor);
    for (size_t i = 0; i < d->nwaits; i++) free(d->waits_for[i]);
    free(d->waits_for);
}

static void event_free(us_event *e) {
    free(e->reason);
    free(e->object);
    free(e->message);
    us_labels_free(&e->annotations);
}

void us_cycle_log_free(us_cycle_log *log) {
    for (size_t i = 0; i < log->ndecisions; i++) decision_free(&log->decisions[i]);
    for (size_t i = 0; i < log->nevents; i++) event_free(&log->events[i]);
    for (size_t i = 0; i < log->nlines; i++) {
        free(log->lines[i].file);
        free(log->lines[i].text);
    }
    free(log->decisions);
    free(log->events);
    free(log->lines);
    memset(log, 0, sizeof *log);
}

int us_log_line_add(us_cycle_log *log, const char *file, int line, const char *text) {
    if (us_grow((void **)&log->lines, &log->cap_lines, log->nlines, sizeof *log->lines) < 0) return -1;
    us_log_line *l = &log->lines[log->nlines];
    l->file = strdup(file ? file : "?");
    l->text = strdup(text ? text : "");
    l->line = line;
    if (!l->file || !l->text) {
        free(l->file);
        free(l->text);
        return -1;
    }
    log->nlines++;
    return 0;
}

/* A copy of s, made valid UTF-8: messages carry what policies raise and
 * buffers may cut a character in two, and the output must stay valid. */
static char *dup_or_null(const char *s, int *fail) {
    if (!s) return NULL;
    char *c = us_utf8_dup_valid(s);
    if (!c) *fail = 1;
    return c;
}

int us_log_decision(us_cycle_log *log, us_op op, us_action act, const char *pod, int workload,
                    const char *node, const char *const *waits, size_t nwaits,
                    const char *evictor) {
    if (us_grow((void **)&log->decisions, &log->cap_decisions, log->ndecisions,
             sizeof *log->decisions) < 0)
        return -1;
    us_decision d = {.op = op, .action = act, .workload = workload};
    int fail = 0;
    d.pod = dup_or_null(pod, &fail);
    d.node = dup_or_null(node, &fail);
    d.evictor = dup_or_null(evictor, &fail);
    if (nwaits) {
        d.waits_for = calloc(nwaits, sizeof *d.waits_for);
        if (!d.waits_for) fail = 1;
        for (size_t i = 0; !fail && i < nwaits; i++) {
            d.waits_for[i] = dup_or_null(waits[i], &fail);
            d.nwaits = i + 1;
        }
    }
    if (fail) {
        decision_free(&d);
        return -1;
    }
    log->decisions[log->ndecisions++] = d;
    return 0;
}

int us_log_event(us_cycle_log *log, const char *type, const char *reason,
                 const char *object, const char *const *annotations,
                 const char *fmt, ...) {
    if (us_grow((void **)&log->events, &log->cap_events, log->nevents, sizeof *log->events) < 0)
        return -1;
    us_event e = {.type = type};
    int fail = 0;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    e.reason = dup_or_null(reason, &fail);
    e.object = dup_or_null(object, &fail);
    e.message = dup_or_null(buf, &fail);
    size_t n = 0;
    while (annotations && annotations[2 * n]) n++;
    if (n && !fail) {
        e.annotations.items = calloc(n, sizeof *e.annotations.items);
        if (!e.annotations.items) fail = 1;
        for (size_t i = 0; !fail && i < n; i++) {
            e.annotations.items[i].key = dup_or_null(annotations[2 * i], &fail);
            e.annotations.items[i].value = dup_or_null(annotations[2 * i + 1], &fail);
            e.annotations.n = i + 1;
        }
    }
    if (fail) {
        event_free(&e);
        return -1;
    }
    log->events[log->nevents++] = e;
    return 0;
}
