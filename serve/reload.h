/*
 * reload.h — `--policies DIR`, hot (reload.c): the directory watched with
 * libuv, a change reloaded through us_engine_reload_policies once it has
 * settled, and POST /reload on the admin endpoint through the same
 * function.  Owns the watch, the debounce timer and the route; the engine
 * decides whether a policy passes, the writes (writes.c) turn the
 * engine's PolicyReloaded / PolicyReloadRefused events into Kubernetes
 * events.  Runs on the loop: a reload happens between cycles.
 */
#ifndef SV_RELOAD_H
#define SV_RELOAD_H

#include <stddef.h>
#include <uv.h>

#include "monitor.h"
#include "understory.h"

typedef struct sv_reload sv_reload;

/* Watch dir (copied; NULL: no policy directory, POST /reload answers 409)
 * for engine e (borrowed), counting reloads in m and answering POST
 * /reload there.  NULL with err when the directory cannot be watched or
 * out of memory. */
sv_reload *sv_reload_start(uv_loop_t *loop, us_engine *e, const char *dir, sv_monitor *m, char *err,
                           size_t errlen);
/* Stop watching; memory is released as the loop closes the handles.
 * NULL is fine. */
void sv_reload_close(sv_reload *r);

/* Reload now (cause: what asked, for the log).  0 with the new policy id
 * in msg, or -1 with why in msg (the policies in force stay). */
int sv_reload_now(sv_reload *r, const char *cause, char *msg, size_t len);

#endif
