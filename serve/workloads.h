/*
 * workloads.h — the cluster's pods as the engine's workloads and pods
 * (workloads.c).
 */
#ifndef SV_WORKLOADS_H
#define SV_WORKLOADS_H

#include <cJSON.h>
#include <stdbool.h>

#include "informer.h"
#include "understory.h"

typedef enum sv_kind { SV_NODES, SV_PODS, SV_NAMESPACES, SV_PODGROUPS, SV_PRIORITYCLASSES, SV_NKINDS } sv_kind;

typedef struct sv_workloads sv_workloads;

/* Workloads for engine e (borrowed), for the pods whose spec.schedulerName
 * is scheduler (copied); epoch: the wall-clock second that is the
 * engine's time 0.  NULL when out of memory. */
sv_workloads *sv_workloads_new(us_engine *e, const char *scheduler, double epoch);
void sv_workloads_free(sv_workloads *w);

/* An object of kind changed (an informer's event). */
int sv_workloads_event(sv_workloads *w, sv_kind kind, sv_event ev, const cJSON *obj);

/* Bring the engine up to the caches at time now (engine seconds) when
 * anything changed since the last sync: workloads upserted or removed,
 * pods reported by their real names (bound: on their node; unbound:
 * pending), pods gone removed.  0, or -1 when the caches do not map
 * (logged with the object and path; the engine keeps its last view). */
int sv_workloads_sync(sv_workloads *w, double now);

/* name ("namespace/name") is a real pod of ours, unbound, that the last
 * sync reported pending: a bind decision for it is one to make. */
bool sv_workloads_is_pending(const sv_workloads *w, const char *name);

/* The engine bound name to a node at wall time t: until the watch shows
 * it bound (or timeout seconds pass), a sync does not report it pending
 * again, so it is never bound twice.  forget: the bind failed. */
int sv_workloads_assume(sv_workloads *w, const char *name, double t);
void sv_workloads_forget(sv_workloads *w, const char *name);
/* Assumptions older than timeout seconds at wall time t are dropped. */
void sv_workloads_expire(sv_workloads *w, double t, double timeout);

/* The cached object of kind named key ("namespace/name" or "name"), or
 * NULL. */
const cJSON *sv_workloads_get(const sv_workloads *w, sv_kind kind, const char *key);

#endif
