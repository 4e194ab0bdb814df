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

#include "cache.h"
#include "objects.h"
#include "strmap.h"


struct sv_workloads {
    us_engine *engine;
    char *scheduler;
    double epoch;
    bool all_dirty;    /* map every workload again (a node came or went) */
    sv_cache kinds[SV_NKINDS];
    sv_cache pod_wl;      /* pod key -> its workload's name (a cJSON string) */
    sv_cache wl_pods;     /* workload name -> its slot in sets (a cJSON number) */
    sv_cache **sets;      /* [slot] a workload's pod keys: unordered, so that a
                             pod comes and goes in constant time (a list
                             searched on each removal was quadratic in a
                             large workload's pods) */
    int *free_slots;      /* slots of sets no workload holds */
    size_t nsets, nfree;
    sv_cache dirty;       /* workloads touched since the last sync */
    sv_cache reported;    /* workload name -> the pod names reported for it */
    sv_cache pending;     /* the unbound pods of ours reported pending */
    sv_cache gone;        /* pods deleted since the last sync (true once
                             the engine was told) */
    sv_cache wls_put;     /* workloads upserted */
    sv_cache assumed;     /* bound by us, not yet seen bound */
    unsigned long mapped; /* workloads mapped by syncs so far */
};

sv_workloads *sv_workloads_new(us_engine *e, const char *scheduler, double epoch) {
    sv_workloads *w = calloc(1, sizeof *w);
    if (!w || !(w->scheduler = strdup(scheduler))) {
        free(w);
        return NULL;
    }
    w->engine = e;
    w->epoch = epoch;
    /* the caches of every pod are only looked up, never walked: unordered,
     * so that a watch adding pods in any order costs no move of the rest */
    sv_cache_unordered(&w->kinds[SV_PODS]);
    sv_cache_unordered(&w->pod_wl);
    sv_cache_unordered(&w->pending);
    sv_cache_unordered(&w->gone);
    return w;
}

void sv_workloads_free(sv_workloads *w) {
    if (!w) return;
    for (int k = 0; k < SV_NKINDS; k++) sv_cache_clear(&w->kinds[k]);
    sv_cache *all[] = {&w->pod_wl, &w->wl_pods, &w->dirty, &w->reported, &w->pending, &w->wls_put, &w->assumed,
                       &w->gone};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sv_cache_clear(all[i]);
    for (size_t i = 0; i < w->nsets; i++) {
        if (w->sets[i]) sv_cache_clear(w->sets[i]);
        free(w->sets[i]);
    }
    free(w->sets);
    free(w->free_slots);
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
    return sv_cache_has(&w->dirty, wl) ? 0 : sv_cache_put(&w->dirty, wl, NULL, 0);
}

/* The pod keys of workload wl, or NULL when it has none. */
static sv_cache *pods_of(const sv_workloads *w, const char *wl) {
    const cJSON *slot = sv_cache_lookup(&w->wl_pods, wl);
    return slot ? w->sets[slot->valueint] : NULL;
}

/* The pod keys of workload wl, made empty when it has none; NULL when
 * out of memory. */
static sv_cache *pods_made(sv_workloads *w, const char *wl) {
    sv_cache *set = pods_of(w, wl);
    if (set) return set;
    if (!w->nfree) { /* every slot taken: twice as many, the new ones free */
        size_t ncap = w->nsets ? 2 * w->nsets : 16;
        sv_cache **sets = realloc(w->sets, ncap * sizeof *sets);
        if (sets) w->sets = sets;
        int *free_slots = realloc(w->free_slots, ncap * sizeof *free_slots);
        if (free_slots) w->free_slots = free_slots;
        if (!sets || !free_slots) return NULL;
        /* pushed highest first: slots are taken from the lowest */
        for (size_t k = ncap; k > w->nsets; k--) {
            w->sets[k - 1] = NULL;
            w->free_slots[w->nfree++] = (int)(k - 1);
        }
        w->nsets = ncap;
    }
    int slot = w->free_slots[w->nfree - 1];
    if (!(set = calloc(1, sizeof *set))) return NULL;
    sv_cache_unordered(set);
    if (sv_cache_put(&w->wl_pods, wl, cJSON_CreateNumber(slot), 0) < 0 || !sv_cache_lookup(&w->wl_pods, wl)) {
        sv_cache_drop(&w->wl_pods, wl);
        free(set);
        return NULL;
    }
    w->nfree--;
    w->sets[slot] = set;
    return set;
}

