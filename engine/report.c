/*
 * report.c — the HTML report of a simulation: one page, inline SVG and CSS,
 * no script, nothing fetched.
 *
 * Owns the page's layout and charts only; the figures come from harvest.c
 * and are printed with figures.c's rounding, so the page's numbers are the
 * JSON summary's.  It must never change what it reads nor read a clock:
 * the same run renders to the same bytes.
 */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "figures.h"
#include "sort.h"

/* Chart geometry, in SVG user units (CSS pixels at 100%). */
#define W 900.0        /* chart width */
#define LM 124.0       /* left margin: y labels, action names */
#define RM 12.0
#define TM 8.0
#define BM 22.0        /* bottom margin: x labels */
#define PW (W - LM - RM)
#define HEAT_COLS 300  /* at most this many columns in the heat strip */

static const char *const C_AI = "#3b6fd4", *const C_BG = "#3aa35b", *const C_IDLE = "#e4e4e4";
/* One colour per action (events.h order); extra actions get the last. */
static const char *const C_ACT[] = {"#2c7fb8", "#d7301f", "#8856a7", "#f28e2b", "#6b6b6b"};
#define N_ACT_COLOURS ((int)(sizeof C_ACT / sizeof *C_ACT))

static const char *act_colour(int a) { return C_ACT[a < N_ACT_COLOURS ? a : N_ACT_COLOURS - 1]; }

static void esc(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* One chart's plot: n cycles across, values 0..max up. */
typedef struct plot {
    size_t n;
    double max, height;
} plot;

static double px(const plot *p, size_t i) { return LM + PW * (double)i / (double)(p->n ? p->n : 1); }
static double py(const plot *p, double v) { return TM + p->height - (p->max > 0 ? v / p->max : 0) * p->height; }

static void svg_open(FILE *f, const char *cls, const char *id, size_t idn, double h, const char *label) {
    fprintf(f, "<svg class=\"chart %s\" id=\"%s-%zu\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"",
            cls, id, idn, W, h, W, h);
    esc(f, label);
    fputs("\">\n", f);
}

/* Frame and x labels: the first cycle's time, the last one's end. */
static void frame(FILE *f, const plot *p, const us_sim_result *res) {
    char a[48], b[48];
    double h = TM + p->height;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n", LM, TM,
            PW, p->height);
    if (!res->ncycles) return;
    double t0 = res->cycles[0].time, t1 = res->cycles[res->ncycles - 1].time + res->harvest.interval;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">t=%ss</text>\n", LM, h + 15, us_fig_num(a, sizeof a, t0));
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">t=%ss</text>\n", W - RM, h + 15,
            us_fig_num(b, sizeof b, t1));
}

/* Frame, x labels and y labels 0 and max. */
static void axes(FILE *f, const plot *p, const us_sim_result *res, const char *unit) {
    char a[48];
    frame(f, p, res);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s %s</text>\n", LM - 4, TM + 9,
            us_fig_num(a, sizeof a, p->max), unit);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">0</text>\n", LM - 4, TM + p->height);
}

/* The band between lo[i] and hi[i], cycle by cycle, as one path. */
static void band(FILE *f, const plot *p, const double *lo, const double *hi, const char *fill, const char *name) {
    if (!p->n) return;
    fprintf(f, "<path class=\"band\" fill=\"%s\" d=\"M%.1f %.1f", fill, px(p, 0), py(p, hi[0]));
    for (size_t i = 0; i < p->n; i++) fprintf(f, "L%.1f %.1fL%.1f %.1f", px(p, i), py(p, hi[i]), px(p, i + 1), py(p, hi[i]));
    for (size_t i = p->n; i-- > 0;) fprintf(f, "L%.1f %.1fL%.1f %.1f", px(p, i + 1), py(p, lo[i]), px(p, i), py(p, lo[i]));
    fprintf(f, "Z\"><title>%s</title></path>\n", name);
}

/* v[i] cycle by cycle, as a step line. */
static void step(FILE *f, const plot *p, const double *v, const char *stroke, const char *dash, const char *name) {
    if (!p->n) return;
    fprintf(f, "<path class=\"line\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s d=\"M%.1f %.1f", stroke,
            dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "", px(p, 0), py(p, v[0]));
    for (size_t i = 0; i < p->n; i++) fprintf(f, "L%.1f %.1fL%.1f %.1f", px(p, i), py(p, v[i]), px(p, i + 1), py(p, v[i]));
    fprintf(f, "\"><title>%s</title></path>\n", name);
}

