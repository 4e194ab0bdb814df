/*
 * watch.c — the simulator in a loop (watch.h): libuv file events on the
 * directories of the scenario and the policies, a debounce timer, and a
 * report per run of what changed since the run before (diff.c).
 *
 * It owns the loop, its handles and the last good run.  It must never
 * write to a file it watches, never stop on a file that does not load (it
 * reports it and waits for the next save), and never free a handle's
 * memory anywhere but in its close callback.
 */
#define _DEFAULT_SOURCE /* realpath */
#include "watch.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "diff.h"
#include "output.h"
#include "policy.h"
#include "scenario.h"

#define DEFAULT_DEBOUNCE_MS 200

typedef struct watch watch;

/* One watched directory, and which names in it matter. */
typedef struct watched {
    uv_fs_event_t handle;
    watch *w;
    char *dir;
    char *only;                 /* this one file name; NULL: the policy files */
} watched;

struct watch {
    uv_loop_t loop;
    uv_timer_t timer;
    uv_signal_t sigint, sigterm;
    watched **dirs;
    size_t ndirs, cap_dirs;
    const us_watch_opts *o;
    FILE *out;
    int runs;                   /* runs made so far */
    us_diff_run last;           /* the last run that worked */
    int last_run;               /* its number; 0: none yet */
    char changed[512];          /* names that changed since the last run */
    bool stopping;
    us_err *err;
    int rc;
};

void us_watch_opts_default(us_watch_opts *o) {
    memset(o, 0, sizeof *o);
    us_sim_opts_default(&o->sim);
    o->debounce_ms = DEFAULT_DEBOUNCE_MS;
}

/* A policy file, or a helper module a policy may require: any NAME.lua. */
static bool is_policy_file(const char *name) {
    size_t n = strlen(name);
    return n > 4 && !strcmp(name + n - 4, ".lua") && name[0] != '.';
}

/* Remember name (once) for the next run's header: "a.lua, b.json". */
static void note_change(watch *w, const char *name) {
    size_t len = strlen(w->changed), n = strlen(name);
    for (const char *p = w->changed; *p;) {
        const char *end = strstr(p, ", ");
        size_t k = end ? (size_t)(end - p) : strlen(p);
        if (k == n && !strncmp(p, name, n)) return;
        p += k + (end ? 2 : 0);
    }
    snprintf(w->changed + len, sizeof w->changed - len, "%s%s", len ? ", " : "", name);
}

static void stop(watch *w);

static void run_once(watch *w);

static void on_timer(uv_timer_t *t) {
    watch *w = t->data;
    run_once(w);
    if (w->rc < 0 || (w->o->max_runs > 0 && w->runs >= w->o->max_runs)) stop(w);
}

static void on_event(uv_fs_event_t *h, const char *name, int events, int status) {
    watched *d = h->data;
    watch *w = d->w;
    (void)events;
    if (status < 0 || w->stopping) return;
    /* no name: something changed in the directory, so assume it matters */
    if (name && (d->only ? strcmp(name, d->only) != 0 : !is_policy_file(name))) return;
    note_change(w, name ? name : d->dir);
    uv_timer_start(&w->timer, on_timer, w->o->debounce_ms ? w->o->debounce_ms : DEFAULT_DEBOUNCE_MS, 0);
}

static void on_signal(uv_signal_t *s, int signum) {
    (void)signum;
    stop(s->data);
}

static void free_watched(uv_handle_t *h) {
    watched *d = h->data;
    free(d->dir);
    free(d->only);
    free(d);
}

static void stop(watch *w) {
    if (w->stopping) return;
    w->stopping = true;
    for (size_t i = 0; i < w->ndirs; i++) uv_close((uv_handle_t *)&w->dirs[i]->handle, free_watched);
    w->ndirs = 0;
    uv_close((uv_handle_t *)&w->timer, NULL);
    uv_close((uv_handle_t *)&w->sigint, NULL);
    uv_close((uv_handle_t *)&w->sigterm, NULL);
}

