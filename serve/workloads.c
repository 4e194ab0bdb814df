/*
 * workloads.c — the cluster's Pods, PodGroups, Namespaces and
 * PriorityClasses (and Nodes, which pods name) kept in caches, and the
 * workloads and pods they form fed to the engine through the public API
 * only.  The grouping is kube/objects.c's (kube_scenario), the same
 * mapping `understory import` uses, run over the caches at each sync: one
 * mechanism for start-up, changes and relists.  Owns the caches, the
 * names reported and the binds assumed; it never decides anything nor
 * talks to the server.
 */
#include "workloads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objects.h"

/* Objects by key, sorted (determinism: kube_scenario sees one order). */
typedef struct cache {
    char **keys;
    cJSON **objs;
    double *when; /* the assumed binds' times; unused by object caches */
    size_t n, cap;
} cache;

struct sv_workloads {
    us_engine *engine;
    char *scheduler;
    double epoch;
    bool dirty;
    cache kinds[SV_NKINDS];
    cache pods_put;    /* real pod names reported to the engine */
    cache pending;     /* of those, the unbound ones */
    cache wls_put;     /* workloads upserted */
    cache assumed;     /* bound by us, not yet seen bound */
};

static long find(const cache *c, const char *key, bool *found) {
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int r = strcmp(c->keys[mid], key);
        if (r == 0) {
            *found = true;
            return (long)mid;
        }
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    *found = false;
    return (long)lo;
}

static bool has(const cache *c, const char *key) {
    bool f;
    find(c, key, &f);
    return f;
}

/* Put key (copied) with obj (owned) and t; replaces what was there.  -1
 * when out of memory (obj freed). */
static int put(cache *c, const char *key, cJSON *obj, double t) {
    bool f;
    long i = find(c, key, &f);
    if (f) {
        cJSON_Delete(c->objs[i]);
        c->objs[i] = obj;
        c->when[i] = t;
        return 0;
    }
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 16;
        char **k = realloc(c->keys, ncap * sizeof *k);
        if (k) c->keys = k;
        cJSON **o = realloc(c->objs, ncap * sizeof *o);
        if (o) c->objs = o;
        double *w = realloc(c->when, ncap * sizeof *w);
        if (w) c->when = w;
        if (!k || !o || !w) goto nomem;
        c->cap = ncap;
    }
    char *copy = strdup(key);
    if (!copy) goto nomem;
    size_t m = c->n - (size_t)i;
    memmove(c->keys + i + 1, c->keys + i, m * sizeof *c->keys);
    memmove(c->objs + i + 1, c->objs + i, m * sizeof *c->objs);
    memmove(c->when + i + 1, c->when + i, m * sizeof *c->when);
    c->keys[i] = copy;
    c->objs[i] = obj;
    c->when[i] = t;
    c->n++;
    return 0;
nomem:
    cJSON_Delete(obj);
    return -1;
}

static void drop_at(cache *c, size_t i) {
    free(c->keys[i]);
    cJSON_Delete(c->objs[i]);
    size_t m = c->n - i - 1;
    memmove(c->keys + i, c->keys + i + 1, m * sizeof *c->keys);
    memmove(c->objs + i, c->objs + i + 1, m * sizeof *c->objs);
    memmove(c->when + i, c->when + i + 1, m * sizeof *c->when);
    c->n--;
}

static void drop(cache *c, const char *key) {
    bool f;
    long i = find(c, key, &f);
    if (f) drop_at(c, (size_t)i);
}

static void clear(cache *c) {
    while (c->n) drop_at(c, c->n - 1);
    free(c->keys);
    free(c->objs);
    free(c->when);
    memset(c, 0, sizeof *c);
}

sv_workloads *sv_workloads_new(us_engine *e, const char *scheduler, double epoch) {
    sv_workloads *w = calloc(1, sizeof *w);
    if (!w || !(w->scheduler = strdup(scheduler))) {
        free(w);
        return NULL;
    }
    w->engine = e;
    w->epoch = epoch;
    return w;
}