/* ---- sections ------------------------------------------------------------- */

static void figure_cells(FILE *f, const us_hv_figures *x) {
    char b[48];
    fprintf(f, "<td data-figure=\"capacity\">%s</td>", us_fig_num(b, sizeof b, x->capacity));
    fprintf(f, "<td data-figure=\"ai\">%s</td>", us_fig_num(b, sizeof b, x->ai));
    fprintf(f, "<td data-figure=\"background\">%s</td>", us_fig_num(b, sizeof b, x->background));
    fprintf(f, "<td data-figure=\"idle\">%s</td>", us_fig_num(b, sizeof b, x->idle));
    fprintf(f, "<td data-figure=\"harvest_ratio\">%s</td>", us_fig_ratio_text(b, sizeof b, x->harvest_ratio));
    fprintf(f, "<td data-figure=\"background_evictions\">%d</td>", x->evictions);
    fprintf(f, "<td data-figure=\"background_evictions_needed\">%d</td>", x->needed);
    fprintf(f, "<td data-figure=\"wait_pods\">%zu</td>", x->waits);
    fprintf(f, "<td data-figure=\"wait_total\">%s</td>", us_fig_num(b, sizeof b, x->wait_total));
    fprintf(f, "<td data-figure=\"wait_p50\">%s</td>", us_fig_num(b, sizeof b, x->wait_p50));
    fprintf(f, "<td data-figure=\"wait_p99\">%s</td>", us_fig_num(b, sizeof b, x->wait_p99));
}

static void summary(FILE *f, const us_sim_result *res) {
    const us_harvest *h = &res->harvest;
    us_hv_figures x;
    fputs("<section id=\"summary\"><h2>Summary</h2>\n<table class=\"counts\">", f);
    fprintf(f, "<tr><th>cycles</th><td data-figure=\"cycles\">%zu</td></tr>", res->ncycles);
    fprintf(f, "<tr><th>background evictions</th><td data-figure=\"background_evictions\">%d</td></tr>",
            res->totals.background_evictions);
    fprintf(f, "<tr><th>preemptions</th><td data-figure=\"preemptions\">%d</td></tr>", res->totals.preemptions);
    fprintf(f, "<tr><th>reclaims</th><td data-figure=\"reclaims\">%d</td></tr>", res->totals.reclaims);
    fprintf(f, "<tr><th>AI pods pending at the end</th><td data-figure=\"ai_pods_pending\">%d</td></tr></table>\n",
            res->ai_pods_pending);
    fprintf(f, "<table class=\"figures\"><tr><th rowspan=\"2\">pool</th><th colspan=\"4\">GPU-seconds (a cycle counts "
               "for %gs)</th><th rowspan=\"2\">harvest ratio</th><th colspan=\"2\">background evictions</th>"
               "<th colspan=\"4\">AI waits on background grace</th></tr>\n"
               "<tr><th>capacity</th><th>AI</th><th>background</th><th>idle</th><th>all</th><th>needed</th>"
               "<th>pods</th><th>total s</th><th>p50 s</th><th>p99 s</th></tr>\n",
            h->interval);
    for (size_t k = 0; k <= h->npools; k++) {
        bool all = k == h->npools;
        us_hv_figures_of(h, all ? -1 : (int)k, &x);
        fputs("<tr data-pool=\"", f);
        esc(f, all ? "(all)" : h->pools[k]);
        fputs("\"><th>", f);
        esc(f, all ? "(all)" : h->pools[k]);
        fputs("</th>", f);
        figure_cells(f, &x);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n<p class=\"note\">harvest ratio: background GPU-seconds over those AI left idle. needed: "
          "background evictions no node choice could have avoided (a lower bound). Definitions: "
          "docs/scenario.md, \"Figures\".</p></section>\n",
          f);
}

static void legend(FILE *f) {
    fprintf(f, "<p class=\"legend\"><span style=\"background:%s\"></span>AI <span style=\"background:%s\"></span>"
               "background <span style=\"background:%s\"></span>idle &nbsp; evictions: ",
            C_AI, C_BG, C_IDLE);
    for (int a = US_ACT_ALLOCATE; a < US_ACT_NONE; a++)
        if (a != US_ACT_ALLOCATE) fprintf(f, "<i style=\"background:%s\"></i>%s ", act_colour(a), us_action_names[a]);
    fputs("</p>\n", f);
}

