/*
 * metrics.c — the Prometheus registry (metrics.h).  Families are kept in
 * an array and series in each family sorted by label values, so rendering
 * walks both in order without sorting.  Owns only memory; no I/O, no
 * clock, no knowledge of what a metric means.
 */
#include "metrics.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum kind { COUNTER, GAUGE, HISTOGRAM } kind;

typedef struct series {
    char **values;      /* one per label */
    double value;       /* counter, gauge; a histogram's sum */
    double count;       /* histogram: observations */
    double *buckets;    /* histogram: per bound, not cumulative */
} series;

struct sv_metric {
    kind kind;
    char *name, *help;
    char **labels;
    size_t nlabels;
    double *bounds;
    size_t nbounds;
    series *s;
    size_t n, cap;
};

struct sv_metrics {
    sv_metric **f;
    size_t n, cap;
};

static bool name_ok(const char *s, bool colon) {
    if (!s || !*s) return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
        if (!alpha && !(p > s && c >= '0' && c <= '9')) return false;
    }
    return true;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void family_free(sv_metric *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) {
        for (size_t j = 0; j < f->nlabels; j++) free(f->s[i].values[j]);
        free(f->s[i].values);
        free(f->s[i].buckets);
    }
    for (size_t j = 0; j < f->nlabels; j++) free(f->labels[j]);
    free(f->labels);
    free(f->s);
    free(f->bounds);
    free(f->name);
    free(f->help);
    free(f);
}

sv_metrics *sv_metrics_new(void) { return calloc(1, sizeof(sv_metrics)); }

void sv_metrics_free(sv_metrics *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) family_free(m->f[i]);
    free(m->f);
    free(m);
}

static sv_metric *family(sv_metrics *m, kind k, const char *name, const char *help, const char *const *labels,
                         const double *bounds, size_t nbounds) {
    size_t nl = 0, at = 0;
    sv_metric *f = NULL;
    if (!m || !name_ok(name, true) || !help) return NULL;
    if (k == COUNTER && !ends_with(name, "_total")) return NULL;
    if (k != COUNTER && ends_with(name, "_total")) return NULL;
    while (labels && labels[nl]) {
        const char *l = labels[nl];
        if (!name_ok(l, false) || strncmp(l, "__", 2) == 0 || (k == HISTOGRAM && strcmp(l, "le") == 0)) return NULL;
        for (size_t j = 0; j < nl; j++)
            if (strcmp(labels[j], l) == 0) return NULL;
        if (++nl > SV_METRICS_MAX_LABELS) return NULL;
    }
    for (size_t i = 0; i < nbounds; i++)
        if (!isfinite(bounds[i]) || (i && bounds[i] <= bounds[i - 1])) return NULL;
    /* sorted by name; a taken name (or a histogram's derived ones) refused */
    for (at = 0; at < m->n; at++) {
        int c = strcmp(m->f[at]->name, name);
        if (c == 0) return NULL;
        if (c > 0) break;
    }
    if (m->n == m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 16;
        sv_metric **nf = realloc(m->f, ncap * sizeof *nf);
        if (!nf) return NULL;
        m->f = nf;
        m->cap = ncap;
    }
    if (!(f = calloc(1, sizeof *f))) return NULL;
    f->kind = k;
    f->nlabels = nl;
    f->nbounds = nbounds;
    if (!(f->name = strdup(name)) || !(f->help = strdup(help))) goto fail;
    if (nl && !(f->labels = calloc(nl, sizeof *f->labels))) goto fail;
    for (size_t j = 0; j < nl; j++)
        if (!(f->labels[j] = strdup(labels[j]))) goto fail;
    if (nbounds) {
        if (!(f->bounds = malloc(nbounds * sizeof *f->bounds))) goto fail;
        memcpy(f->bounds, bounds, nbounds * sizeof *f->bounds);
    }
    memmove(m->f + at + 1, m->f + at, (m->n - at) * sizeof *m->f);
    m->f[at] = f;
    m->n++;
    return f;
fail:
    family_free(f);
    return NULL;
}

sv_metric *sv_metrics_counter(sv_metrics *m, const char *name, const char *help, const char *const *labels) {
    return family(m, COUNTER, name, help, labels, NULL, 0);
}

sv_metric *sv_metrics_gauge(sv_metrics *m, const char *name, const char *help, const char *const *labels) {
    return family(m, GAUGE, name, help, labels, NULL, 0);
}

sv_metric *sv_metrics_histogram(sv_metrics *m, const char *name, const char *help, const char *const *labels,
                                const double *bounds, size_t nbounds) {
    return family(m, HISTOGRAM, name, help, labels, bounds, nbounds);
}

/* <0, 0, >0 as the series' values compare with values, label by label. */
static int cmp_values(const sv_metric *f, char *const *a, const char *const *b) {
    for (size_t j = 0; j < f->nlabels; j++) {
        int c = strcmp(a[j], b[j] ? b[j] : "");
        if (c) return c;
    }
    return 0;
}

/* The series for values: found, or made when make (NULL: not there, or
 * out of memory). */