void sv_workloads_free(sv_workloads *w) {
    if (!w) return;
    for (int k = 0; k < SV_NKINDS; k++) clear(&w->kinds[k]);
    clear(&w->pods_put);
    clear(&w->pending);
    clear(&w->wls_put);
    clear(&w->assumed);
    free(w->scheduler);
    free(w);
}

static const char *mstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* "namespace/name", or "name" for a cluster-scoped object, into buf. */
static const char *key_of(const cJSON *o, char *buf, size_t len) {
    const char *ns = mstr(o, "namespace"), *name = mstr(o, "name");
    if (!name) return NULL;
    if (ns && *ns) snprintf(buf, len, "%s/%s", ns, name);
    else snprintf(buf, len, "%s", name);
    return buf;
}

int sv_workloads_event(sv_workloads *w, sv_kind kind, sv_event ev, const cJSON *obj) {
    char key[600];
    if (!key_of(obj, key, sizeof key)) return 0;
    w->dirty = true;
    if (ev == SV_DELETED) {
        drop(&w->kinds[kind], key);
        return 0;
    }
    /* a pod seen bound is no longer an assumption */
    if (kind == SV_PODS) {
        const cJSON *nn = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "spec"), "nodeName");
        if (cJSON_IsString(nn) && *nn->valuestring) drop(&w->assumed, key);
    }
    cJSON *copy = cJSON_Duplicate(obj, true);
    if (!copy || put(&w->kinds[kind], key, copy, 0) < 0) {
        fprintf(stderr, "understory serve: %s: out of memory\n", key);
        return -1;
    }
    return 0;
}

const cJSON *sv_workloads_get(const sv_workloads *w, sv_kind kind, const char *key) {
    bool f;
    long i = find(&w->kinds[kind], key, &f);
    return f ? w->kinds[kind].objs[i] : NULL;
}

bool sv_workloads_is_pending(const sv_workloads *w, const char *name) {
    return has(&w->pending, name) && !has(&w->assumed, name);
}

int sv_workloads_assume(sv_workloads *w, const char *name, double t) {
    drop(&w->pending, name);
    return put(&w->assumed, name, NULL, t);
}

void sv_workloads_forget(sv_workloads *w, const char *name) {
    drop(&w->assumed, name);
    w->dirty = true; /* report it as the cache has it */
}

void sv_workloads_expire(sv_workloads *w, double t, double timeout) {
    for (size_t i = w->assumed.n; i-- > 0;)
        if (t - w->assumed.when[i] > timeout) {
            fprintf(stderr, "understory serve: pod %s: bind not seen after %gs, pending again\n",
                    w->assumed.keys[i], timeout);
            drop_at(&w->assumed, i);
            w->dirty = true;
        }
}

static const char *gstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* One workload of the mapping into the engine: upserted (removed and
 * submitted again when a field that cannot change on a live workload
 * did), then its pods; the names reported go into now_pods/now_pending. */
static void put_workload(sv_workloads *w, cJSON *wl, double now, cache *now_pods, cache *now_pending) {
    us_error err;
    const char *name = gstr(wl, "name");
    cJSON *pods = cJSON_DetachItemFromObjectCaseSensitive(wl, "pods");
    char *json = cJSON_PrintUnformatted(wl);
    int rc = json ? us_engine_upsert_workload_json(w->engine, json, now, &err) : US_ENOMEM;
    if (rc == US_EINVAL && has(&w->wls_put, name)) {
        printf("workload %s: changed (%s), submitted again\n", name, err.message);
        if (us_engine_remove_workload(w->engine, name, now, &err) == US_OK)
            rc = us_engine_upsert_workload_json(w->engine, json, now, &err);
    }
    if (rc != US_OK) {
        fprintf(stderr, "understory serve: workload %s not taken: %s\n", name,
                json ? err.message : "out of memory");
        goto done;
    }
    if (!has(&w->wls_put, name)) printf("workload %s: %s\n", name, json);
    put(&w->wls_put, name, NULL, 0);
    const cJSON *p;
    cJSON_ArrayForEach(p, pods) {
        const char *pn = gstr(p, "name"), *node = gstr(p, "node"), *state = gstr(p, "state");
        if (!pn) continue;
        put(now_pods, pn, NULL, 0);
        /* bound by us and not seen bound yet: the engine's view (running) stands */
        if (!node && has(&w->assumed, pn)) continue;
        us_pod_spec spec = {.name = pn, .workload = name, .node = node};
        if (us_engine_upsert_pod(w->engine, &spec, &err) != US_OK) {
            fprintf(stderr, "understory serve: pod %s (%s) not taken: %s\n", pn, state ? state : "?", err.message);
            continue;
        }
        if (!node) put(now_pending, pn, NULL, 0);
    }
done:
    free(json);
    cJSON_Delete(pods);
}