/* GPU use stacked, eviction markers, pending pods: one pool. */
static int pool_section(FILE *f, const us_sim_result *res, size_t k) {
    const us_harvest *h = &res->harvest;
    size_t n = h->ncycles;
    double *v = calloc(4 * (n ? n : 1), sizeof *v);
    int (*ev)[US_ACT_NONE] = calloc(n ? n : 1, sizeof *ev);
    if (!v || !ev) {
        free(v);
        free(ev);
        return -1;
    }
    double *zero = v, *ai = v + n, *aibg = v + 2 * n, *all = v + 3 * n;
    plot p = {n, 1, 160};
    for (size_t i = 0; i < n; i++) {
        const us_hv_pool *s = &h->cycles[i].pools[k];
        ai[i] = s->ai;
        aibg[i] = s->ai + s->background;
        all[i] = s->gpus;
        if (s->gpus > p.max) p.max = s->gpus;
    }
    fputs("<section class=\"pool\" data-pool=\"", f);
    esc(f, h->pools[k]);
    fputs("\"><h2>Pool ", f);
    esc(f, h->pools[k]);
    fputs("</h2>\n<h3>GPUs held: AI, background, idle</h3>\n", f);
    svg_open(f, "use", "use", k, TM + p.height + BM, "GPU use over time, stacked: AI, background, idle");
    band(f, &p, zero, ai, C_AI, "AI");
    band(f, &p, ai, aibg, C_BG, "background");
    band(f, &p, aibg, all, C_IDLE, "idle");
    axes(f, &p, res, "GPUs");
    fputs("</svg>\n", f);

    /* evictions by action, per cycle, from the decisions on this pool's nodes */
    for (size_t i = 0; i < n && i < res->ncycles; i++) {
        const us_cycle_log *log = &res->cycles[i].log;
        for (size_t d = 0; d < log->ndecisions; d++) {
            const us_decision *dd = &log->decisions[d];
            if (dd->op != US_OP_EVICT || dd->action >= US_ACT_NONE) continue;
            int node = us_hv_node_index(h, dd->node);
            if (node >= 0 && h->node_pool[node] == (int)k) ev[i][dd->action]++;
        }
    }
    fputs("<h3>Evictions by action</h3>\n", f);
    int rows = US_ACT_NONE - US_ACT_RECLAIM; /* the actions that evict */
    plot pe = {n, rows, 14.0 * rows};
    svg_open(f, "evictions", "evictions", k, TM + pe.height + BM, "evictions by action over time");
    int row = 0;
    for (int a = US_ACT_RECLAIM; a < US_ACT_NONE; a++, row++) {
        double cy = TM + 7 + 14 * row;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", LM - 4, cy + 4, us_action_names[a]);
        for (size_t i = 0; i < n; i++) {
            if (!ev[i][a]) continue;
            double r = 2.5 + fmin(4, log2((double)ev[i][a]));
            fprintf(f, "<circle class=\"marker\" data-action=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\">"
                       "<title>t=%gs: %d %s eviction%s</title></circle>\n",
                    us_action_names[a], (px(&pe, i) + px(&pe, i + 1)) / 2, cy, r, act_colour(a), h->cycles[i].time, ev[i][a],
                    us_action_names[a], ev[i][a] == 1 ? "" : "s");
        }
    }
    frame(f, &pe, res);
    fputs("</svg>\n", f);

    fputs("<h3>Pending pods</h3>\n", f);
    plot pp = {n, 1, 100};
    for (size_t i = 0; i < n; i++) {
        const us_hv_pool *s = &h->cycles[i].pools[k];
        ai[i] = s->pending_ai;
        aibg[i] = s->pending_background;
        if (ai[i] > pp.max) pp.max = ai[i];
        if (aibg[i] > pp.max) pp.max = aibg[i];
    }
    svg_open(f, "pending", "pending", k, TM + pp.height + BM, "pending pods over time: AI and background");
    step(f, &pp, aibg, C_BG, "5 3", "background pods pending");
    step(f, &pp, ai, C_AI, NULL, "AI pods pending");
    axes(f, &pp, res, "pods");
    fputs("</svg>\n</section>\n", f);
    free(v);
    free(ev);
    return 0;
}

