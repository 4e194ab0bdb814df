/*
 * workloads.c — the cluster's Pods, PodGroups, Namespaces and
 * PriorityClasses (and Nodes, which pods name) kept in caches, and the
 * workloads and pods they form fed to the engine through the public API
 * only.  The grouping is kube/objects.c's (kube_scenario), the same
 * mapping `understory import` uses, run one workload at a time: an
 * informer event marks the workloads it touches, and a sync maps only
 * those again, so a sync costs what changed, not the cluster; and a
 * workload that does not map is left out alone (logged with the object
 * and the JSON path) while the rest is scheduled.  Owns the caches, the
 * names reported and the binds assumed; it never decides anything nor
 * talks to the server.  Not thread-safe: the serve loop's thread only.
 */
#include "workloads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objects.h"

/* Objects by key, sorted (determinism: a sync walks them in one order). */
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
    bool all_dirty;    /* map every workload again (a node came or went) */
    cache kinds[SV_NKINDS];
    cache pod_wl;      /* pod key -> its workload's name (a cJSON string) */
    cache wl_pods;     /* workload name -> its pods' keys (a cJSON array) */
    cache dirty;       /* workloads touched since the last sync */
    cache reported;    /* workload name -> the pod names reported for it */
    cache pending;     /* the unbound pods of ours reported pending */
    cache wls_put;     /* workloads upserted */
    cache assumed;     /* bound by us, not yet seen bound */
    unsigned long mapped; /* workloads mapped by syncs so far */
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

static cJSON *lookup(const cache *c, const char *key) {
    bool f;
    long i = find(c, key, &f);
    return f ? c->objs[i] : NULL;
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
    cache *all[] = {&w->pod_wl, &w->wl_pods, &w->dirty, &w->reported, &w->pending, &w->wls_put, &w->assumed};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) clear(all[i]);
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

static int mark(sv_workloads *w, const char *wl) {
    return has(&w->dirty, wl) ? 0 : put(&w->dirty, wl, NULL, 0);
}

/* The string items of array a equal to s are removed. */
static void remove_string(cJSON *a, const char *s) {
    for (int i = cJSON_GetArraySize(a) - 1; i >= 0; i--) {
        const cJSON *v = cJSON_GetArrayItem(a, i);
        if (cJSON_IsString(v) && !strcmp(v->valuestring, s)) cJSON_DeleteItemFromArray(a, i);
    }
}

/* Pod key leaves the index (its old workload is marked). */
static int unindex_pod(sv_workloads *w, const char *key) {
    const cJSON *old = lookup(&w->pod_wl, key);
    if (!old) return 0;
    cJSON *list = lookup(&w->wl_pods, old->valuestring);
    int rc = mark(w, old->valuestring);
    if (list) {
        remove_string(list, key);
        if (!cJSON_GetArraySize(list)) drop(&w->wl_pods, old->valuestring);
    }
    drop(&w->pod_wl, key);
    return rc;
}

/* Pod key joins workload wl in the index (both marked). */
static int index_pod(sv_workloads *w, const char *key, const char *wl) {
    const cJSON *old = lookup(&w->pod_wl, key);
    if (old && !strcmp(old->valuestring, wl)) return mark(w, wl);
    if (unindex_pod(w, key) < 0) return -1;
    cJSON *list = lookup(&w->wl_pods, wl), *name = cJSON_CreateString(key);
    if (!name) return -1;
    if (!list) {
        if (!(list = cJSON_CreateArray()) || put(&w->wl_pods, wl, list, 0) < 0) {
            cJSON_Delete(name);
            return -1;
        }
    }
    cJSON_AddItemToArray(list, name);
    cJSON *s = cJSON_CreateString(wl);
    if (!s || put(&w->pod_wl, key, s, 0) < 0) return -1;
    return mark(w, wl);
}

/* Every workload whose name starts with prefix ("" all) is marked. */
static int mark_prefix(sv_workloads *w, const char *prefix) {
    size_t n = strlen(prefix);
    cache *all[] = {&w->wl_pods, &w->wls_put};
    for (int c = 0; c < 2; c++)
        for (size_t i = 0; i < all[c]->n; i++)
            if (!strncmp(all[c]->keys[i], prefix, n) && mark(w, all[c]->keys[i]) < 0) return -1;
    return 0;
}

static const char *node_pool(const cJSON *n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(n, "metadata"), "labels"),
        "kai.scheduler/node-pool");
    return cJSON_IsString(v) ? v->valuestring : "default";
}