/* Watch dir for only (a file name) or for the policy files; a directory
 * already watched for the same thing is left as it is.  0 or -1 (err
 * filled). */
static int watch_dir(watch *w, const char *dir, const char *only) {
    char real[PATH_MAX];
    const char *path = realpath(dir, real) ? real : dir;
    watched *d = NULL;
    int rc;

    for (size_t i = 0; i < w->ndirs; i++)
        if (!strcmp(w->dirs[i]->dir, path) &&
            (only ? w->dirs[i]->only && !strcmp(w->dirs[i]->only, only) : !w->dirs[i]->only))
            return 0;
    if (w->ndirs == w->cap_dirs) {
        size_t ncap = w->cap_dirs ? 2 * w->cap_dirs : 4;
        watched **x = realloc(w->dirs, ncap * sizeof *x);
        if (!x) return us_err_nomem(w->err);
        w->dirs = x;
        w->cap_dirs = ncap;
    }
    if (!(d = calloc(1, sizeof *d)) || !(d->dir = strdup(path)) || (only && !(d->only = strdup(only)))) {
        if (d) {
            free(d->dir);
            free(d->only);
        }
        free(d);
        return us_err_nomem(w->err);
    }
    d->w = w;
    uv_fs_event_init(&w->loop, &d->handle);
    d->handle.data = d;
    w->dirs[w->ndirs++] = d;  /* from here on, closing frees it */
    if ((rc = uv_fs_event_start(&d->handle, on_event, d->dir, 0)) < 0)
        return us_err_set(w->err, US_EIO, "cannot watch %s: %s", d->dir, uv_strerror(rc));
    return 0;
}

/* The directory part of a file path ("." when it has none). */
static void dir_of(const char *path, char *dir, size_t n, const char **base) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, n, ".");
        *base = path;
    } else if (slash == path) {
        snprintf(dir, n, "/");
        *base = slash + 1;
    } else {
        snprintf(dir, n, "%.*s", (int)(slash - path), path);
        *base = slash + 1;
    }
}

/* A failure that ends the watch (out of memory, output that cannot be
 * written), as opposed to a file that does not load. */
static void fatal(watch *w, const us_err *err) {
    us_err_set(w->err, err->code ? err->code : US_ENOMEM, "%s",
               err->msg[0] ? err->msg : "out of memory");
    w->rc = -1;
}

/* One run and its report.  A file that does not load is reported, not
 * fatal; only running out of memory or a failed watch sets w->rc. */
