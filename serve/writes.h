/*
 * writes.h — a cycle's decisions and events as Kubernetes API calls
 * (writes.c).
 */
#ifndef SV_WRITES_H
#define SV_WRITES_H

#include <stdbool.h>

#include "http.h"
#include "understory.h"
#include "workloads.h"

typedef struct sv_writes sv_writes;

/* Writes through h for engine e, reading objects from w's caches (all
 * borrowed).  dry_run: log what would be written, write nothing.  NULL
 * when out of memory. */
sv_writes *sv_writes_new(sv_http *h, us_engine *e, sv_workloads *w, bool dry_run);
void sv_writes_free(sv_writes *x);

/* Who writes: events name identity (copied) as their reportingInstance
 * (default "understory").  0, or -1 when out of memory. */
int sv_writes_identity(sv_writes *x, const char *identity);
/* Ask may_write(ud) before every request (a cycle's and the DELETE that
 * follows an eviction's PATCH alike); false: the request is not made and
 * is logged as not written.  Leader election's gate: only the leader
 * writes, and it stops the moment it may no longer.  NULL: always. */
void sv_writes_gate(sv_writes *x, bool (*may_write)(void *ud), void *ud);

/* After us_engine_run_cycle at wall time t: the cycle's decisions (bind,
 * pipeline, evict), its Evict events, and the PodScheduled condition of
 * the pods left pending that were pending after the previous call too,
 * each logged on stdout as one line.  Not thread-safe: the loop's thread
 * only, as every sv_writes call. */
void sv_writes_apply(sv_writes *x, double t);

/* Requests written so far (answered or not), for logs and tests. */
unsigned long sv_writes_count(const sv_writes *x);

#endif
