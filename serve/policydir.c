/*
 * policydir.c — policies from a directory, hot (policydir.h).  A ConfigMap
 * volume changes by the kubelet's atomic writer: the files are symlinks
 * into `..data`, itself a symlink to a timestamped directory, and an
 * update renames a new `..data_tmp` over `..data` (then removes the old
 * directory).  Watching the directory itself (uv_fs_event) sees that
 * rename as well as a plain edit of a file in it.  The burst of events one
 * update makes is settled by a debounce timer; then one reload, through
 * us_engine_reload_policies, which checks the new policies against the
 * live state and swaps them in or refuses them, naming file and line.
 * Single-threaded on the loop, so a reload never overlaps a cycle.
 */
#include "policydir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"

/* Long enough for one atomic-writer update (a few renames within
 * milliseconds) to count once, short against a cycle. */
#define DEBOUNCE_MS 300

struct sv_policydir {
    us_engine *engine;
    sv_monitor *mon;
    char *dir;
    uv_fs_event_t watch;
    uv_timer_t debounce;
    int open; /* handles not yet closed */
    unsigned long changes; /* file events seen, for the log */
};

int sv_policydir_now(sv_policydir *r, const char *cause, char *msg, size_t len) {
    us_error err;
    if (!r->dir) {
        snprintf(msg, len, "no policy directory: serve was started without --policies");
        return -1;
    }
    if (us_engine_reload_policies(r->engine, r->dir, &err) != US_OK) {
        snprintf(msg, len, "%s", err.message);
        fprintf(stderr, "understory serve: policy reload (%s) refused: %s\n", cause, err.message);
        sv_monitor_reload(r->mon, "refused");
        return -1;
    }
    snprintf(msg, len, "%s", us_engine_policy_id(r->engine));
    fprintf(stderr, "understory serve: policies reloaded (%s) from %s: policy %s\n", cause, r->dir, msg);
    sv_monitor_reload(r->mon, "ok");
    sv_monitor_policy(r->mon, msg);
    return 0;
}

static void on_settled(uv_timer_t *t) {
    sv_policydir *r = t->data;
    char msg[1100], cause[64];
    snprintf(cause, sizeof cause, "%lu change%s in the directory", r->changes, r->changes == 1 ? "" : "s");
    r->changes = 0;
    sv_policydir_now(r, cause, msg, sizeof msg);
}

static void on_change(uv_fs_event_t *h, const char *name, int events, int status) {
    sv_policydir *r = h->data;
    (void)name, (void)events;
    if (status < 0) {
        fprintf(stderr, "understory serve: watching %s: %s\n", r->dir, uv_strerror(status));
        return;
    }
    r->changes++;
    uv_timer_start(&r->debounce, on_settled, DEBOUNCE_MS, 0); /* restarts: the last event counts */
}

/* POST /reload: 200 and the policy id; 422 and why when refused; 409
 * when there is no directory to reload. */
static void post_reload(void *ud, const sv_admin_request *rq, sv_admin_reply *rp) {
    sv_policydir *r = ud;
    char msg[1100];
    (void)rq;
    int rc = sv_policydir_now(r, "POST /reload", msg, sizeof msg - 1);
    size_t n = strlen(msg);
    msg[n++] = '\n';
    sv_admin_respond(rp, rc == 0 ? 200 : r->dir ? 422 : 409, "text/plain; charset=utf-8", msg, n);
}

static void on_closed(uv_handle_t *h) {
    sv_policydir *r = h->data;
    if (--r->open > 0) return;
    free(r->dir);
    free(r);
}

sv_policydir *sv_policydir_start(uv_loop_t *loop, us_engine *e, const char *dir, sv_monitor *m, char *err,
                           size_t errlen) {
    sv_policydir *r = calloc(1, sizeof *r);
    int rc;
    if (!r || (dir && !(r->dir = strdup(dir)))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    r->engine = e;
    r->mon = m;
    if (dir) {
        uv_timer_init(loop, &r->debounce);
        uv_fs_event_init(loop, &r->watch);
        r->debounce.data = r->watch.data = r;
        r->open = 2;
        if ((rc = uv_fs_event_start(&r->watch, on_change, dir, 0)) < 0) {
            snprintf(err, errlen, "--policies %s: cannot watch it: %s", dir, uv_strerror(rc));
            sv_policydir_close(r);
            return NULL;
        }
    }
    /* the route last: nothing can fail after it, so it never outlives r */
    if (sv_monitor_route(m, "POST", "/reload", post_reload, r) < 0) {
        snprintf(err, errlen, "out of memory");
        sv_policydir_close(r);
        return NULL;
    }
    sv_monitor_policy(m, us_engine_policy_id(e));
    return r;
fail:
    if (r) free(r->dir);
    free(r);
    return NULL;
}

void sv_policydir_close(sv_policydir *r) {
    if (!r) return;
    if (!r->open) {
        free(r->dir);
        free(r);
        return;
    }
    uv_fs_event_stop(&r->watch);
    uv_timer_stop(&r->debounce);
    uv_close((uv_handle_t *)&r->watch, on_closed);
    uv_close((uv_handle_t *)&r->debounce, on_closed);
}