/* Each queue's GPUs allocated (band) against its fair share (line) and,
 * when limited, its quota (dashed). */
static int queue_section(FILE *f, const us_sim_result *res, const us_state *st) {
    size_t n = res->ncycles, nq = res->nqueues < st->nqueues ? res->nqueues : st->nqueues;
    double *v = calloc(4 * (n ? n : 1), sizeof *v);
    if (!v) return -1;
    double *zero = v, *alloc = v + n, *fair = v + 2 * n, *quota = v + 3 * n;
    fputs("<section id=\"queues\"><h2>Queues: GPUs allocated against fair share</h2>\n", f);
    fprintf(f, "<p class=\"legend\"><span style=\"background:%s\"></span>allocated <b></b>fair share "
               "<b class=\"dash\"></b>quota</p>\n",
            C_AI);
    for (size_t q = 0; q < nq; q++) {
        plot p = {n, 1, 70};
        bool limited = true;
        for (size_t i = 0; i < n; i++) {
            const us_queue_figures *qf = res->cycles[i].queues ? &res->cycles[i].queues[q] : NULL;
            alloc[i] = qf ? (double)qf->allocated.v[US_GPU] / US_GPU_UNIT : 0;
            fair[i] = qf && isfinite(qf->fair[US_GPU]) ? round(qf->fair[US_GPU]) / US_GPU_UNIT : 0;
            int64_t qv = i < res->harvest.ncycles && q < res->harvest.nqueues ? res->harvest.cycles[i].quota[q].v[US_GPU]
                                                                              : US_UNLIMITED;
            limited = limited && qv != US_UNLIMITED;
            quota[i] = qv == US_UNLIMITED ? 0 : (double)qv / US_GPU_UNIT;
            p.max = fmax(p.max, fmax(alloc[i], fmax(fair[i], quota[i])));
        }
        fputs("<h3>", f);
        for (int d = 0; d < st->queues[q].depth; d++) fputs("&#8627; ", f);
        esc(f, st->queues[q].name);
        fputs("</h3>\n", f);
        svg_open(f, "queue", "queue", q, TM + p.height + BM, "GPUs allocated against fair share over time");
        band(f, &p, zero, alloc, C_AI, "allocated");
        step(f, &p, fair, "#222", NULL, "fair share");
        if (limited) step(f, &p, quota, "#b35806", "6 4", "quota");
        axes(f, &p, res, "GPUs");
        fputs("</svg>\n", f);
    }
    fputs("</section>\n", f);
    free(v);
    return 0;
}

static int by_pool_then_name(const void *a, const void *b, void *ctx) {
    const us_harvest *h = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (h->node_pool[x] != h->node_pool[y]) return h->node_pool[x] < h->node_pool[y] ? -1 : 1;
    int c = us_natcmp(h->nodes[x], h->nodes[y]);
    return c ? c : x < y ? -1 : x > y;
}

/* Node x time: each cell the blend of AI, background and idle colours in
 * the proportions the node's GPUs were held over the cycles it covers. */
