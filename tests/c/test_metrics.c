/*
 * test_metrics.c — the daemon's Prometheus registry (serve/metrics.c):
 * every kind with tricky label values rendered and read back by a real
 * parser (tests/prom_check.py, Debian's python3-prometheus-client) with
 * every value intact; names held to Prometheus' conventions; the order
 * fixed whatever order series appear in; counters never go down.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "metrics.h"

static char dir[] = "/tmp/understory-metrics.XXXXXX";

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static void want_family(cJSON *fams, const char *name, const char *type, const char *help) {
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "name", name);
    cJSON_AddStringToObject(f, "type", type);
    cJSON_AddStringToObject(f, "help", help);
    cJSON_AddItemToArray(fams, f);
}

/* labels: NULL-terminated name, value pairs */
static void want_sample(cJSON *samples, const char *name, const char *const *labels, double v) {
    cJSON *s = cJSON_CreateObject(), *l = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", name);
    for (size_t i = 0; labels && labels[i]; i += 2) cJSON_AddStringToObject(l, labels[i], labels[i + 1]);
    cJSON_AddItemToObject(s, "labels", l);
    cJSON_AddNumberToObject(s, "value", v);
    cJSON_AddItemToArray(samples, s);
}

/* Every kind, label values with quotes, backslashes, newlines, braces,
 * commas, '=' and UTF-8, a HELP with a backslash and a newline, numbers
 * that need all their digits: the real parser reads back exactly what was
 * recorded, families in name order, series in label order. */
TEST(round_trip_through_a_real_parser) {
    sv_metrics *m = sv_metrics_new();
    const char *verb_code[] = {"verb", "code", NULL}, *kind[] = {"kind", NULL}, *phase[] = {"phase", NULL};
    sv_metric *req = sv_metrics_counter(m, "understory_api_requests_total", "API requests by verb and code.",
                                        verb_code);
    sv_metric *pend = sv_metrics_gauge(m, "understory_pending_pods", "Pending pods \\ by kind,\nand reason.", kind);
    double bounds[] = {0.001, 0.01, 0.1, 1};
    sv_metric *dur = sv_metrics_histogram(m, "understory_cycle_duration_seconds", "Cycle time.", phase, bounds, 4);
    sv_metric *up = sv_metrics_gauge(m, "understory_leader", "1 when leader.", NULL);
    CHECK(req && pend && dur && up);
    const char *tricky = "a \"quoted\" \\back\\slash\nnew line {x=1,y} \xc3\xbcnicode";
    /* added out of order: rendered sorted */
    CHECK(sv_metric_add(req, (const char *[]){"POST", "201"}, 2) == 0);
    CHECK(sv_metric_add(req, (const char *[]){"GET", "200"}, 7) == 0);
    CHECK(sv_metric_add(req, (const char *[]){"GET", "200"}, 1) == 0);
    CHECK(sv_metric_add(req, (const char *[]){"GET", "404"}, 1) == 0);
    CHECK(sv_metric_set(pend, (const char *[]){tricky}, 1.0 / 3) == 0);
    CHECK(sv_metric_set(pend, (const char *[]){""}, -2.5e-9) == 0);
    CHECK(sv_metric_add(pend, (const char *[]){"ai"}, 3) == 0);
    CHECK(sv_metric_add(pend, (const char *[]){"ai"}, -1) == 0);
    double obs[] = {0.0005, 0.001, 0.05, 0.5, 2, 1e6};
    for (size_t i = 0; i < sizeof obs / sizeof *obs; i++)
        CHECK(sv_metric_observe(dur, (const char *[]){"commit"}, obs[i]) == 0);
    CHECK(sv_metric_observe(dur, (const char *[]){"allocate"}, 0.01) == 0);
    CHECK(sv_metric_set(up, NULL, 1) == 0);

    size_t len = 0;
    char *text = sv_metrics_render(m, &len);
    CHECK(text && strlen(text) == len);

    cJSON *want = cJSON_CreateObject(), *fams = cJSON_AddArrayToObject(want, "families"),
          *smp = cJSON_AddArrayToObject(want, "samples");
    want_family(fams, "understory_api_requests_total", "counter", "API requests by verb and code.");
    want_family(fams, "understory_cycle_duration_seconds", "histogram", "Cycle time.");
    want_family(fams, "understory_leader", "gauge", "1 when leader.");
    want_family(fams, "understory_pending_pods", "gauge", "Pending pods \\ by kind,\nand reason.");
    const char *n = "understory_api_requests_total";
    want_sample(smp, n, (const char *[]){"verb", "GET", "code", "200", NULL}, 8);
    want_sample(smp, n, (const char *[]){"verb", "GET", "code", "404", NULL}, 1);
    want_sample(smp, n, (const char *[]){"verb", "POST", "code", "201", NULL}, 2);
    n = "understory_cycle_duration_seconds";
    char b[64];
    const char *les[] = {"0.001", "0.01", "0.1", "1", "+Inf"};
    double alloc_cum[] = {0, 1, 1, 1, 1}, commit_cum[] = {2, 2, 3, 4, 6};
    for (int i = 0; i < 5; i++) {
        snprintf(b, sizeof b, "%s_bucket", n);
        want_sample(smp, b, (const char *[]){"phase", "allocate", "le", les[i], NULL}, alloc_cum[i]);
    }
    want_sample(smp, "understory_cycle_duration_seconds_sum", (const char *[]){"phase", "allocate", NULL}, 0.01);
    want_sample(smp, "understory_cycle_duration_seconds_count", (const char *[]){"phase", "allocate", NULL}, 1);
    for (int i = 0; i < 5; i++) {
        snprintf(b, sizeof b, "%s_bucket", n);
        want_sample(smp, b, (const char *[]){"phase", "commit", "le", les[i], NULL}, commit_cum[i]);
    }
    double sum = 0;
    for (size_t i = 0; i < sizeof obs / sizeof *obs; i++) sum += obs[i];
    want_sample(smp, "understory_cycle_duration_seconds_sum", (const char *[]){"phase", "commit", NULL}, sum);
    want_sample(smp, "understory_cycle_duration_seconds_count", (const char *[]){"phase", "commit", NULL}, 6);
    want_sample(smp, "understory_leader", NULL, 1);
    want_sample(smp, "understory_pending_pods", (const char *[]){"kind", "", NULL}, -2.5e-9);
    want_sample(smp, "understory_pending_pods", (const char *[]){"kind", tricky, NULL}, 1.0 / 3);
    want_sample(smp, "understory_pending_pods", (const char *[]){"kind", "ai", NULL}, 2);

    char tpath[256], jpath[256], cmd[1024];
    snprintf(tpath, sizeof tpath, "%s/metrics.prom", dir);
    snprintf(jpath, sizeof jpath, "%s/want.json", dir);
    char *wj = cJSON_Print(want);
    CHECK(write_file(tpath, text ? text : "") == 0 && wj && write_file(jpath, wj) == 0);
    const char *root = getenv("UNDERSTORY_ROOT");
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/prom_check.py %s %s", root ? root : ".", tpath, jpath);
    int rc = system(cmd);
    CHECK(rc == 0);
    if (rc != 0) fprintf(stderr, "--- rendered:\n%s", text ? text : "(null)");
    free(wj);
    free(text);
    cJSON_Delete(want);
    sv_metrics_free(m);
}

