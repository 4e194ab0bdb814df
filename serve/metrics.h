/*
 * metrics.h — the daemon's Prometheus metrics: a registry of counters,
 * gauges and histograms, each a family of series keyed by label values,
 * rendered in the Prometheus text exposition format (version 0.0.4).
 * Owns names, values and their rendering; it never decides what is
 * counted (serve.c and the modules it wires do) and never does I/O.
 *
 * Names follow Prometheus' conventions and are checked when a family is
 * made: [a-zA-Z_:][a-zA-Z0-9_:]*, counters end in _total, label names
 * [a-zA-Z_][a-zA-Z0-9_]* and never start with "__" (reserved) nor are "le"
 * (a histogram's).  Rendering is deterministic: families by name, series
 * by label values (byte order, label by label).
 */
#ifndef SV_METRICS_H
#define SV_METRICS_H

#include <stddef.h>

typedef struct sv_metrics sv_metrics;
typedef struct sv_metric sv_metric;

#define SV_METRICS_MAX_LABELS 8

sv_metrics *sv_metrics_new(void);
void sv_metrics_free(sv_metrics *m);

/* A family.  labels: NULL-terminated label names (NULL: none).  NULL when
 * a name breaks the conventions above, the name is taken, or out of
 * memory.  The family lives as long as the registry. */
sv_metric *sv_metrics_counter(sv_metrics *m, const char *name, const char *help, const char *const *labels);
sv_metric *sv_metrics_gauge(sv_metrics *m, const char *name, const char *help, const char *const *labels);
/* bounds: the buckets' upper bounds, finite and strictly increasing
 * (+Inf is implied). */
sv_metric *sv_metrics_histogram(sv_metrics *m, const char *name, const char *help, const char *const *labels,
                                const double *bounds, size_t nbounds);

/* values: one per label name, in the family's order (NULL when it has
 * none).  Each returns 0, or -1 (nothing changed) when out of memory or
 * the call does not fit the kind: add on a counter takes v >= 0; set on a
 * counter (mirroring a count kept elsewhere) never lowers it; observe is a
 * histogram's only. */
int sv_metric_add(sv_metric *f, const char *const *values, double v);
int sv_metric_set(sv_metric *f, const char *const *values, double v);
int sv_metric_observe(sv_metric *f, const char *const *values, double v);

/* Drop every series of the family (a gauge recomputed from scratch, such
 * as pending pods by reason, so that reasons gone are not left behind). */
void sv_metric_clear(sv_metric *f);

/* The series' current value (a histogram's: its count); 0 when it has
 * none yet.  For tests and logs. */
double sv_metric_value(const sv_metric *f, const char *const *values);

/* The registry in the text format, malloc'd, NUL-terminated; *len its
 * length.  NULL when out of memory. */
char *sv_metrics_render(const sv_metrics *m, size_t *len);

/* The content type of what sv_metrics_render writes. */
#define SV_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