static int heat_section(FILE *f, const us_sim_result *res) {
    const us_harvest *h = &res->harvest;
    size_t n = h->ncycles, cols = n < HEAT_COLS ? n : HEAT_COLS;
    size_t *order = malloc((h->nnodes ? h->nnodes : 1) * sizeof *order);
    if (!order) return -1;
    for (size_t i = 0; i < h->nnodes; i++) order[i] = i;
    us_sort(order, h->nnodes, sizeof *order, by_pool_then_name, (void *)h);
    double rh = h->nnodes ? fmax(3, fmin(14, 420.0 / (double)h->nnodes)) : 14;
    plot p = {cols, 1, rh * (double)h->nnodes};
    fputs("<section id=\"nodes\"><h2>Nodes: GPUs held over time</h2>\n", f);
    svg_open(f, "heat", "heat", 0, TM + p.height + BM, "per-node heat strip: AI, background, idle over time");
    static const int rgb[3][3] = {{59, 111, 212}, {58, 163, 91}, {228, 228, 228}};
    for (size_t r = 0; r < h->nnodes; r++) {
        size_t nd = order[r];
        double y = TM + rh * (double)r;
        if (rh >= 10) {
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", LM - 4, y + rh - 2);
            esc(f, h->nodes[nd]);
            fputs("</text>\n", f);
        }
        int last[3] = {-1, -1, -1};
        size_t run_from = 0;
        bool in_run = false;
        for (size_t c = 0; c <= cols; c++) {
            int col[3] = {-1, -1, -1};
            if (c < cols) {
                size_t from = c * n / cols, to = (c + 1) * n / cols;
                double a = 0, g = 0, gpus = 0;
                for (size_t i = from; i < to; i++) {
                    const us_hv_node *s = &h->cycles[i].nodes[nd];
                    if (s->gpus <= 0) continue;
                    a += s->ai;
                    g += s->background;
                    gpus += s->gpus;
                }
                if (gpus > 0) {
                    double w[3] = {a / gpus, g / gpus, 1 - (a + g) / gpus};
                    for (int k = 0; k < 3; k++)
                        col[k] = (int)lround(w[0] * rgb[0][k] + w[1] * rgb[1][k] + w[2] * rgb[2][k]);
                }
            }
            if (in_run && memcmp(col, last, sizeof col) != 0) {
                fprintf(f, "<rect class=\"cell\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                           "fill=\"rgb(%d,%d,%d)\"/>\n",
                        px(&p, run_from), y, px(&p, c) - px(&p, run_from), rh - (rh >= 6 ? 1 : 0), last[0], last[1],
                        last[2]);
                in_run = false;
            }
            if (!in_run && col[0] >= 0) {
                in_run = true;
                run_from = c;
                memcpy(last, col, sizeof last);
            }
        }
    }
    frame(f, &p, res);
    fputs("</svg>\n<p class=\"note\">One row a node (by pool, then name), ", f);
    if (rh < 10) fputs("top to bottom in natural order of names, ", f);
    fprintf(f, "one column a span of %s; blue: held by AI, green: by background, grey: idle; blank: not in "
               "the cluster.</p>\n</section>\n",
            cols == n ? "one cycle" : "cycles");
    free(order);
    return 0;
}

int us_report_html(FILE *f, const us_sim_result *res, const us_state *final, us_err *err) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>understory report: ", f);
    esc(f, res->scenario);
    fputs("</title>\n<style>\n"
          "body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:940px;color:#222}\n"
          "h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;margin-top:28px}"
          "h3{font-size:14px;margin:12px 0 4px}\n"
          "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 7px;"
          "text-align:right}th{background:#f4f4f4}\n"
          "svg.chart{display:block;max-width:100%;height:auto}svg text{font-size:11px;fill:#444}\n"
          ".legend span,.legend i{display:inline-block;width:12px;height:12px;margin:0 4px 0 10px;"
          "vertical-align:middle}.legend i{border-radius:6px}\n"
          ".legend b{display:inline-block;width:18px;border-top:2px solid #222;margin:0 4px 3px 10px}"
          ".legend b.dash{border-top:2px dashed #b35806}\n"
          ".note{color:#666;font-size:12px}\n"
          "</style></head><body>\n<h1>understory report: ",
          f);
    esc(f, res->scenario);
    fputs("</h1>\n", f);
    fprintf(f, "<p>%zu cycles", res->ncycles);
    if (res->ncycles)
        fprintf(f, ", t=%gs to %gs", res->cycles[0].time, res->cycles[res->ncycles - 1].time);
    fputs("; policy ", f);
    esc(f, res->policy);
    fputs("</p>\n", f);
    summary(f, res);
    legend(f);
    int rc = 0;
    for (size_t k = 0; k < res->harvest.npools && rc == 0; k++) rc = pool_section(f, res, k);
    if (rc == 0) rc = queue_section(f, res, final);
    if (rc == 0) rc = heat_section(f, res);
    if (rc < 0) return us_err_nomem(err);
    fputs("</body></html>\n", f);
    if (fflush(f) == EOF || ferror(f)) return us_err_set(err, US_EIO, "cannot write the report");
    return 0;
}

int us_report_write(const char *path, const us_sim_result *res, const us_state *final, us_err *err) {
    FILE *f = fopen(path, "w");
    if (!f) return us_err_set(err, US_EIO, "%s: %s", path, strerror(errno));
    int rc = us_report_html(f, res, final, err);
    bool closed = fclose(f) == 0;
    if (rc < 0 && err && err->code == US_ENOMEM) return -1;
    if (rc < 0 || !closed) return us_err_set(err, US_EIO, "%s: cannot write the report", path);
    return 0;
}