/* The exact lines: the escaping and number spelling a scraper sees. */
TEST(exact_text) {
    sv_metrics *m = sv_metrics_new();
    sv_metric *c = sv_metrics_counter(m, "understory_x_total", "X.", (const char *[]){"l", NULL});
    double bounds[] = {0.5};
    sv_metric *h = sv_metrics_histogram(m, "understory_y_seconds", "Y.", NULL, bounds, 1);
    sv_metric_add(c, (const char *[]){"q\"b\\n\n"}, 0.1);
    sv_metric_observe(h, NULL, INFINITY);
    char *t = sv_metrics_render(m, NULL);
    CHECK_STR(t, "# HELP understory_x_total X.\n"
                 "# TYPE understory_x_total counter\n"
                 "understory_x_total{l=\"q\\\"b\\\\n\\n\"} 0.1\n"
                 "# HELP understory_y_seconds Y.\n"
                 "# TYPE understory_y_seconds histogram\n"
                 "understory_y_seconds_bucket{le=\"0.5\"} 0\n"
                 "understory_y_seconds_bucket{le=\"+Inf\"} 1\n"
                 "understory_y_seconds_sum +Inf\n"
                 "understory_y_seconds_count 1\n");
    free(t);
    sv_metrics_free(m);
}

/* Names that break the conventions are refused, and nothing is added. */
TEST(conventions) {
    sv_metrics *m = sv_metrics_new();
    double up[] = {1, 2}, down[] = {2, 1}, inf[] = {INFINITY};
    CHECK(!sv_metrics_counter(m, "understory_requests", "no _total", NULL));
    CHECK(!sv_metrics_gauge(m, "understory_things_total", "a gauge named like a counter", NULL));
    CHECK(!sv_metrics_gauge(m, "2bad", "starts with a digit", NULL));
    CHECK(!sv_metrics_gauge(m, "bad-name", "a dash", NULL));
    CHECK(!sv_metrics_gauge(m, "", "empty", NULL));
    CHECK(!sv_metrics_gauge(m, "understory_a", "reserved label", (const char *[]){"__x", NULL}));
    CHECK(!sv_metrics_gauge(m, "understory_a", "colon in a label", (const char *[]){"a:b", NULL}));
    CHECK(!sv_metrics_gauge(m, "understory_a", "twice", (const char *[]){"a", "a", NULL}));
    CHECK(!sv_metrics_histogram(m, "understory_h", "le is the bucket's", (const char *[]){"le", NULL}, up, 2));
    CHECK(!sv_metrics_histogram(m, "understory_h", "decreasing", NULL, down, 2));
    CHECK(!sv_metrics_histogram(m, "understory_h", "infinite", NULL, inf, 1));
    CHECK(sv_metrics_gauge(m, "understory_a", "ok", (const char *[]){"a", NULL}) != NULL);
    CHECK(!sv_metrics_gauge(m, "understory_a", "taken", NULL));
    CHECK(!sv_metrics_counter(m, "understory_a", "taken", NULL));
    char *t = sv_metrics_render(m, NULL);
    CHECK_STR(t, "# HELP understory_a ok\n# TYPE understory_a gauge\n");
    free(t);
    sv_metrics_free(m);
}

