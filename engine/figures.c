/*
 * figures.c — the harvest figures and per-cycle queue figures rendered as
 * JSON pieces, readable tables and CSV files.
 *
 * Owns the presentation of those figures only: the document around them is
 * output.c's, the HTML report report.c's.  It must never change what it
 * reads nor read a clock: the same run renders to the same bytes.
 */
#include "figures.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "output.h"

double us_fig_ratio(double r) { return r < 0 ? -1 : round(r * 10000) / 10000; }

static int put_num(cJSON *o, const char *key, double v) {
    return us_output_put(o, key, cJSON_CreateNumber(v));
}

cJSON *us_fig_cycle_pools(const us_sim_result *res, size_t i) {
    const us_harvest *h = &res->harvest;
    cJSON *arr = cJSON_CreateArray();
    if (!arr || i >= h->ncycles) return arr;
    for (size_t k = 0; k < h->npools; k++) {
        const us_hv_pool *p = &h->cycles[i].pools[k];
        cJSON *o = cJSON_CreateObject();
        if (us_output_push(arr, o) < 0 || us_output_put(o, "pool", cJSON_CreateString(h->pools[k])) < 0 ||
            put_num(o, "gpus", p->gpus) < 0 || put_num(o, "ai", p->ai) < 0 ||
            put_num(o, "background", p->background) < 0 || put_num(o, "idle", p->idle) < 0 ||
            put_num(o, "pending_ai", p->pending_ai) < 0 ||
            put_num(o, "pending_background", p->pending_background) < 0 ||
            put_num(o, "background_evictions", p->evictions) < 0 ||
            put_num(o, "background_evictions_needed", p->needed) < 0)
            goto fail;
    }
    return arr;
fail:
    cJSON_Delete(arr);
    return NULL;
}

/* A quota vector in output units; -1 (unlimited) stays -1. */
static cJSON *quota_json(us_res q) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    for (int r = 0; r < US_NRES; r++) {
        double v = q.v[r] == US_UNLIMITED ? -1 : r == US_GPU ? (double)q.v[r] / US_GPU_UNIT : (double)q.v[r];
        if (put_num(o, us_res_names[r], v) < 0) goto fail;
    }
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

static us_res rounded(const double v[US_NRES]) {
    us_res r;
    for (int i = 0; i < US_NRES; i++) r.v[i] = isfinite(v[i]) ? llround(v[i]) : 0;
    return r;
}

cJSON *us_fig_cycle_queues(const us_sim_result *res, const us_state *st, size_t i) {
    cJSON *arr = cJSON_CreateArray();
    if (!arr || i >= res->ncycles || !res->cycles[i].queues) return arr;
    const us_hv_cycle *hc = i < res->harvest.ncycles ? &res->harvest.cycles[i] : NULL;
    for (size_t q = 0; q < res->nqueues && q < st->nqueues; q++) {
        const us_queue_figures *f = &res->cycles[i].queues[q];
        cJSON *o = cJSON_CreateObject();
        if (us_output_push(arr, o) < 0 || us_output_put(o, "name", cJSON_CreateString(st->queues[q].name)) < 0 ||
            us_output_put(o, "allocated", us_output_res(f->allocated)) < 0 ||
            us_output_put(o, "fair_share", us_output_res(rounded(f->fair))) < 0 ||
            (hc && q < res->harvest.nqueues && us_output_put(o, "quota", quota_json(hc->quota[q])) < 0))
            goto fail;
    }
    return arr;
fail:
    cJSON_Delete(arr);
    return NULL;
}