static series *lookup(sv_metric *f, const char *const *values, bool make) {
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = cmp_values(f, f->s[mid].values, values);
        if (c == 0) return &f->s[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    if (!make) return NULL;
    if (f->n == f->cap) {
        size_t ncap = f->cap ? f->cap * 2 : 8;
        series *ns = realloc(f->s, ncap * sizeof *ns);
        if (!ns) return NULL;
        f->s = ns;
        f->cap = ncap;
    }
    series x = {0};
    if (f->nlabels && !(x.values = calloc(f->nlabels, sizeof *x.values))) goto fail;
    for (size_t j = 0; j < f->nlabels; j++)
        if (!(x.values[j] = strdup(values && values[j] ? values[j] : ""))) goto fail;
    if (f->kind == HISTOGRAM && f->nbounds && !(x.buckets = calloc(f->nbounds, sizeof *x.buckets))) goto fail;
    memmove(f->s + lo + 1, f->s + lo, (f->n - lo) * sizeof *f->s);
    f->s[lo] = x;
    f->n++;
    return &f->s[lo];
fail:
    for (size_t j = 0; x.values && j < f->nlabels; j++) free(x.values[j]);
    free(x.values);
    return NULL;
}

int sv_metric_add(sv_metric *f, const char *const *values, double v) {
    if (!f || f->kind == HISTOGRAM || isnan(v) || (f->kind == COUNTER && v < 0)) return -1;
    series *s = lookup(f, values, true);
    if (!s) return -1;
    s->value += v;
    return 0;
}

int sv_metric_set(sv_metric *f, const char *const *values, double v) {
    if (!f || f->kind == HISTOGRAM) return -1;
    if (f->kind == COUNTER) {
        series *s = lookup(f, values, false);
        if (isnan(v) || v < (s ? s->value : 0)) return -1;
    }
    series *s = lookup(f, values, true);
    if (!s) return -1;
    s->value = v;
    return 0;
}

int sv_metric_observe(sv_metric *f, const char *const *values, double v) {
    if (!f || f->kind != HISTOGRAM || isnan(v)) return -1;
    series *s = lookup(f, values, true);
    if (!s) return -1;
    s->value += v;
    s->count += 1;
    for (size_t i = 0; i < f->nbounds; i++)
        if (v <= f->bounds[i]) {
            s->buckets[i] += 1;
            break;
        }
    return 0;
}

void sv_metric_clear(sv_metric *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) {
        for (size_t j = 0; j < f->nlabels; j++) free(f->s[i].values[j]);
        free(f->s[i].values);
        free(f->s[i].buckets);
    }
    f->n = 0;
}

double sv_metric_value(const sv_metric *f, const char *const *values) {
    if (!f) return 0;
    series *s = lookup((sv_metric *)f, values, false);
    return !s ? 0 : f->kind == HISTOGRAM ? s->count : s->value;
}

/* ---- rendering --------------------------------------------------------- */

typedef struct buf {
    char *p;
    size_t n, cap;
    bool oom;
} buf;

static void put(buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 4096;
        while (b->n + n + 1 > ncap) ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

/* Escaped as the format asks: backslash and newline always, the double
 * quote inside label values only. */
static void put_escaped(buf *b, const char *s, bool quote) {
    for (; *s; s++) {
        if (*s == '\\') puts_(b, "\\\\");
        else if (*s == '\n') puts_(b, "\\n");
        else if (quote && *s == '"') puts_(b, "\\\"");
        else put(b, s, 1);
    }
}

/* The shortest decimal that reads back as v; Go's spellings of the
 * infinities and NaN, as Prometheus writes them. */
static void put_number(buf *b, double v) {
    char t[40];
    if (isnan(v)) snprintf(t, sizeof t, "NaN");
    else if (isinf(v)) snprintf(t, sizeof t, v > 0 ? "+Inf" : "-Inf");
    else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, v);
            if (strtod(t, NULL) == v) break;
        }
    }
    puts_(b, t);
}

static void put_labels(buf *b, const sv_metric *f, const series *s, const char *le) {
    if (!f->nlabels && !le) return;
    puts_(b, "{");
    for (size_t j = 0; j < f->nlabels; j++) {
        if (j) puts_(b, ",");
        puts_(b, f->labels[j]);
        puts_(b, "=\"");
        put_escaped(b, s->values[j], true);
        puts_(b, "\"");
    }
    if (le) {
        if (f->nlabels) puts_(b, ",");
        puts_(b, "le=\"");
        puts_(b, le);
        puts_(b, "\"");
    }
    puts_(b, "}");
}

static void put_sample(buf *b, const sv_metric *f, const char *suffix, const series *s, const char *le,
                       double v) {
    puts_(b, f->name);
    puts_(b, suffix);
    put_labels(b, f, s, le);
    puts_(b, " ");
    put_number(b, v);
    puts_(b, "\n");
}

char *sv_metrics_render(const sv_metrics *m, size_t *len) {
    static const char *const types[] = {"counter", "gauge", "histogram"};
    buf b = {0};
    put(&b, "", 0); /* an empty registry is an empty string, not NULL */
    for (size_t i = 0; m && i < m->n; i++) {
        const sv_metric *f = m->f[i];
        puts_(&b, "# HELP ");
        puts_(&b, f->name);
        puts_(&b, " ");
        put_escaped(&b, f->help, false);
        puts_(&b, "\n# TYPE ");
        puts_(&b, f->name);
        puts_(&b, " ");
        puts_(&b, types[f->kind]);
        puts_(&b, "\n");
        for (size_t k = 0; k < f->n; k++) {
            const series *s = &f->s[k];
            if (f->kind != HISTOGRAM) {
                put_sample(&b, f, "", s, NULL, s->value);
                continue;
            }
            double cum = 0;
            for (size_t q = 0; q < f->nbounds; q++) {
                buf le = {0};
                put_number(&le, f->bounds[q]);
                cum += s->buckets[q];
                if (le.oom) b.oom = true;
                else put_sample(&b, f, "_bucket", s, le.p, cum);
                free(le.p);
            }
            put_sample(&b, f, "_bucket", s, "+Inf", s->count);
            put_sample(&b, f, "_sum", s, NULL, s->value);
            put_sample(&b, f, "_count", s, NULL, s->count);
        }
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len) *len = b.n;
    return b.p;
}