/* A counter only goes up: add refuses a negative, set refuses a lower
 * value (the value stays), observe is a histogram's. */
TEST(counters_only_go_up) {
    sv_metrics *m = sv_metrics_new();
    sv_metric *c = sv_metrics_counter(m, "understory_c_total", "C.", NULL);
    sv_metric *g = sv_metrics_gauge(m, "understory_g", "G.", NULL);
    CHECK(sv_metric_add(c, NULL, 5) == 0);
    CHECK(sv_metric_add(c, NULL, -1) == -1);
    CHECK(sv_metric_set(c, NULL, 4) == -1);
    CHECK(sv_metric_value(c, NULL) == 5);
    CHECK(sv_metric_set(c, NULL, 9) == 0);
    CHECK(sv_metric_value(c, NULL) == 9);
    CHECK(sv_metric_observe(c, NULL, 1) == -1);
    CHECK(sv_metric_observe(g, NULL, 1) == -1);
    CHECK(sv_metric_add(c, NULL, NAN) == -1);
    CHECK(sv_metric_set(g, NULL, -3) == 0 && sv_metric_value(g, NULL) == -3);
    sv_metrics_free(m);
}

/* Clearing a family drops its series (the family stays, empty), and
 * series recorded after it start from zero. */
TEST(clear) {
    sv_metrics *m = sv_metrics_new();
    sv_metric *g = sv_metrics_gauge(m, "understory_pending_pods", "P.", (const char *[]){"reason", NULL});
    sv_metric_set(g, (const char *[]){"gone"}, 3);
    sv_metric_set(g, (const char *[]){"quota"}, 2);
    sv_metric_clear(g);
    sv_metric_add(g, (const char *[]){"quota"}, 1);
    char *t = sv_metrics_render(m, NULL);
    CHECK_STR(t, "# HELP understory_pending_pods P.\n# TYPE understory_pending_pods gauge\n"
                 "understory_pending_pods{reason=\"quota\"} 1\n");
    free(t);
    sv_metrics_free(m);
}

/* Same records in any order: the same bytes. */
TEST(deterministic) {
    char *t[2];
    for (int r = 0; r < 2; r++) {
        sv_metrics *m = sv_metrics_new();
        sv_metric *a = NULL, *b = NULL;
        if (r == 0) {
            a = sv_metrics_counter(m, "understory_a_total", "A.", (const char *[]){"x", "y", NULL});
            b = sv_metrics_gauge(m, "understory_b", "B.", NULL);
        } else {
            b = sv_metrics_gauge(m, "understory_b", "B.", NULL);
            a = sv_metrics_counter(m, "understory_a_total", "A.", (const char *[]){"x", "y", NULL});
        }
        for (int i = 0; i < 50; i++) {
            char x[8], y[8];
            int k = r == 0 ? i : 49 - i;
            snprintf(x, sizeof x, "%d", k % 7);
            snprintf(y, sizeof y, "%d", k);
            sv_metric_add(a, (const char *[]){x, y}, k);
        }
        sv_metric_set(b, NULL, 2);
        t[r] = sv_metrics_render(m, NULL);
        sv_metrics_free(m);
    }
    CHECK(t[0] && t[1] && strcmp(t[0], t[1]) == 0);
    CHECK_HAS(t[0], "understory_a_total{x=\"0\",y=\"0\"} 0\nunderstory_a_total{x=\"0\",y=\"14\"} 14\n");
    free(t[0]);
    free(t[1]);
}

int main(void) {
    if (!mkdtemp(dir)) return 2;
    RUN(round_trip_through_a_real_parser);
    RUN(exact_text);
    RUN(conventions);
    RUN(counters_only_go_up);
    RUN(clear);
    RUN(deterministic);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 2;
    return check_report();
}