/* Pod key leaves the index (its old workload is marked). */
static int unindex_pod(sv_workloads *w, const char *key) {
    const cJSON *old = sv_cache_lookup(&w->pod_wl, key);
    if (!old) return 0;
    int rc = mark(w, old->valuestring);
    sv_cache *set = pods_of(w, old->valuestring);
    if (set) {
        sv_cache_drop(set, key);
        if (!set->n) { /* the workload's last pod: its slot is free again */
            int slot = sv_cache_lookup(&w->wl_pods, old->valuestring)->valueint;
            sv_cache_clear(set);
            free(set);
            w->sets[slot] = NULL;
            w->free_slots[w->nfree++] = slot;
            sv_cache_drop(&w->wl_pods, old->valuestring);
        }
    }
    sv_cache_drop(&w->pod_wl, key);
    return rc;
}

/* Pod key joins workload wl in the index (both marked). */
static int index_pod(sv_workloads *w, const char *key, const char *wl) {
    const cJSON *old = sv_cache_lookup(&w->pod_wl, key);
    if (old && !strcmp(old->valuestring, wl)) return mark(w, wl);
    if (unindex_pod(w, key) < 0) return -1;
    sv_cache *set = pods_made(w, wl);
    if (!set || sv_cache_put(set, key, NULL, 0) < 0) return -1;
    cJSON *s = cJSON_CreateString(wl);
    if (!s || sv_cache_put(&w->pod_wl, key, s, 0) < 0) return -1;
    return mark(w, wl);
}

/* Every workload whose name starts with prefix ("" all) is marked. */
static int mark_prefix(sv_workloads *w, const char *prefix) {
    size_t n = strlen(prefix);
    sv_cache *all[] = {&w->wl_pods, &w->wls_put};
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
        if (ev == SV_DELETED) {
            /* told to the engine at the next sync, whatever comes after:
             * a new pod of the same name (a StatefulSet's) is another pod */
            if (sv_cache_has(&w->pod_wl, key) && sv_cache_put(&w->gone, key, NULL, 0) < 0) return -1;
            return unindex_pod(w, key);
        }
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
        const cJSON *old = sv_cache_lookup(&w->kinds[SV_NODES], key);
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
        sv_cache_drop(&w->kinds[kind], key);
        return 0;
    }
    /* a pod seen bound is no longer an assumption */
    if (kind == SV_PODS) {
        const cJSON *nn = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "spec"), "nodeName");
        if (cJSON_IsString(nn) && *nn->valuestring) sv_cache_drop(&w->assumed, key);
    }
    cJSON *copy = cJSON_Duplicate(obj, true);
    if (!copy || sv_cache_put(&w->kinds[kind], key, copy, 0) < 0) goto nomem;
    return 0;
nomem:
    fprintf(stderr, "understory serve: %s: out of memory\n", key);
    w->all_dirty = true; /* the index may miss it: map everything next time */
    return -1;
}

const cJSON *sv_workloads_get(const sv_workloads *w, sv_kind kind, const char *key) {
    return sv_cache_lookup(&w->kinds[kind], key);
}

bool sv_workloads_is_pending(const sv_workloads *w, const char *name) {
    return sv_cache_has(&w->pending, name) && !sv_cache_has(&w->assumed, name);
}

unsigned long sv_workloads_mapped(const sv_workloads *w) { return w->mapped; }

/* The workload of a reported pod name (pod keys and names are alike). */
static const char *wl_of(const sv_workloads *w, const char *pod) {
    const cJSON *s = sv_cache_lookup(&w->pod_wl, pod);
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
    sv_cache_drop(&w->pending, name);
    return sv_cache_put(&w->assumed, name, NULL, t);
}