static cJSON *figures_json(const us_hv_figures *f) {
    cJSON *o = cJSON_CreateObject(), *gs, *wait;
    if (!o) return NULL;
    double ratio = us_fig_ratio(f->harvest_ratio);
    if (us_output_put(o, "gpu_seconds", gs = cJSON_CreateObject()) < 0 || put_num(gs, "capacity", f->capacity) < 0 ||
        put_num(gs, "ai", f->ai) < 0 || put_num(gs, "background", f->background) < 0 ||
        put_num(gs, "idle", f->idle) < 0 ||
        us_output_put(o, "harvest_ratio", ratio < 0 ? cJSON_CreateNull() : cJSON_CreateNumber(ratio)) < 0 ||
        put_num(o, "background_evictions", f->evictions) < 0 ||
        put_num(o, "background_evictions_needed", f->needed) < 0 ||
        us_output_put(o, "ai_wait_on_grace", wait = cJSON_CreateObject()) < 0 ||
        put_num(wait, "pods", (double)f->waits) < 0 || put_num(wait, "total", f->wait_total) < 0 ||
        put_num(wait, "p50", f->wait_p50) < 0 || put_num(wait, "p99", f->wait_p99) < 0)
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

cJSON *us_fig_summary(const us_sim_result *res) {
    const us_harvest *h = &res->harvest;
    us_hv_figures f;
    us_hv_figures_of(h, -1, &f);
    cJSON *o = figures_json(&f), *pools;
    if (!o) return NULL;
    if (us_output_put(o, "pools", pools = cJSON_CreateArray()) < 0) goto fail;
    for (size_t k = 0; k < h->npools; k++) {
        us_hv_figures_of(h, (int)k, &f);
        cJSON *p = cJSON_CreateObject();
        if (us_output_push(pools, p) < 0 || us_output_put(p, "pool", cJSON_CreateString(h->pools[k])) < 0)
            goto fail;
        cJSON *body = figures_json(&f);
        if (!body) goto fail;
        /* the pool's name first, then the same fields as overall */
        while (body->child) {
            cJSON *it = cJSON_DetachItemViaPointer(body, body->child);
            if (!cJSON_AddItemToObject(p, it->string, it)) {
                cJSON_Delete(it);
                cJSON_Delete(body);
                goto fail;
            }
        }
        cJSON_Delete(body);
    }
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

/* ---- text ------------------------------------------------------------------ */

/* v with up to dec decimals, no trailing zeros: "16", "0.75". */
static const char *num_dec(char *buf, size_t n, double v, int dec) {
    snprintf(buf, n, "%.*f", dec, v);
    char *e = buf + strlen(buf) - 1;
    while (*e == '0') *e-- = '\0';
    if (*e == '.') *e = '\0';
    if (strcmp(buf, "-0") == 0) snprintf(buf, n, "0");
    return buf;
}

const char *us_fig_num(char *buf, size_t n, double v) { return num_dec(buf, n, v, 3); }

const char *us_fig_ratio_text(char *buf, size_t n, double r) {
    r = us_fig_ratio(r);
    if (r < 0) {
        snprintf(buf, n, "-");
        return buf;
    }
    return num_dec(buf, n, r, 4);
}

static const char *secs(char *buf, size_t n, double v) {
    char b[48];
    snprintf(buf, n, "%ss", us_fig_num(b, sizeof b, v));
    return buf;
}

static void text_row(FILE *f, const char *name, int wn, const us_hv_figures *x, bool harvest) {
    char a[48], b[48], c[48], d[48], e[48];
    if (harvest)
        fprintf(f, "  %-*s  %10s  %10s  %10s  %10s  %7s\n", wn, name, us_fig_num(a, sizeof a, x->capacity),
                us_fig_num(b, sizeof b, x->ai), us_fig_num(c, sizeof c, x->background), us_fig_num(d, sizeof d, x->idle),
                us_fig_ratio_text(e, sizeof e, x->harvest_ratio));
    else
        fprintf(f, "  %-*s  %9d  %6d  %8zu  %8s  %6s  %6s\n", wn, name, x->evictions, x->needed, x->waits,
                secs(a, sizeof a, x->wait_total), secs(b, sizeof b, x->wait_p50),
                secs(c, sizeof c, x->wait_p99));
}

void us_fig_text(FILE *f, const us_sim_result *res) {
    const us_harvest *h = &res->harvest;
    char iv[48];
    int wn = (int)strlen("pool");
    for (size_t k = 0; k < h->npools; k++)
        if ((int)strlen(h->pools[k]) > wn) wn = (int)strlen(h->pools[k]);
    if (wn < 5) wn = 5;
    us_hv_figures x;
    fprintf(f, "\nGPU use  (GPU-seconds; each cycle's state counts for %s)\n", secs(iv, sizeof iv, h->interval));
    fprintf(f, "  %-*s  %10s  %10s  %10s  %10s  %7s\n", wn, "pool", "capacity", "AI", "background", "idle",
            "harvest");
    for (size_t k = 0; k < h->npools; k++) {
        us_hv_figures_of(h, (int)k, &x);
        text_row(f, h->pools[k], wn, &x, true);
    }
    if (h->npools > 1) {
        us_hv_figures_of(h, -1, &x);
        text_row(f, "(all)", wn, &x, true);
    }
    fputs("  harvest: background GPU-seconds over those AI left idle\n", f);
    fputs("\ndisturbance  (background pods evicted; AI pods that waited on a background grace period)\n", f);
    fprintf(f, "  %-*s  %9s  %6s  %8s  %8s  %6s  %6s\n", wn, "pool", "evictions", "needed", "AI waits",
            "total", "p50", "p99");
    for (size_t k = 0; k < h->npools; k++) {
        us_hv_figures_of(h, (int)k, &x);
        text_row(f, h->pools[k], wn, &x, false);
    }
    if (h->npools > 1) {
        us_hv_figures_of(h, -1, &x);
        text_row(f, "(all)", wn, &x, false);
    }
    fputs("  needed: evictions no node choice could have avoided (a lower bound)\n", f);
}

/* ---- CSV ------------------------------------------------------------------- */

/* Names are written quoted, with quotes doubled, so any name is one cell. */
static void csv_name(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static FILE *csv_open(const char *dir, const char *name, char *path, size_t n, us_err *err) {
    int k = snprintf(path, n, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= n) {
        us_err_set(err, US_EINVAL, "%s/%s: path too long", dir, name);
        return NULL;
    }
    FILE *f = fopen(path, "w");
    if (!f) us_err_set(err, US_EIO, "%s: %s", path, strerror(errno));
    return f;
}

static int csv_close(FILE *f, const char *path, us_err *err) {
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad) return us_err_set(err, US_EIO, "%s: cannot write", path);
    return 0;
}

static void res_cells(FILE *f, us_res r, bool quota) {
    char b[48];
    for (int i = 0; i < US_NRES; i++) {
        if (quota && r.v[i] == US_UNLIMITED) fputs(",-1", f);
        else if (i == US_GPU) fprintf(f, ",%s", us_fig_num(b, sizeof b, (double)r.v[i] / US_GPU_UNIT));
        else fprintf(f, ",%" PRId64, r.v[i]);
    }
}

static void summary_row(FILE *f, const char *pool, const us_hv_figures *x) {
    char a[48], b[48], c[48], d[48], e[48], g[48], i[48], j[48];
    double r = us_fig_ratio(x->harvest_ratio);
    csv_name(f, pool);
    fprintf(f, ",%s,%s,%s,%s,%s,%d,%d,%zu,%s,%s,%s\n", us_fig_num(a, sizeof a, x->capacity), us_fig_num(b, sizeof b, x->ai),
            us_fig_num(c, sizeof c, x->background), us_fig_num(d, sizeof d, x->idle), r < 0 ? "" : num_dec(e, sizeof e, r, 4),
            x->evictions, x->needed, x->waits, us_fig_num(g, sizeof g, x->wait_total), us_fig_num(i, sizeof i, x->wait_p50),
            us_fig_num(j, sizeof j, x->wait_p99));
}

int us_fig_csv(const char *dir, const us_sim_result *res, const us_state *st, us_err *err) {
    const us_harvest *h = &res->harvest;
    char path[4096], t[48];
    FILE *f;
    if (mkdir(dir, 0777) < 0 && errno != EEXIST)
        return us_err_set(err, US_EIO, "%s: cannot create the directory: %s", dir, strerror(errno));

    if (!(f = csv_open(dir, "pools.csv", path, sizeof path, err))) return -1;
    fputs("cycle,time,pool,gpus,ai,background,idle,pending_ai,pending_background,"
          "background_evictions,background_evictions_needed\n", f);
    for (size_t i = 0; i < h->ncycles; i++)
        for (size_t k = 0; k < h->npools; k++) {
            const us_hv_pool *p = &h->cycles[i].pools[k];
            fprintf(f, "%zu,%s,", i + 1, us_fig_num(t, sizeof t, h->cycles[i].time));
            csv_name(f, h->pools[k]);
            fprintf(f, ",%d,%d,%d,%d,%d,%d,%d,%d\n", p->gpus, p->ai, p->background, p->idle, p->pending_ai,
                    p->pending_background, p->evictions, p->needed);
        }
    if (csv_close(f, path, err) < 0) return -1;

    if (!(f = csv_open(dir, "queues.csv", path, sizeof path, err))) return -1;
    fputs("cycle,time,queue,allocated_gpu,allocated_cpu,allocated_memory,fair_share_gpu,fair_share_cpu,"
          "fair_share_memory,quota_gpu,quota_cpu,quota_memory\n", f);
    for (size_t i = 0; i < res->ncycles; i++) {
        if (!res->cycles[i].queues) continue;
        for (size_t q = 0; q < res->nqueues && q < st->nqueues; q++) {
            const us_queue_figures *qf = &res->cycles[i].queues[q];
            fprintf(f, "%d,%s,", res->cycles[i].index, us_fig_num(t, sizeof t, res->cycles[i].time));
            csv_name(f, st->queues[q].name);
            res_cells(f, qf->allocated, false);
            res_cells(f, rounded(qf->fair), false);
            if (i < h->ncycles && q < h->nqueues) res_cells(f, h->cycles[i].quota[q], true);
            else fputs(",,,", f);
            fputc('\n', f);
        }
    }
    if (csv_close(f, path, err) < 0) return -1;

    if (!(f = csv_open(dir, "nodes.csv", path, sizeof path, err))) return -1;
    fputs("cycle,time,node,pool,gpus,ai,background,idle\n", f);
    for (size_t i = 0; i < h->ncycles; i++)
        for (size_t n = 0; n < h->nnodes; n++) {
            const us_hv_node *nd = &h->cycles[i].nodes[n];
            if (nd->gpus < 0) continue; /* not in the cluster then */
            fprintf(f, "%zu,%s,", i + 1, us_fig_num(t, sizeof t, h->cycles[i].time));
            csv_name(f, h->nodes[n]);
            fputc(',', f);
            csv_name(f, h->node_pool[n] >= 0 ? h->pools[h->node_pool[n]] : "");
            fprintf(f, ",%d,%d,%d,%d\n", nd->gpus, nd->ai, nd->background, nd->gpus - nd->ai - nd->background);
        }
    if (csv_close(f, path, err) < 0) return -1;

    if (!(f = csv_open(dir, "summary.csv", path, sizeof path, err))) return -1;
    fputs("pool,gpu_seconds_capacity,gpu_seconds_ai,gpu_seconds_background,gpu_seconds_idle,harvest_ratio,"
          "background_evictions,background_evictions_needed,ai_waits,ai_wait_total,ai_wait_p50,ai_wait_p99\n",
          f);
    us_hv_figures x;
    for (size_t k = 0; k < h->npools; k++) {
        us_hv_figures_of(h, (int)k, &x);
        summary_row(f, h->pools[k], &x);
    }
    us_hv_figures_of(h, -1, &x);
    summary_row(f, "(all)", &x);
    return csv_close(f, path, err);
}