/* What an event means for the workloads: which of them map differently. */
static int touch(sv_workloads *w, sv_kind kind, sv_event ev, const char *key, const cJSON *obj) {
    switch (kind) {
    case SV_PODS: {
        if (ev == SV_DELETED) return unindex_pod(w, key);
        kube_opts o = {w->scheduler, "serve", w->epoch, 1, 1};
        char *wl = kube_pod_workload(obj, &o);
        /* a pod whose workload cannot be read is one of its own, which
         * then fails to map and says why */
        int rc = index_pod(w, key, wl ? wl : key);
        free(wl);
        return rc;
    }
    case SV_PODGROUPS:
        /* a PodGroup's workload is named as it is */
        return mark(w, key);
    case SV_NAMESPACES: {
        char prefix[640];
        snprintf(prefix, sizeof prefix, "%s/", key);
        return mark_prefix(w, prefix);
    }
    case SV_PRIORITYCLASSES:
        return mark_prefix(w, "");
    case SV_NODES: {
        /* pods name nodes, and a node's pool is their workload's: a node
         * that comes, goes or changes pool remaps everything (rare); its
         * status and heartbeats change nothing here */
        const cJSON *old = lookup(&w->kinds[SV_NODES], key);
        if (ev == SV_DELETED || !old || strcmp(node_pool(old), node_pool(obj)) != 0) w->all_dirty = true;
        return 0;
    }
    default:
        return 0;
    }
}

int sv_workloads_event(sv_workloads *w, sv_kind kind, sv_event ev, const cJSON *obj) {
    char key[600];
    if (!key_of(obj, key, sizeof key)) return 0;
    if (touch(w, kind, ev, key, obj) < 0) goto nomem;
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
    if (!copy || put(&w->kinds[kind], key, copy, 0) < 0) goto nomem;
    return 0;
nomem:
    fprintf(stderr, "understory serve: %s: out of memory\n", key);
    w->all_dirty = true; /* the index may miss it: map everything next time */
    return -1;
}

const cJSON *sv_workloads_get(const sv_workloads *w, sv_kind kind, const char *key) {
    return lookup(&w->kinds[kind], key);
}

bool sv_workloads_is_pending(const sv_workloads *w, const char *name) {
    return has(&w->pending, name) && !has(&w->assumed, name);
}

unsigned long sv_workloads_mapped(const sv_workloads *w) { return w->mapped; }

/* The workload of a reported pod name (pod keys and names are alike). */
static const char *wl_of(const sv_workloads *w, const char *pod) {
    const cJSON *s = lookup(&w->pod_wl, pod);
    return s ? s->valuestring : NULL;
}

int sv_workloads_hold(sv_workloads *w, const char *name, const char *node) {
    us_pod_spec s = {.name = name, .node = node, .terminating = 1};
    us_error err;
    if (us_engine_upsert_pod(w->engine, &s, &err) == US_OK) return 0;
    fprintf(stderr, "understory serve: pod %s: %s\n", name, err.message);
    return -1;
}

int sv_workloads_assume(sv_workloads *w, const char *name, double t) {
    drop(&w->pending, name);
    return put(&w->assumed, name, NULL, t);
}

void sv_workloads_forget(sv_workloads *w, const char *name) {
    drop(&w->assumed, name);
    /* report it as the cache has it */
    const char *wl = wl_of(w, name);
    if (!wl || mark(w, wl) < 0) w->all_dirty = true;
}

void sv_workloads_expire(sv_workloads *w, double t, double timeout) {
    for (size_t i = w->assumed.n; i-- > 0;)
        if (t - w->assumed.when[i] > timeout) {
            fprintf(stderr, "understory serve: pod %s: bind not seen after %gs, pending again\n",
                    w->assumed.keys[i], timeout);
            const char *wl = wl_of(w, w->assumed.keys[i]);
            if (!wl || mark(w, wl) < 0) w->all_dirty = true;
            drop_at(&w->assumed, i);
        }
}

static const char *gstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The pods reported for wl leave the engine, but those in keep (NULL:
 * none) and those bound by us that the watch has not shown yet. */
static void remove_reported(sv_workloads *w, const char *wl, const cJSON *keep) {
    cJSON *list = lookup(&w->reported, wl);
    const cJSON *p;
    us_error err;
    cache kept = {0}; /* keep, sorted: a workload of thousands of pods is not squared */
    cJSON_ArrayForEach(p, keep)
        if (put(&kept, p->valuestring, NULL, 0) < 0) {
            fprintf(stderr, "understory serve: workload %s: out of memory\n", wl);
            clear(&kept);
            return; /* nothing removed: the next sync tries again */
        }
    cJSON_ArrayForEach(p, list) {
        const char *pn = p->valuestring;
        if (has(&kept, pn)) continue;
        drop(&w->pending, pn);
        if (has(&w->assumed, pn)) continue;
        if (us_engine_remove_pod(w->engine, pn, &err) == US_OK) printf("pod %s: gone\n", pn);
    }
    clear(&kept);
    drop(&w->reported, wl);
}

