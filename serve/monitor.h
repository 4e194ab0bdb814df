/*
 * monitor.h — what an operator of `understory serve` sees: the admin
 * endpoint's routes (/healthz, /readyz, /metrics on serve/admin.c) and
 * the daemon's Prometheus metrics (serve/metrics.c).  Owns the registry,
 * the metric names and their meaning (docs/operations.md lists them) and
 * readiness; it never changes what the daemon does.  Other modules report
 * to it through the sv_monitor_* hooks below; what it can read by itself
 * (informers, API requests) it reads.
 */
#ifndef SV_MONITOR_H
#define SV_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "http.h"
#include "informer.h"

typedef struct sv_monitor sv_monitor;

/* Serve the admin endpoint on address (HOST:PORT; port 0: a free one) on
 * loop.  NULL with err when the address is bad or cannot be bound. */
sv_monitor *sv_monitor_start(uv_loop_t *loop, const char *address, char *err, size_t errlen);
/* Stop serving and free it.  Call before the informers and the client it
 * watches are freed; NULL is fine. */
void sv_monitor_close(sv_monitor *m);
/* The port the admin endpoint listens on. */
int sv_monitor_port(const sv_monitor *m);

/* Count every request the client makes of the API server, by Kubernetes
 * verb (get, list, watch, create, update, patch, delete, deletecollection)
 * and HTTP status code (0: no answer), and its retries and limiter waits.
 * At most two clients (the daemon's and the lease's); -1 beyond. */
int sv_monitor_watch_http(sv_monitor *m, sv_http *h);
/* An informer for resource (e.g. "nodes"): /readyz waits for its first
 * list; its lists, watch restarts and objects are metrics.  At most 16. */
int sv_monitor_watch_informer(sv_monitor *m, const char *resource, const sv_informer *inf);

/* The metrics as /metrics serves them (the informers' counts read now),
 * malloc'd; NULL when out of memory. */
char *sv_monitor_render(sv_monitor *m, size_t *len);
/* The Kubernetes verb of a request (list, watch, get, create, update,
 * patch, delete, deletecollection; "other"), as api_requests_total
 * labels it. */
const char *sv_monitor_k8s_verb(const char *method, const char *path);

/* ---- hooks for the stages to come (scheduling cycles, reloads, leader
 * election, the background harvest): each sets the metric its name says.
 * NULL m is fine (nothing is recorded). */

/* One phase of a scheduling cycle took seconds (phase "total" for the
 * whole cycle). */
void sv_monitor_cycle(sv_monitor *m, const char *phase, double seconds);
/* n decisions of an action (bind, evict, preempt, reclaim, ...) made. */
void sv_monitor_decisions(sv_monitor *m, const char *action, unsigned n);
/* n evictions for an action (preempt, reclaim, background, ...) made. */
void sv_monitor_evictions(sv_monitor *m, const char *action, unsigned n);
/* Pending pods: clear, then set each (kind "ai" or "background", reason
 * as the engine reports it) once per cycle. */
void sv_monitor_pending_clear(sv_monitor *m);
void sv_monitor_pending(sv_monitor *m, const char *kind, const char *reason, unsigned n);
/* A policy reload ended: result "ok" or "refused". */
void sv_monitor_reload(sv_monitor *m, const char *result);
/* This replica leads (true) or stands by (false).  Until the first call
 * the daemon counts as leading (no election). */
void sv_monitor_leader(sv_monitor *m, bool leader);
/* The harvest now: GPUs held by background pods, GPUs idle; and the
 * background GPU-seconds accrued since the last call. */
void sv_monitor_harvest(sv_monitor *m, double background_gpus, double idle_gpus, double background_gpu_seconds);

#endif