static void run_once(watch *w) {
    const us_watch_opts *o = w->o;
    us_scenario sc;
    us_sim_result res;
    us_diff_run cur;
    us_policy *pol = NULL;
    us_err err = {0};
    bool loaded = false;
    FILE *f = w->out;
    int n = ++w->runs;

    memset(&sc, 0, sizeof sc);
    memset(&cur, 0, sizeof cur);
    if (!o->json) {
        if (w->changed[0]) fprintf(f, "== run %d (%s changed) ==\n", n, w->changed);
        else fprintf(f, "== run %d ==\n", n);
    }
    w->changed[0] = '\0';

    if (us_scenario_load_file(&sc, o->scenario, &err) < 0) {
        if (err.code == US_ENOMEM) {
            fatal(w, &err);
            goto cleanup;
        }
        fprintf(f, "run %d: %s%s%s\n", n, err.code == US_EIO ? "" : o->scenario,
                err.code == US_EIO ? "" : ": ", err.msg);
        goto cleanup;
    }
    loaded = true;
    /* the directories the timeline reloads from matter as much */
    for (size_t i = 0; i < sc.ntimeline; i++)
        if (sc.timeline[i].action == US_TL_RELOAD_POLICIES && watch_dir(w, sc.timeline[i].dir, NULL) < 0) {
            if (w->err->code == US_ENOMEM) {
                w->rc = -1;
                goto cleanup;
            }
            fprintf(f, "run %d: %s\n", n, w->err->msg);  /* runs all the same */
        }
    if (o->policy_dir && !(pol = us_policy_load(o->policy_dir, &o->sim.limits, &err))) {
        if (err.code == US_ENOMEM) {
            fatal(w, &err);
            goto cleanup;
        }
        fprintf(f, "run %d: policies %s: %s\n", n, o->policy_dir, err.msg);
        goto cleanup;
    }
    if (us_sim_run(&sc, pol, &o->sim, &res, &err) < 0) {
        if (err.code == US_ENOMEM) {
            fatal(w, &err);
            goto cleanup;
        }
        fprintf(f, "run %d: simulation failed: %s\n", n, err.msg);
        goto cleanup;
    }
    if (!w->last_run) {
        /* the first run that works: the whole account, as simulate prints it */
        int rc = o->json ? us_output_json(f, &res, &sc.state, &err)
                         : us_output_text(f, &res, &sc.state, &err);
        if (us_diff_capture(&cur, &res, &sc.state, o->policy_dir, &err) < 0 || rc < 0) {
            fatal(w, &err);
            goto cleanup;
        }
    } else {
        if (us_diff_capture(&cur, &res, &sc.state, o->policy_dir, &err) < 0) {
            fatal(w, &err);
            goto cleanup;
        }
        if (o->json) {
            cJSON *doc = us_diff_document(&w->last, &cur);
            char *text = doc ? cJSON_Print(doc) : NULL;
            cJSON_Delete(doc);
            if (!text) {
                fatal(w, &err);
                goto cleanup;
            }
            fprintf(f, "%s\n", text);
            free(text);
        } else {
            char na[32], nb[32];
            snprintf(na, sizeof na, "run %d", w->last_run);
            snprintf(nb, sizeof nb, "run %d", n);
            fprintf(f, "changes since run %d:\n", w->last_run);
            if (us_diff_text(f, &w->last, &cur, na, nb, &err) < 0) {
                fatal(w, &err);
                goto cleanup;
            }
        }
    }
    us_diff_run_free(&w->last);
    w->last = cur;
    memset(&cur, 0, sizeof cur);
    w->last_run = n;
cleanup:
    if (!o->json && !w->rc && !(o->max_runs > 0 && n >= o->max_runs))
        fprintf(f, "\nwatching %s%s%s for changes (Ctrl-C to stop)\n", o->scenario,
                o->policy_dir ? " and " : "", o->policy_dir ? o->policy_dir : "");
    fflush(f);
    us_diff_run_free(&cur);
    us_policy_free(pol);
    if (loaded) us_scenario_free(&sc);
}

int us_watch_run(FILE *out, const us_watch_opts *o, us_err *err) {
    watch w;
    char dir[PATH_MAX];
    const char *base;
    int rc;

    memset(&w, 0, sizeof w);
    w.o = o;
    w.out = out;
    w.err = err;
    if ((rc = uv_loop_init(&w.loop)) < 0)
        return us_err_set(err, US_EIO, "cannot start watching: %s", uv_strerror(rc));
    uv_timer_init(&w.loop, &w.timer);
    w.timer.data = &w;
    uv_signal_init(&w.loop, &w.sigint);
    uv_signal_init(&w.loop, &w.sigterm);
    w.sigint.data = w.sigterm.data = &w;

    /* watches first, so that no save made during the first run is missed */
    dir_of(o->scenario, dir, sizeof dir, &base);
    if (watch_dir(&w, dir, base) < 0 || (o->policy_dir && watch_dir(&w, o->policy_dir, NULL) < 0) ||
        uv_signal_start(&w.sigint, on_signal, SIGINT) < 0 ||
        uv_signal_start(&w.sigterm, on_signal, SIGTERM) < 0) {
        w.rc = -1;
        stop(&w);
    } else {
        run_once(&w);
        if (w.rc < 0 || (o->max_runs > 0 && w.runs >= o->max_runs)) stop(&w);
    }
    uv_run(&w.loop, UV_RUN_DEFAULT);
    us_diff_run_free(&w.last);
    free(w.dirs);
    if (uv_loop_close(&w.loop) < 0 && w.rc == 0)
        w.rc = us_err_set(err, US_EIO, "the watch loop did not close cleanly");
    return w.rc;
}
