/*
 * informer.c — list, then watch, one kind of object (see informer.h).
 * Objects are known by "namespace/name"; a relist marks the ones it sees,
 * and the unmarked ones are reported deleted.  Failed requests are retried
 * after the client's backoff rule (backoff.h) from 500 ms up to 30 s,
 * which starts over on success.
 */
#include "informer.h"
#include "watchstream.h"

#include <curl/curl.h>
#include <stdio.h>
#include <unistd.h>

#include "backoff.h"
#include <stdlib.h>
#include <string.h>

#define PAGE 500
#define WATCH_SECONDS 300

typedef struct entry {
    char *key;              /* NULL: empty slot */
    unsigned mark;          /* list generation that last saw it */
} entry;

struct sv_informer {
    sv_http *h;
    char *path;
    sv_informer_fn fn;
    sv_synced_fn synced;
    void *ud;
    uv_timer_t retry;
    sv_backoff backoff;
    unsigned failures;      /* in a row: the backoff's attempt */
    char *rv;               /* resourceVersion to watch from */
    char *cont;             /* list continue token */
    bool listing, synced_once, relist, stopped;
    unsigned gen, lists;
    unsigned watch_ends;    /* watches that ended and were resumed or relisted */
    entry *tab;             /* open addressing, power-of-two size */
    size_t cap, n;
    sv_watchstream ws;      /* the watch stream's decoder */
};

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static entry *find(sv_informer *f, const char *key) {
    if (!f->cap) return NULL;
    for (size_t i = hash(key) & (f->cap - 1);; i = (i + 1) & (f->cap - 1)) {
        if (!f->tab[i].key) return &f->tab[i];
        if (strcmp(f->tab[i].key, key) == 0) return &f->tab[i];
    }
}

/* Rehash after deletions too: entries are removed by rebuilding. */
static int rebuild(sv_informer *f, size_t ncap) {
    entry *old = f->tab, *t = calloc(ncap, sizeof *t);
    size_t ocap = f->cap;
    if (!t) return -1;
    f->tab = t;
    f->cap = ncap;
    f->n = 0;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].key) {
            entry *e = find(f, old[i].key);
            *e = old[i];
            f->n++;
        }
    free(old);
    return 0;
}

/* Is key known?  With add, make it known (marked with this generation). */
static bool known(sv_informer *f, const char *key, bool add) {
    entry *e = find(f, key);
    if (e && e->key) {
        e->mark = f->gen;
        return true;
    }
    if (!add) return false;
    if ((f->n + 1) * 2 > f->cap && rebuild(f, f->cap ? f->cap * 2 : 64) < 0) return false;
    e = find(f, key);
    if ((e->key = strdup(key))) {
        e->mark = f->gen;
        f->n++;
    }
    return false;
}

static void forget(sv_informer *f, const char *key) {
    entry *e = find(f, key);
    if (!e || !e->key) return;
    free(e->key);
    e->key = NULL;
    rebuild(f, f->cap); /* keeps probe chains intact; on failure the old table stays */
}

static const char *str_at(const cJSON *o, const char *a, const char *b) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    x = b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* "namespace/name" (cluster-scoped: "/name") into buf. */
static const char *key_of(const cJSON *obj, char *buf, size_t n) {
    const char *ns = str_at(obj, "metadata", "namespace"), *name = str_at(obj, "metadata", "name");
    if (!name) return NULL;
    snprintf(buf, n, "%s/%s", ns ? ns : "", name);
    return buf;
}

static void set_str(char **dst, const char *s) {
    char *c = s ? strdup(s) : NULL;
    if (s && !c) return; /* keep the old value: a later event brings a newer one */
    free(*dst);
    *dst = c;
}

static void start_list(sv_informer *f);
static void start_watch(sv_informer *f);

static void on_retry(uv_timer_t *t) {
    sv_informer *f = t->data;
    if (f->stopped) return;
    if (f->listing || !f->rv) start_list(f);
    else start_watch(f);
}

static void later(sv_informer *f, const char *what, long status, const char *msg) {
    unsigned ms = sv_backoff_delay(&f->backoff, f->failures++);
    fprintf(stderr, "understory serve: %s %s: %s%s; again in %u ms\n", what, f->path,
            status ? "HTTP " : "", msg, ms);
    uv_timer_start(&f->retry, on_retry, ms, 0);
}

static void on_list(void *ud, long status, const char *body, size_t n, const char *err) {
    sv_informer *f = ud;
    char key[600], code[16];
    (void)n;
    if (f->stopped) return;
    if (status == 410 && f->cont) { /* the continue token expired: from the start */
        set_str(&f->cont, NULL);
        f->gen++;
        start_list(f);
        return;
    }
    if (status != 200) {
        snprintf(code, sizeof code, "%ld", status);
        later(f, "list", status, status ? code : err);
        return;
    }
    cJSON *doc = cJSON_Parse(body);
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(doc, "items"), *it;
    if (!doc || !cJSON_IsArray(items)) {
        cJSON_Delete(doc);
        later(f, "list", 0, "the answer is not a list");
        return;
    }
    cJSON_ArrayForEach(it, items) {
        if (!key_of(it, key, sizeof key)) continue;
        f->fn(f->ud, known(f, key, true) ? SV_MODIFIED : SV_ADDED, it);
        if (f->stopped) break;
    }
    const char *cont = str_at(doc, "metadata", "continue");
    set_str(&f->cont, cont && *cont ? cont : NULL);
    set_str(&f->rv, str_at(doc, "metadata", "resourceVersion"));
    cJSON_Delete(doc);
    f->failures = 0;
    if (f->stopped) return;
    if (f->cont) {
        start_list(f);
        return;
    }
    /* the list is whole: what it did not show is gone */
    f->listing = false;
    for (size_t i = 0; i < f->cap; i++) {
        if (!f->tab[i].key || f->tab[i].mark == f->gen) continue;
        /* the key is all that is left of it: namespace/name */
        char *k = f->tab[i].key, *slash = strchr(k, '/');
        cJSON *o = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(o, "metadata");
        if (m && slash) {
            *slash = '\0';
            if (*k) cJSON_AddStringToObject(m, "namespace", k);
            cJSON_AddStringToObject(m, "name", slash + 1);
            *slash = '/';
            f->fn(f->ud, SV_DELETED, o);
        }
        cJSON_Delete(o);
        free(f->tab[i].key);
        f->tab[i].key = NULL;
    }
    rebuild(f, f->cap ? f->cap : 64);
    if (!f->synced_once) {
        f->synced_once = true;
        if (f->synced) f->synced(f->ud);
    }
    if (!f->stopped) start_watch(f);
}