int sv_workloads_sync(sv_workloads *w, double now) {
    if (!w->dirty) return 0;
    const cJSON **arrs[SV_NKINDS];
    kube_objs objs[SV_NKINDS];
    int rc = -1;
    cJSON *doc = NULL;
    us_err kerr = {0};
    us_error err;
    cache now_pods = {0}, now_pending = {0}, now_wls = {0};
    memset(arrs, 0, sizeof arrs);
    for (int k = 0; k < SV_NKINDS; k++) {
        /* the caches' objects, read only: kube_scenario never changes them */
        arrs[k] = (const cJSON **)w->kinds[k].objs;
        objs[k] = (kube_objs){arrs[k], NULL, w->kinds[k].n};
    }
    kube_cluster c = {objs[SV_NODES], objs[SV_PODS], objs[SV_NAMESPACES], {0}, objs[SV_PODGROUPS],
                      objs[SV_PRIORITYCLASSES]};
    kube_opts o = {w->scheduler, "serve", w->epoch, 1};
    if (kube_scenario(&c, &o, &doc, &kerr) < 0) {
        fprintf(stderr, "understory serve: the cluster's pods do not map: %s\n", kerr.msg);
        goto out;
    }
    const cJSON *wl;
    cJSON_ArrayForEach(wl, cJSON_GetObjectItemCaseSensitive(doc, "workloads")) {
        const char *name = gstr(wl, "name");
        if (name) put(&now_wls, name, NULL, 0);
        const cJSON *p;
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(wl, "pods"))
            if (gstr(p, "name")) put(&now_pods, gstr(p, "name"), NULL, 0);
    }
    /* gone first: a pod gone frees its place for the new one that replaces it */
    for (size_t i = 0; i < w->pods_put.n; i++)
        if (!has(&now_pods, w->pods_put.keys[i]) && !has(&w->assumed, w->pods_put.keys[i])) {
            if (us_engine_remove_pod(w->engine, w->pods_put.keys[i], &err) == US_OK)
                printf("pod %s: gone\n", w->pods_put.keys[i]);
        }
    for (size_t i = 0; i < w->wls_put.n; i++)
        if (!has(&now_wls, w->wls_put.keys[i])) {
            if (us_engine_remove_workload(w->engine, w->wls_put.keys[i], now, &err) == US_OK)
                printf("workload %s: removed\n", w->wls_put.keys[i]);
        }
    for (size_t i = w->wls_put.n; i-- > 0;)
        if (!has(&now_wls, w->wls_put.keys[i])) drop_at(&w->wls_put, i);
    clear(&now_pods);
    cJSON_ArrayForEach(wl, cJSON_GetObjectItemCaseSensitive(doc, "workloads"))
        put_workload(w, (cJSON *)wl, now, &now_pods, &now_pending);
    clear(&w->pods_put);
    clear(&w->pending);
    w->pods_put = now_pods;
    w->pending = now_pending;
    memset(&now_pods, 0, sizeof now_pods);
    memset(&now_pending, 0, sizeof now_pending);
    w->dirty = false;
    fflush(stdout);
    rc = 0;
out:
    clear(&now_pods);
    clear(&now_pending);
    clear(&now_wls);
    cJSON_Delete(doc);
    return rc;
}
