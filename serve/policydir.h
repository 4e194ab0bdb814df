/*
 * policydir.h — `--policies DIR`, hot (policydir.c): the directory
 * watched with libuv, a change reloaded through us_engine_reload_policies
 * once it has settled, and POST /reload on the admin endpoint through the
 * same function.  Owns the watch, the debounce timer and the route; the engine
 * decides whether a policy passes, the writes (writes.c) turn the
 * engine's PolicyReloaded / PolicyReloadRefused events into Kubernetes
 * events.  Runs on the loop: a reload happens between cycles.
 */
#ifndef SV_POLICYDIR_H
#define SV_POLICYDIR_H

#include <stddef.h>
#include <uv.h>

#include "monitor.h"
#include "understory.h"

typedef struct sv_policydir sv_policydir;

/* Watch dir (copied; NULL: no policy directory, POST /reload answers 409)
 * for engine e (borrowed), counting reloads in m and answering POST
 * /reload there.  NULL with err when the directory cannot be watched or
 * out of memory. */
sv_policydir *sv_policydir_start(uv_loop_t *loop, us_engine *e, const char *dir, sv_monitor *m, char *err,
                           size_t errlen);
/* Stop watching; memory is released as the loop closes the handles.
 * NULL is fine. */
void sv_policydir_close(sv_policydir *r);

/* Reload now (cause: what asked, for the log).  0 with the new policy id
 * in msg, or -1 with why in msg (the policies in force stay). */
int sv_policydir_now(sv_policydir *r, const char *cause, char *msg, size_t len);

#endif
