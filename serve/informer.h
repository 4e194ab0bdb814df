/*
 * informer.h — one kind of Kubernetes object kept in view: list (paginated
 * with limit/continue), then watch from the list's resourceVersion with
 * bookmarks; a watch that ends is resumed from the last resourceVersion
 * seen, and `410 Gone` (a status or an ERROR event) means list again, with
 * objects that vanished meanwhile reported deleted.  Owns the requests and
 * the set of objects present; what an object means is the caller's.
 */
#ifndef SV_INFORMER_H
#define SV_INFORMER_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "http.h"

typedef enum sv_event { SV_ADDED, SV_MODIFIED, SV_DELETED } sv_event;

typedef struct sv_informer sv_informer;

/* An object changed; obj is valid during the call only. */
typedef void (*sv_informer_fn)(void *ud, sv_event ev, const cJSON *obj);
/* The first list is complete (called once). */
typedef void (*sv_synced_fn)(void *ud);

/* Keep the objects at path (e.g. "/api/v1/nodes") in view; NULL when out
 * of memory.  Errors are written to stderr as they happen and retried with
 * backoff. */
sv_informer *sv_informer_start(sv_http *h, uv_loop_t *loop, const char *path, sv_informer_fn fn,
                               sv_synced_fn synced, void *ud);
/* Stop: no more callbacks.  Free the client (sv_http_free) before the
 * loop runs again: it drops the request in flight, which would otherwise
 * call back; the loop then closes the informer's handles and frees it. */
void sv_informer_stop(sv_informer *inf);

/* Lists made so far (1 + relists), for logs, tests and metrics. */
unsigned sv_informer_lists(const sv_informer *inf);
/* Watches that ended (the server's timeout, an error, 410) and were
 * resumed or replaced by a list: for metrics. */
unsigned sv_informer_watch_restarts(const sv_informer *inf);
/* Objects present now. */
size_t sv_informer_objects(const sv_informer *inf);
/* The first list has completed. */
bool sv_informer_synced(const sv_informer *inf);

#endif