static void remove_workload(sv_workloads *w, const char *wl, double now) {
    us_error err;
    remove_reported(w, wl, NULL);
    if (!has(&w->wls_put, wl)) return;
    if (us_engine_remove_workload(w->engine, wl, now, &err) == US_OK) printf("workload %s: removed\n", wl);
    else fprintf(stderr, "understory serve: workload %s not removed: %s\n", wl, err.message);
    drop(&w->wls_put, wl);
}

/* One workload of the mapping into the engine: upserted (removed and
 * submitted again when a field that cannot change on a live workload
 * did).  Its pods are detached into *pods for put_pods.  false when the
 * engine refused it (logged). */
static bool put_workload(sv_workloads *w, cJSON *wl, double now, cJSON **pods) {
    us_error err;
    const char *name = gstr(wl, "name");
    *pods = cJSON_DetachItemFromObjectCaseSensitive(wl, "pods");
    char *json = cJSON_PrintUnformatted(wl);
    if (!json) {
        fprintf(stderr, "understory serve: workload %s: out of memory\n", name);
        return false;
    }
    int rc = us_engine_upsert_workload_json(w->engine, json, now, &err);
    if (rc == US_EINVAL && has(&w->wls_put, name)) {
        printf("workload %s: changed (%s), submitted again\n", name, err.message);
        if (us_engine_remove_workload(w->engine, name, now, &err) == US_OK)
            rc = us_engine_upsert_workload_json(w->engine, json, now, &err);
    }
    if (rc != US_OK) {
        fprintf(stderr, "understory serve: workload %s not taken: %s\n", name, err.message);
        drop(&w->wls_put, name);
        free(json);
        return false;
    }
    if (!has(&w->wls_put, name)) printf("workload %s: %s\n", name, json);
    free(json);
    return put(&w->wls_put, name, NULL, 0) == 0;
}

/* The pods of workload name reported by their real names (map_one
 * removed those gone). */
static void put_pods(sv_workloads *w, const char *name, const cJSON *pods) {
    us_error err;
    const cJSON *p;
    cJSON *reported = cJSON_CreateArray();
    cJSON_ArrayForEach(p, pods) {
        const char *pn = gstr(p, "name"), *node = gstr(p, "node"), *state = gstr(p, "state");
        bool releasing = state && !strcmp(state, "releasing");
        if (!pn) continue;
        drop(&w->pending, pn);
        /* a pending pod being deleted holds nothing: not reported */
        if (releasing && !node) continue;
        if (reported) cJSON_AddItemToArray(reported, cJSON_CreateString(pn));
        /* bound by us and not seen bound yet: the engine's view (running) stands */
        if (!node && has(&w->assumed, pn)) continue;
        us_pod_spec spec = {.name = pn, .workload = name, .node = node, .pin = gstr(p, "pin"),
                            .terminating = releasing};
        if (us_engine_upsert_pod(w->engine, &spec, &err) != US_OK) {
            fprintf(stderr, "understory serve: pod %s (%s) not taken: %s\n", pn, state ? state : "?", err.message);
            continue;
        }
        if (!node) put(&w->pending, pn, NULL, 0);
    }
    if (!reported || put(&w->reported, name, reported, 0) < 0)
        fprintf(stderr, "understory serve: workload %s: out of memory\n", name);
}

/* The cached objects a workload's mapping reads: its pods, the nodes they
 * name, its PodGroup, its namespace and every PriorityClass. */
typedef struct inputs {
    const cJSON **pods, **nodes, *pg[1], *ns[1];
    size_t npods, nnodes;
    const char **paths[SV_NKINDS]; /* each kind's name, for every object */
} inputs;

static int gather(const sv_workloads *w, const char *wl, inputs *in) {
    const cJSON *list = lookup(&w->wl_pods, wl), *k;
    size_t n = (size_t)cJSON_GetArraySize(list);
    memset(in, 0, sizeof *in);
    static const char *const kind_names[SV_NKINDS] = {"node", "pod", "namespace", "podgroup", "priorityclass"};
    size_t most = n > w->kinds[SV_PRIORITYCLASSES].n ? n : w->kinds[SV_PRIORITYCLASSES].n;
    in->pods = malloc((n ? n : 1) * sizeof *in->pods);
    in->nodes = malloc((n ? n : 1) * sizeof *in->nodes);
    if (!in->pods || !in->nodes) return -1;
    for (int k = 0; k < SV_NKINDS; k++) {
        if (!(in->paths[k] = malloc((most ? most : 1) * sizeof *in->paths[k]))) return -1;
        for (size_t i = 0; i < most; i++) in->paths[k][i] = kind_names[k];
    }
    cJSON_ArrayForEach(k, list) {
        const cJSON *pod = lookup(&w->kinds[SV_PODS], k->valuestring);
        if (!pod) continue;
        in->pods[in->npods++] = pod;
        const char *nn = gstr(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "nodeName");
        const cJSON *node = nn ? lookup(&w->kinds[SV_NODES], nn) : NULL;
        bool seen = false;
        for (size_t i = 0; i < in->nnodes; i++) seen = seen || in->nodes[i] == node;
        if (node && !seen) in->nodes[in->nnodes++] = node;
    }
    in->pg[0] = lookup(&w->kinds[SV_PODGROUPS], wl);
    char ns[640];
    snprintf(ns, sizeof ns, "%s", wl);
    char *slash = strchr(ns, '/');
    if (slash) *slash = 0;
    in->ns[0] = lookup(&w->kinds[SV_NAMESPACES], ns);
    return 0;
}