void sv_workloads_forget(sv_workloads *w, const char *name) {
    sv_cache_drop(&w->assumed, name);
    /* report it as the sv_cache has it */
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
            sv_cache_drop_at(&w->assumed, i);
        }
}

static const char *gstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The pods reported for wl leave the engine, but those in keep (NULL:
 * none) and those bound by us that the watch has not shown yet. */
static void remove_reported(sv_workloads *w, const char *wl, const cJSON *keep) {
    cJSON *list = sv_cache_lookup(&w->reported, wl);
    const cJSON *p;
    us_error err;
    sv_cache kept = {0}; /* keep, sorted: a workload of thousands of pods is not squared */
    cJSON_ArrayForEach(p, keep)
        if (sv_cache_put(&kept, p->valuestring, NULL, 0) < 0) {
            fprintf(stderr, "understory serve: workload %s: out of memory\n", wl);
            sv_cache_clear(&kept);
            return; /* nothing removed: the next sync tries again */
        }
    cJSON_ArrayForEach(p, list) {
        const char *pn = p->valuestring;
        if (sv_cache_has(&kept, pn) || sv_cache_has(&w->gone, pn)) continue;
        sv_cache_drop(&w->pending, pn);
        if (sv_cache_has(&w->assumed, pn)) continue;
        if (us_engine_remove_pod(w->engine, pn, &err) == US_OK) printf("pod %s: gone\n", pn);
    }
    sv_cache_clear(&kept);
    sv_cache_drop(&w->reported, wl);
}

static void remove_workload(sv_workloads *w, const char *wl, double now) {
    us_error err;
    remove_reported(w, wl, NULL);
    if (!sv_cache_has(&w->wls_put, wl)) return;
    if (us_engine_remove_workload(w->engine, wl, now, &err) == US_OK) printf("workload %s: removed\n", wl);
    else fprintf(stderr, "understory serve: workload %s not removed: %s\n", wl, err.message);
    sv_cache_drop(&w->wls_put, wl);
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
    if (rc == US_EINVAL && sv_cache_has(&w->wls_put, name)) {
        printf("workload %s: changed (%s), submitted again\n", name, err.message);
        if (us_engine_remove_workload(w->engine, name, now, &err) == US_OK)
            rc = us_engine_upsert_workload_json(w->engine, json, now, &err);
    }
    if (rc != US_OK) {
        fprintf(stderr, "understory serve: workload %s not taken: %s\n", name, err.message);
        sv_cache_drop(&w->wls_put, name);
        free(json);
        return false;
    }
    if (!sv_cache_has(&w->wls_put, name)) printf("workload %s: %s\n", name, json);
    free(json);
    return sv_cache_put(&w->wls_put, name, NULL, 0) == 0;
}

/* One pass over a workload's pods into the engine, by their real names
 * (map_one removed those gone): the ones being deleted (terminating), or
 * the others; the names reported are added to reported (when not NULL). */
static void report_pods(sv_workloads *w, const char *name, const cJSON *pods, bool terminating,
                        cJSON *reported) {
    us_error err;
    const cJSON *p;
    cJSON_ArrayForEach(p, pods) {
        const char *pn = gstr(p, "name"), *node = gstr(p, "node"), *state = gstr(p, "state");
        bool releasing = state && !strcmp(state, "releasing");
        if (!pn || releasing != terminating) continue;
        bool was_pending = sv_cache_has(&w->pending, pn);
        sv_cache_drop(&w->pending, pn);
        /* a pod being deleted is no longer a replica: reported pending
         * before (bound since, or not), the engine's pending pod is this
         * one and goes (its controller's replacement takes its place);
         * unbound, it holds nothing and is not reported */
        if (releasing && was_pending) (void)us_engine_remove_pod(w->engine, pn, &err);
        if (releasing && !node) continue;
        if (reported) cJSON_AddItemToArray(reported, cJSON_CreateString(pn));
        /* bound by us and not seen bound yet: the engine's view (running) stands */
        if (!node && sv_cache_has(&w->assumed, pn)) continue;
        us_pod_spec spec = {.name = pn, .workload = name, .node = node, .pin = gstr(p, "pin"),
                            .terminating = releasing};
        if (us_engine_upsert_pod(w->engine, &spec, &err) != US_OK) {
            fprintf(stderr, "understory serve: pod %s (%s) not taken: %s\n", pn, state ? state : "?", err.message);
            continue;
        }
        if (!node) sv_cache_put(&w->pending, pn, NULL, 0);
    }
}

