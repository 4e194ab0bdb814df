/*
 * monitor.h — what an operator of `understory serve` sees: the admin
 * endpoint's routes (/healthz, /readyz, /metrics on serve/admin.c) and
 * the daemon's Prometheus metrics (serve/metrics.c).  Owns the registry,
 * the metric names and their meaning (docs/operations.md lists them) and
 * readiness; it never changes what the daemon does.  Other modules report
 * to it through the sv_monitor_* hooks below; what it can read by itself
 * (informers, API requests, the engine after a cycle) it reads, never
 * changing it.
 */
#ifndef SV_MONITOR_H
#define SV_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "admin.h"
#include "http.h"
#include "informer.h"
#include "understory.h"

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

/* Another route on the admin endpoint (POST /reload, /debug/state): as
 * sv_admin_route.  0, or -1 when out of memory. */
int sv_monitor_route(sv_monitor *m, const char *method, const char *path, sv_admin_fn fn, void *ud);

/* After a cycle of engine e at wall time now: its phases' times (with
 * serve's own: sync, the caches into the engine, sync_seconds; write, the
 * decisions out, write_seconds; total), its decisions and evictions, the
 * pods it left pending by kind and reason, and the GPU harvest (GPU-seconds
 * of background pods accrued since the last call, at the last call's
 * rate).  NULL m is fine. */
void sv_monitor_after_cycle(sv_monitor *m, const us_engine *e, double sync_seconds, double write_seconds,
                            double now);

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
/* n decisions of an op (bind, pipeline, evict) and action (allocate,
 * reclaim, preempt, backgroundpods, ...; NULL: none) made. */
void sv_monitor_decisions(sv_monitor *m, const char *op, const char *action, unsigned n);
/* n evictions for an action (preempt, reclaim, background, ...) made. */
void sv_monitor_evictions(sv_monitor *m, const char *action, unsigned n);
/* Pending pods: clear, then set each (kind "ai" or "background", reason
 * as the engine reports it) once per cycle. */
void sv_monitor_pending_clear(sv_monitor *m);
void sv_monitor_pending(sv_monitor *m, const char *kind, const char *reason, unsigned n);
/* A policy reload ended: result "ok" or "refused". */
void sv_monitor_reload(sv_monitor *m, const char *result);
/* The policies in force now have this id (us_engine_policy_id). */
void sv_monitor_policy(sv_monitor *m, const char *id);
/* This replica leads (true) or stands by (false).  Until the first call
 * the daemon counts as leading (no election). */
void sv_monitor_leader(sv_monitor *m, bool leader);
/* How many nodes report less than their pods hold now (nodes.h). */
void sv_monitor_nodes_short(sv_monitor *m, size_t n);
/* The harvest now: GPUs held by background pods, GPUs idle; and the
 * background GPU-seconds accrued since the last call. */
void sv_monitor_harvest(sv_monitor *m, double background_gpus, double idle_gpus, double background_gpu_seconds);

#endif