/* Map workload wl from the caches: its scenario object into *out (NULL
 * when it has no pod that maps, or when it does not map: logged).  The
 * pods reported for it that it no longer has leave the engine now. */
static void map_one(sv_workloads *w, const char *wl, double now, cJSON **out) {
    inputs in;
    cJSON *doc = NULL;
    us_err kerr = {0};
    *out = NULL;
    w->mapped++;
    if (gather(w, wl, &in) < 0) {
        fprintf(stderr, "understory serve: workload %s: out of memory\n", wl);
        goto out;
    }
    if (!in.npods) {
        remove_workload(w, wl, now);
        goto out;
    }
    const cJSON **pcs = (const cJSON **)w->kinds[SV_PRIORITYCLASSES].objs;
    /* messages name the object (Pod "ns/name") and the path inside it */
    kube_cluster c = {{in.nodes, in.paths[SV_NODES], in.nnodes}, {in.pods, in.paths[SV_PODS], in.npods},
                      {in.ns, in.paths[SV_NAMESPACES], in.ns[0] ? 1 : 0}, {0},
                      {in.pg, in.paths[SV_PODGROUPS], in.pg[0] ? 1 : 0},
                      {pcs, in.paths[SV_PRIORITYCLASSES], w->kinds[SV_PRIORITYCLASSES].n}};
    kube_opts o = {w->scheduler, "serve", w->epoch, 1, 1};
    if (kube_scenario(&c, &o, &doc, &kerr) < 0) {
        /* only this workload is out: the rest of the cluster is scheduled */
        fprintf(stderr, "understory serve: workload %s left out: %s\n", wl, kerr.msg);
        remove_workload(w, wl, now);
        goto out;
    }
    cJSON *x = cJSON_DetachItemFromArray(cJSON_GetObjectItemCaseSensitive(doc, "workloads"), 0);
    if (!x) { /* every pod finished */
        remove_workload(w, wl, now);
        goto out;
    }
    cJSON *names = cJSON_CreateArray();
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(x, "pods"))
        if (names && gstr(p, "name")) cJSON_AddItemToArray(names, cJSON_CreateString(gstr(p, "name")));
    /* gone first: a pod gone frees its place for the new one that
     * replaces it, in this workload or the one it moved to */
    if (names) remove_reported(w, wl, names);
    cJSON_Delete(names);
    *out = x;
out:
    free(in.pods);
    free(in.nodes);
    for (int k = 0; k < SV_NKINDS; k++) free(in.paths[k]);
    cJSON_Delete(doc);
}

int sv_workloads_sync(sv_workloads *w, double now) {
    if (w->all_dirty) {
        if (mark_prefix(w, "") < 0) return -1;
        w->all_dirty = false;
    }
    if (!w->dirty.n) return 0;
    /* taken first: the set a sync walks stays still */
    cache touched = w->dirty;
    memset(&w->dirty, 0, sizeof w->dirty);
    cJSON **mapped = calloc(touched.n, sizeof *mapped);
    cJSON **pods = calloc(touched.n, sizeof *pods);
    if (!mapped || !pods) {
        free(mapped);
        free(pods);
        w->dirty = touched; /* tried again at the next sync */
        return -1;
    }
    for (size_t i = 0; i < touched.n; i++) map_one(w, touched.keys[i], now, &mapped[i]);
    /* every workload, then every pod: the engine creates the new
     * workloads' pods in one pass before the first pod report, not one
     * pass per workload */
    for (size_t i = 0; i < touched.n; i++)
        if (mapped[i] && !put_workload(w, mapped[i], now, &pods[i])) {
            cJSON_Delete(mapped[i]);
            mapped[i] = NULL;
        }
    for (size_t i = 0; i < touched.n; i++)
        if (mapped[i]) put_pods(w, gstr(mapped[i], "name"), pods[i]);
    for (size_t i = 0; i < touched.n; i++) {
        cJSON_Delete(mapped[i]);
        cJSON_Delete(pods[i]);
    }
    free(mapped);
    free(pods);
    clear(&touched);
    fflush(stdout);
    return 0;
}