static void start_list(sv_informer *f) {
    char q[2048];
    f->listing = true;
    if (!f->cont) {
        f->gen++;
        f->lists++;
    }
    char *esc = f->cont ? curl_easy_escape(NULL, f->cont, 0) : NULL;
    snprintf(q, sizeof q, "%s?limit=%d%s%s", f->path, PAGE, esc ? "&continue=" : "", esc ? esc : "");
    curl_free(esc);
    if (sv_http_request(f->h, "GET", q, NULL, NULL, on_list, f) < 0) later(f, "list", 0, "out of memory");
}

/* One event of the watch stream; false: decode no further. */
static bool watch_event(void *ud, const sv_watch_event *ev) {
    sv_informer *f = ud;
    char key[600];
    if (ev->type == SV_WATCH_GONE) {
        f->relist = true;
        return false;
    }
    if (ev->type == SV_WATCH_ERROR) {
        fprintf(stderr, "understory serve: watch %s: %s\n", f->path, ev->line);
        return true;
    }
    if (ev->rv) set_str(&f->rv, ev->rv);
    if (ev->type == SV_WATCH_BOOKMARK || ev->type == SV_WATCH_OTHER || !key_of(ev->object, key, sizeof key))
        return true;
    if (ev->type == SV_WATCH_DELETED) {
        if (known(f, key, false)) {
            forget(f, key);
            f->fn(f->ud, SV_DELETED, ev->object);
        }
    } else {
        f->fn(f->ud, known(f, key, true) ? SV_MODIFIED : SV_ADDED, ev->object);
    }
    return !f->stopped;
}

static void on_watch_data(void *ud, const char *buf, size_t n) {
    sv_informer *f = ud;
    if (f->stopped || f->relist) return;
    if (sv_watchstream_feed(&f->ws, buf, n, watch_event, f) < 0)
        f->relist = true; /* an event is lost: start over from a list */
}

static void on_watch_done(void *ud, long status, const char *body, size_t n, const char *err) {
    sv_informer *f = ud;
    char code[16];
    (void)body;
    (void)n;
    if (f->stopped) return;
    sv_watchstream_reset(&f->ws);
    f->watch_ends++;
    if (f->relist || status == 410) {
        fprintf(stderr, "understory serve: watch %s: resource version %s is gone (410); listing again\n",
                f->path, f->rv ? f->rv : "?");
        f->relist = false;
        set_str(&f->rv, NULL);
        start_list(f);
        return;
    }
    if (status == 200) { /* the server ended it (timeoutSeconds): resume */
        f->failures = 0;
        start_watch(f);
        return;
    }
    snprintf(code, sizeof code, "%ld", status);
    later(f, "watch", status, status ? code : err);
}

static void start_watch(sv_informer *f) {
    char q[1024];
    snprintf(q, sizeof q, "%s?watch=1&allowWatchBookmarks=true&timeoutSeconds=%d&resourceVersion=%s",
             f->path, WATCH_SECONDS, f->rv ? f->rv : "");
    if (sv_http_request(f->h, "GET", q, NULL, on_watch_data, on_watch_done, f) < 0)
        later(f, "watch", 0, "out of memory");
}

sv_informer *sv_informer_start(sv_http *h, uv_loop_t *loop, const char *path, sv_informer_fn fn,
                               sv_synced_fn synced, void *ud) {
    sv_informer *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return NULL;
    }
    f->h = h;
    f->fn = fn;
    f->synced = synced;
    f->ud = ud;
    /* the path in the seed: informers that fail together part */
    uint64_t seed = (uint64_t)getpid();
    for (const char *p = path; *p; p++) seed = seed * 1099511628211u ^ (unsigned char)*p;
    sv_backoff_init(&f->backoff, 500, 30000, seed);
    sv_watchstream_init(&f->ws);
    uv_timer_init(loop, &f->retry);
    f->retry.data = f;
    start_list(f);
    return f;
}

static void free_informer(uv_handle_t *hd) {
    sv_informer *f = hd->data;
    for (size_t i = 0; i < f->cap; i++) free(f->tab[i].key);
    free(f->tab);
    free(f->path);
    free(f->rv);
    free(f->cont);
    sv_watchstream_free(&f->ws);
    free(f);
}

void sv_informer_stop(sv_informer *f) {
    if (!f) return;
    f->stopped = true;
    uv_timer_stop(&f->retry);
    uv_close((uv_handle_t *)&f->retry, free_informer);
}

unsigned sv_informer_lists(const sv_informer *f) { return f->lists; }

unsigned sv_informer_watch_restarts(const sv_informer *f) { return f->watch_ends; }

size_t sv_informer_objects(const sv_informer *f) { return f->n; }

bool sv_informer_synced(const sv_informer *f) { return f->synced_once; }