/* A workload's pods into the engine, the ones being deleted first: one
 * the engine knew running is then no longer one of the workload's
 * replicas, and the pending place its controller makes for the
 * replacement is there when the replacement's report comes (in name
 * order, a new pod named before the one it replaces found every place
 * taken).  Those of a workload the engine had are reported before its
 * new replica count too (sv_workloads_sync): a replica fewer, the
 * deleted pod's, would otherwise scale down a pod that stays. */
static void put_pods(sv_workloads *w, const char *name, const cJSON *pods) {
    cJSON *reported = cJSON_CreateArray();
    report_pods(w, name, pods, true, reported);
    report_pods(w, name, pods, false, reported);
    if (!reported || sv_cache_put(&w->reported, name, reported, 0) < 0)
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
    const sv_cache *set = pods_of(w, wl);
    size_t n = set ? set->n : 0;
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
    /* each node once, in the order its pods come: found by name (a walk
     * of the nodes gathered so far was quadratic for a DaemonSet's pods) */
    us_strmap seen = {0};
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        const cJSON *pod = sv_cache_lookup(&w->kinds[SV_PODS], set->keys[i]);
        if (!pod) continue;
        in->pods[in->npods++] = pod;
        const char *nn = gstr(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "nodeName");
        const cJSON *node = nn ? sv_cache_lookup(&w->kinds[SV_NODES], nn) : NULL;
        int added = node ? us_strmap_add(&seen, nn, 0) : 0;
        if (added < 0) rc = -1;
        if (added == 1) in->nodes[in->nnodes++] = node;
    }
    us_strmap_free(&seen);
    if (rc < 0) return -1;
    in->pg[0] = sv_cache_lookup(&w->kinds[SV_PODGROUPS], wl);
    char ns[640];
    snprintf(ns, sizeof ns, "%s", wl);
    char *slash = strchr(ns, '/');
    if (slash) *slash = 0;
    in->ns[0] = sv_cache_lookup(&w->kinds[SV_NAMESPACES], ns);
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

/* The pods deleted since the last sync leave the engine first: a
 * terminating one frees its room, another is lost (its controller's
 * replacement takes its place).  Before the mapping, so that a new pod of
 * the same name is reported as the new pod it is; the mapping's own
 * removals pass over them (remove_reported). */
static void tell_gone(sv_workloads *w) {
    us_error err;
    for (size_t i = 0; i < w->gone.n; i++) {
        if (w->gone.objs[i]) continue; /* told already (a sync that ran out of memory) */
        const char *pn = w->gone.keys[i];
        sv_cache_drop(&w->pending, pn);
        if (us_engine_remove_pod(w->engine, pn, &err) == US_OK) printf("pod %s: gone\n", pn);
        w->gone.objs[i] = cJSON_CreateTrue();
    }
}

int sv_workloads_sync(sv_workloads *w, double now) {
    if (w->all_dirty) {
        if (mark_prefix(w, "") < 0) return -1;
        w->all_dirty = false;
    }
    tell_gone(w);
    if (!w->dirty.n) {
        sv_cache_clear(&w->gone);
        return 0;
    }
    /* taken first: the set a sync walks stays still */
    sv_cache touched = w->dirty;
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
    /* the pods being deleted of the workloads the engine has, before any
     * new replica count (put_pods) */
    for (size_t i = 0; i < touched.n; i++) {
        const char *name = mapped[i] ? gstr(mapped[i], "name") : NULL;
        if (name && sv_cache_has(&w->wls_put, name))
            report_pods(w, name, cJSON_GetObjectItemCaseSensitive(mapped[i], "pods"), true, NULL);
    }
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
    sv_cache_clear(&touched);
    sv_cache_clear(&w->gone);
    fflush(stdout);
    return 0;
}
