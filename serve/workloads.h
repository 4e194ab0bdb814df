/*
 * workloads.h — the cluster's pods as the engine's workloads and pods
 * (workloads.c).  Not thread-safe: one thread (serve's loop) uses it.
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

/* Bring the engine up to the caches at time now (engine seconds): the
 * workloads touched by an event since the last sync (all of them after a
 * node came, went or changed pool) are mapped again and upserted or
 * removed, their pods reported by their real names (bound: on their node;
 * unbound: pending, with the node their affinity pins them to; being
 * deleted: terminating), their pods gone removed.  A workload that does
 * not map is logged with the object and the JSON path and taken out of
 * the engine alone; the others go on.  0, or -1 when out of memory (tried
 * again at the next sync). */
int sv_workloads_sync(sv_workloads *w, double now);

/* Workloads mapped by syncs so far: what the syncs cost. */
unsigned long sv_workloads_mapped(const sv_workloads *w);

/* name ("namespace/name") is a real pod of ours, unbound, that the last
 * sync reported pending: a bind decision for it is one to make. */
bool sv_workloads_is_pending(const sv_workloads *w, const char *name);

/* The engine bound name to a node at wall time t: until the watch shows
 * it bound (or timeout seconds pass), a sync does not report it pending
 * again, so it is never bound twice.  forget: the bind failed. */
int sv_workloads_assume(sv_workloads *w, const char *name, double t);
void sv_workloads_forget(sv_workloads *w, const char *name);
/* The engine evicted name from node and the deletion is sent: the pod
 * holds its room in the engine until the watch shows it gone (a sync then
 * removes it), not only for its grace period.  -1 when the engine refused
 * (logged). */
int sv_workloads_hold(sv_workloads *w, const char *name, const char *node);

/* Assumptions older than timeout seconds at wall time t are dropped. */
void sv_workloads_expire(sv_workloads *w, double t, double timeout);

/* The cached object of kind named key ("namespace/name" or "name"), or
 * NULL. */
const cJSON *sv_workloads_get(const sv_workloads *w, sv_kind kind, const char *key);

#endif
