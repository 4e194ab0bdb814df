/*
 * writes.c — a cycle's decisions as the API calls of KUBERNETES.md's
 * table: bind = POST pods/NAME/binding; pipeline = PATCH pods/NAME/status
 * with status.nominatedNodeName; evict = PATCH status adding the condition
 * DisruptionTarget=True (reason PreemptionByScheduler), then DELETE with
 * preconditions.uid and the pod's own grace period; a pending pod's
 * PodScheduled=False condition (Unschedulable with the engine's reason, or
 * WaitingForIdleResources for a background pod); Evict events and policy
 * reload events (PolicyReloaded, PolicyReloadRefused) as events.k8s.io/v1
 * Events.  A write that would change nothing (the cached
 * object already says it) is not made, nor one whose twin is still in
 * flight.  A pending pod's condition waits until the pod is still pending
 * a cycle after the one that first left it pending (kube-scheduler writes
 * it only after a failed attempt).  Owns the requests in flight;
 * never decides anything: the engine did.
 *
 * Every write is idempotent on retry (serve/http.c tries a request again
 * when its answer was lost), and the answers a retry or a race can bring
 * are final, never retried, and leave no assumption behind:
 *   bind 409     the pod is bound already (by someone else, or by our own
 *                first try whose answer was lost): the server's word
 *                stands, the watch will show where;
 *   404          the pod is gone (deleted between decision and write);
 *   delete 409   the uid precondition failed: the pod was replaced;
 *   event 409    an event of that name exists (our earlier try): events
 *                are named, not generated, so a retry cannot make two.
 */
#include "writes.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef enum wkind { W_BIND, W_PATCH, W_DELETE, W_EVENT } wkind;

typedef struct waited {
    char *name, *why; /* why: NULL when the engine gave none */
} waited;

typedef struct req {
    struct req *next, *prev;
    struct sv_writes *x;
    wkind kind;
    char *what;      /* "bind ns/name -> node", for the log */
    char *pod;       /* the pod's key, for a bind */
    char *then_path; /* evict: the DELETE after the PATCH */
    char *then_body;
    char *then_what;
} req;

struct sv_writes {
    sv_http *http;
    us_engine *engine;
    sv_workloads *wl;
    bool dry_run;
    char *identity;           /* reportingInstance; NULL: "understory" */
    bool (*may_write)(void *); /* the leader's gate, or NULL */
    void *gate_ud;
    req *inflight;
    unsigned long count;
    /* the pods pending after the last cycle (copies, sorted by name) and
     * the engine's last reason for each: a pod gets its PodScheduled=False
     * condition only when it is still pending a cycle later, as
     * kube-scheduler writes it only after a failed attempt, not for every
     * pod that has merely not been tried yet; and the reason the engine
     * gave when the pod was first left pending (it gives one only when the
     * cause changes) is the one written */
    struct waited *waited;
    size_t nwaited;
    /* during sv_writes_apply: the log lines ("what") of the status PATCHes
     * still in flight (copies, sorted): the same PATCH is not queued
     * again behind itself while the client's rate limit holds it back and
     * the cache cannot show it yet */
    char **busy;
    size_t nbusy;
};

sv_writes *sv_writes_new(sv_http *h, us_engine *e, sv_workloads *w, bool dry_run) {
    sv_writes *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->http = h;
    x->engine = e;
    x->wl = w;
    x->dry_run = dry_run;
    return x;
}

static void req_free(req *r) {
    if (!r) return;
    free(r->what);
    free(r->pod);
    free(r->then_path);
    free(r->then_body);
    free(r->then_what);
    free(r);
}

static void unlink_req(req *r) {
    if (r->prev) r->prev->next = r->next;
    else r->x->inflight = r->next;
    if (r->next) r->next->prev = r->prev;
}

static void free_waited(waited *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].why);
    }
    free(v);
}

void sv_writes_free(sv_writes *x) {
    if (!x) return;
    while (x->inflight) {
        req *r = x->inflight;
        x->inflight = r->next;
        req_free(r);
    }
    free_waited(x->waited, x->nwaited);
    free(x->identity);
    free(x);
}

int sv_writes_identity(sv_writes *x, const char *identity) {
    char *d = strdup(identity);
    if (!d) return -1;
    free(x->identity);
    x->identity = d;
    return 0;
}

void sv_writes_gate(sv_writes *x, bool (*may_write)(void *ud), void *ud) {
    x->may_write = may_write;
    x->gate_ud = ud;
}

unsigned long sv_writes_count(const sv_writes *x) { return x->count; }

static const cJSON *at(const cJSON *o, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

static const char *str(const cJSON *v) { return cJSON_IsString(v) ? v->valuestring : NULL; }

static void on_done(void *ud, long status, const char *body, size_t n, const char *errmsg);

/* Start method path body, logged as what; pod: a bind's pod. */
static int send_req(sv_writes *x, const char *method, const char *path, const char *body, const char *what,
                const char *pod, const char *then_path, const char *then_body) {
    if (x->may_write && !x->may_write(x->gate_ud)) {
        printf("%s: not leader, not written\n", what);
        if (pod) sv_workloads_forget(x->wl, pod);
        return -1;
    }
    req *r = calloc(1, sizeof *r);
    if (r)
        r->kind = pod ? W_BIND : !strcmp(method, "DELETE") ? W_DELETE : !strcmp(method, "POST") ? W_EVENT : W_PATCH;
    if (!r || !(r->what = strdup(what)) || (pod && !(r->pod = strdup(pod))) ||
        (then_path && !(r->then_path = strdup(then_path))) || (then_body && !(r->then_body = strdup(then_body))))
        goto fail;
    /* the PATCH before a DELETE logs as what it adds, the DELETE as what */
    if (then_path) {
        size_t n = strlen(what) + 32;
        if (!(r->then_what = r->what) || !(r->what = malloc(n))) goto fail;
        snprintf(r->what, n, "%s: DisruptionTarget", what);
    }
    r->x = x;
    if (sv_http_request(x->http, method, path, body, NULL, on_done, r) < 0) goto fail;
    r->next = x->inflight;
    if (x->inflight) x->inflight->prev = r;
    x->inflight = r;
    x->count++;
    return 0;
fail:
    fprintf(stderr, "understory serve: %s: out of memory\n", what);
    req_free(r);
    return -1;
}

/* What an answer that is not a success means for a write of kind: the
 * log's word for a final one (see the top of the file), or NULL: it
 * failed. */
static const char *settled(wkind kind, long status) {
    if (status == 404) return "gone (404)";
    if (status == 409 && kind == W_BIND) return "already bound (409)";
    if (status == 409 && kind == W_DELETE) return "replaced (409)";
    if (status == 409 && kind == W_EVENT) return "already written (409)";
    return NULL;
}

static void on_done(void *ud, long status, const char *body, size_t n, const char *errmsg) {
    req *r = ud;
    sv_writes *x = r->x;
    (void)n;
    unlink_req(r);
    if (status >= 200 && status < 300) {
        printf("%s: done (%ld)\n", r->what, status);
        if (r->then_path) send_req(x, "DELETE", r->then_path, r->then_body, r->then_what, NULL, NULL, NULL);
    } else {
        const char *word = settled(r->kind, status);
        cJSON *b = body && *body ? cJSON_Parse(body) : NULL;
        const char *msg = str(cJSON_GetObjectItemCaseSensitive(b, "message"));
        char failed[32];
        snprintf(failed, sizeof failed, "failed (%ld)", status);
        printf("%s: %s: %s\n", r->what, word ? word : failed, msg ? msg : errmsg ? errmsg : "no message");
        cJSON_Delete(b);
        /* a failed or settled bind: the pod is as the cache says (pending
         * until the watch shows it bound or gone), nothing held for it */
        if (r->kind == W_BIND) sv_workloads_forget(x->wl, r->pod);
    }
    fflush(stdout);
    req_free(r);
}

/* "ns/name" into ns and name; false when it has no '/'. */
static bool split(const char *key, char *ns, size_t nl, char *name, size_t ml) {
    const char *s = strchr(key, '/');
    if (!s) return false;
    snprintf(ns, nl, "%.*s", (int)(s - key), key);
    snprintf(name, ml, "%s", s + 1);
    return true;
}

static void now_rfc3339(char *buf, size_t len, bool micro, struct timespec *when) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (when) *when = ts;
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    if (micro) snprintf(buf + k, len - k, ".%06ldZ", ts.tv_nsec / 1000);
    else snprintf(buf + k, len - k, "Z");
}

/* Write body (owned, freed) to method path, or log it under --dry-run. */
static void write_json(sv_writes *x, const char *method, const char *path, cJSON *body, const char *what,
                       const char *pod, const char *then_path, cJSON *then_body) {
    char *text = body ? cJSON_PrintUnformatted(body) : NULL;
    char *then = then_body ? cJSON_PrintUnformatted(then_body) : NULL;
    if (x->dry_run) {
        printf("%s: dry run, not written\n", what);
    } else if ((body && !text) || (then_body && !then)) {
        fprintf(stderr, "understory serve: %s: out of memory\n", what);
    } else {
        if (pod) sv_workloads_assume(x->wl, pod, (double)time(NULL));
        send_req(x, method, path, text, what, pod, then_path, then);
    }
    free(text);
    free(then);
    cJSON_Delete(body);
    cJSON_Delete(then_body);
}

static void bind_pod(sv_writes *x, const us_decision_info *d) {
    char ns[256], name[256], path[800], what[800];
    if (!sv_workloads_is_pending(x->wl, d->pod) || !split(d->pod, ns, sizeof ns, name, sizeof name)) return;
    cJSON *b = cJSON_CreateObject(), *md, *t;
    bool ok = b && cJSON_AddStringToObject(b, "apiVersion", "v1") && cJSON_AddStringToObject(b, "kind", "Binding") &&
              (md = cJSON_AddObjectToObject(b, "metadata")) && cJSON_AddStringToObject(md, "name", name) &&
              (t = cJSON_AddObjectToObject(b, "target")) && cJSON_AddStringToObject(t, "apiVersion", "v1") &&
              cJSON_AddStringToObject(t, "kind", "Node") && cJSON_AddStringToObject(t, "name", d->node);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/binding", ns, name);
    snprintf(what, sizeof what, "bind %s -> %s", d->pod, d->node);
    if (!ok) {
        cJSON_Delete(b);
        fprintf(stderr, "understory serve: %s: out of memory\n", what);
        return;
    }
    write_json(x, "POST", path, b, what, d->pod, NULL, NULL);
}

/* The pod's condition of type, or NULL. */
static const cJSON *condition(const cJSON *pod, const char *type) {
    const cJSON *c;
    cJSON_ArrayForEach(c, at(pod, "status", "conditions")) {
        const char *t = str(at(c, "type", NULL));
        if (t && !strcmp(t, type)) return c;
    }
    return NULL;
}

/* A status patch: {"status": {"conditions": [cond]}} plus nominated. */
static cJSON *status_patch(const char *type, const char *status, const char *reason, const char *message,
                           const char *nominated) {
    char now[40];
    now_rfc3339(now, sizeof now, false, NULL);
    cJSON *p = cJSON_CreateObject(), *s, *cs, *c;
    bool ok = p && (s = cJSON_AddObjectToObject(p, "status"));
    if (ok && nominated) ok = cJSON_AddStringToObject(s, "nominatedNodeName", nominated) != NULL;
    if (ok && type)
        ok = (cs = cJSON_AddArrayToObject(s, "conditions")) && (c = cJSON_CreateObject()) && cJSON_AddItemToArray(cs, c) &&
             cJSON_AddStringToObject(c, "type", type) && cJSON_AddStringToObject(c, "status", status) &&
             cJSON_AddStringToObject(c, "reason", reason) && cJSON_AddStringToObject(c, "message", message) &&
             cJSON_AddStringToObject(c, "lastTransitionTime", now);
    if (!ok) {
        cJSON_Delete(p);
        return NULL;
    }
    return p;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A status PATCH logged as what is in flight already (see busy). */
static bool in_flight(const sv_writes *x, const char *what) {
    return x->nbusy && bsearch(&what, x->busy, x->nbusy, sizeof *x->busy, cmp_name);
}

static void pipeline(sv_writes *x, const us_decision_info *d) {
    char ns[256], name[256], path[800], what[800];
    if (!d->action || !sv_workloads_is_pending(x->wl, d->pod) || !split(d->pod, ns, sizeof ns, name, sizeof name))
        return;
    const cJSON *pod = sv_workloads_get(x->wl, SV_PODS, d->pod);
    const char *cur = str(at(pod, "status", "nominatedNodeName"));
    if (cur && !strcmp(cur, d->node)) return;
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/status", ns, name);
    snprintf(what, sizeof what, "nominate %s -> %s", d->pod, d->node);
    if (in_flight(x, what)) return;
    cJSON *p = status_patch(NULL, NULL, NULL, NULL, d->node);
    if (p) write_json(x, "PATCH", path, p, what, NULL, NULL, NULL);
}

static void evict(sv_writes *x, const us_decision_info *d) {
    char ns[256], name[256], path[800], what[800], msg[800];
    const cJSON *pod = sv_workloads_get(x->wl, SV_PODS, d->pod);
    const char *uid = str(at(pod, "metadata", "uid"));
    /* the real pod stays until the watch shows it gone, however long its
     * deletion takes: the engine must not count its room free before.
     * Only when the cache shows the real pod on that node: an incarnation
     * the engine placed itself under the same name is no real pod, and
     * one bound by us but not seen bound yet is held by the sync that
     * shows it terminating there */
    const char *on = str(at(pod, "spec", "nodeName"));
    if (pod && !x->dry_run && on && !strcmp(on, d->node)) sv_workloads_hold(x->wl, d->pod, d->node);
    /* not a real pod, or already being deleted */
    if (!pod || !uid || at(pod, "metadata", "deletionTimestamp") || !split(d->pod, ns, sizeof ns, name, sizeof name))
        return;
    /* a pipelined pod was never bound: the engine took back its room and
     * the pod stays pending, the same pod (reported_pods), its nomination
     * withdrawn; deleting it would only make its controller recreate it.
     * Not a pod bound by us that the watch has not shown bound yet (no
     * longer pending here): that one runs, and is deleted like any other */
    if (!on && sv_workloads_is_pending(x->wl, d->pod)) {
        if (!str(at(pod, "status", "nominatedNodeName"))) return;
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/status", ns, name);
        snprintf(what, sizeof what, "withdraw nomination %s from %s", d->pod, d->node);
        if (in_flight(x, what)) return;
        cJSON *p = cJSON_CreateObject(), *s;
        if (p && (s = cJSON_AddObjectToObject(p, "status")) && cJSON_AddNullToObject(s, "nominatedNodeName"))
            write_json(x, "PATCH", path, p, what, NULL, NULL, NULL);
        else
            cJSON_Delete(p);
        return;
    }
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name);
    snprintf(what, sizeof what, "evict %s from %s (%s)", d->pod, d->node, d->action ? d->action : "evict");
    snprintf(msg, sizeof msg, "Evicted by understory's %s action for %s", d->action ? d->action : "evict",
             d->evictor ? d->evictor : "no evictor");
    const cJSON *g = at(pod, "spec", "terminationGracePeriodSeconds");
    cJSON *del = cJSON_CreateObject(), *pre;
    bool ok = del && cJSON_AddStringToObject(del, "apiVersion", "v1") &&
              cJSON_AddStringToObject(del, "kind", "DeleteOptions") && (pre = cJSON_AddObjectToObject(del, "preconditions")) &&
              cJSON_AddStringToObject(pre, "uid", uid) &&
              cJSON_AddNumberToObject(del, "gracePeriodSeconds", cJSON_IsNumber(g) ? g->valuedouble : 30);
    cJSON *p = status_patch("DisruptionTarget", "True", "PreemptionByScheduler", msg, NULL);
    if (!ok || !p) {
        cJSON_Delete(del);
        cJSON_Delete(p);
        fprintf(stderr, "understory serve: %s: out of memory\n", what);
        return;
    }
    char spath[820];
    snprintf(spath, sizeof spath, "%s/status", path);
    write_json(x, "PATCH", spath, p, what, NULL, path, del);
}

/* The object an Evict event about workload wl is regarding: its PodGroup,
 * else its pods' top owner, else the pod (a pod of wl from the cache). */
static cJSON *regarding(sv_writes *x, const char *wl) {
    const cJSON *pod = NULL;
    for (size_t i = 0; i < us_engine_pod_count(x->engine) && !pod; i++) {
        us_pod_info p;
        if (us_engine_pod(x->engine, i, &p) == US_OK && !strcmp(p.workload, wl))
            pod = sv_workloads_get(x->wl, SV_PODS, p.name);
    }
    char ns[256], name[256];
    if (!split(wl, ns, sizeof ns, name, sizeof name)) return NULL;
    const char *kind = "Pod", *api = "v1", *uid = NULL, *oname = name;
    const char *pg = str(at(at(pod, "metadata", "annotations"), "pod-group-name", NULL));
    const cJSON *ref = cJSON_GetArrayItem(at(pod, "metadata", "ownerReferences"), 0);
    char key[600];
    if (pg) {
        kind = "PodGroup";
        api = "scheduling.run.ai/v2alpha2";
        oname = pg;
        snprintf(key, sizeof key, "%s/%s", ns, pg);
        uid = str(at(sv_workloads_get(x->wl, SV_PODGROUPS, key), "metadata", "uid"));
    } else if (ref && str(at(ref, "kind", NULL)) && !strcmp(str(at(ref, "kind", NULL)), "ReplicaSet") &&
               strcmp(str(at(ref, "name", NULL)), name)) {
        kind = "Deployment"; /* a ReplicaSet "<deployment>-<hash>" stands for its Deployment */
        api = "apps/v1";
    } else if (ref) {
        kind = str(at(ref, "kind", NULL));
        api = str(at(ref, "apiVersion", NULL));
        oname = str(at(ref, "name", NULL));
        uid = str(at(ref, "uid", NULL));
    } else if (pod) {
        uid = str(at(pod, "metadata", "uid"));
    }
    cJSON *r = cJSON_CreateObject();
    bool ok = r && kind && api && oname && cJSON_AddStringToObject(r, "apiVersion", api) &&
              cJSON_AddStringToObject(r, "kind", kind) && cJSON_AddStringToObject(r, "namespace", ns) &&
              cJSON_AddStringToObject(r, "name", oname) && (!uid || cJSON_AddStringToObject(r, "uid", uid));
    if (!ok) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

/* This replica's own Pod: namespace from POD_NAMESPACE (the Downward
 * API), else the service account's namespace file; name from POD_NAME,
 * else the host name (a pod's host name is its name).  false when the
 * namespace is unknown (not in a pod, no POD_NAMESPACE). */
static bool own_pod(char *ns, size_t nl, char *name, size_t ml) {
    const char *e = getenv("POD_NAMESPACE");
    ns[0] = name[0] = '\0';
    if (e && *e) {
        snprintf(ns, nl, "%s", e);
    } else {
        FILE *f = fopen("/var/run/secrets/kubernetes.io/serviceaccount/namespace", "r");
        if (f) {
            if (!fgets(ns, (int)nl, f)) ns[0] = '\0';
            fclose(f);
            ns[strcspn(ns, "\r\n")] = '\0';
        }
    }
    if ((e = getenv("POD_NAME")) && *e) snprintf(name, ml, "%s", e);
    else if (gethostname(name, ml) < 0) name[0] = '\0';
    name[ml - 1] = '\0';
    return ns[0] && name[0];
}

/* A policy reload's event (PolicyReloaded, PolicyReloadRefused), regarding
 * this replica's own Pod (own_pod): the replica that reloaded, where
 * `kubectl describe pod` shows it.  Outside a pod, without POD_NAMESPACE,
 * it is logged only. */
static void policy_event(sv_writes *x, const us_event_info *ev) {
    char ns[256], pod[256], path[600], what[1400], now[40], ename[300];
    struct timespec ts;
    snprintf(what, sizeof what, "event %s %s: %s", ev->type, ev->reason, ev->message);
    if (!own_pod(ns, sizeof ns, pod, sizeof pod)) {
        printf("%s: not written (no pod of its own to regard: POD_NAMESPACE unset, not in a pod)\n", what);
        return;
    }
    now_rfc3339(now, sizeof now, true, &ts);
    /* named as the Evict events are (client-go's recorder's way): a retry
     * sends the same name, so it cannot make two */
    snprintf(ename, sizeof ename, "%.200s.%llx", pod,
             (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    cJSON *e = cJSON_CreateObject(), *md, *an, *reg;
    bool ok = e && (md = cJSON_AddObjectToObject(e, "metadata")) &&
              cJSON_AddStringToObject(md, "name", ename) &&
              cJSON_AddStringToObject(md, "namespace", ns) && (an = cJSON_AddObjectToObject(md, "annotations")) &&
              cJSON_AddStringToObject(e, "apiVersion", "events.k8s.io/v1") &&
              cJSON_AddStringToObject(e, "kind", "Event") && cJSON_AddStringToObject(e, "eventTime", now) &&
              cJSON_AddStringToObject(e, "reportingController", "understory") &&
              cJSON_AddStringToObject(e, "reportingInstance", x->identity ? x->identity : "understory") && cJSON_AddStringToObject(e, "action", "reload") &&
              cJSON_AddStringToObject(e, "reason", ev->reason) && cJSON_AddStringToObject(e, "type", ev->type) &&
              cJSON_AddStringToObject(e, "note", ev->message) && (reg = cJSON_AddObjectToObject(e, "regarding")) &&
              cJSON_AddStringToObject(reg, "apiVersion", "v1") && cJSON_AddStringToObject(reg, "kind", "Pod") &&
              cJSON_AddStringToObject(reg, "namespace", ns) && cJSON_AddStringToObject(reg, "name", pod);
    for (size_t i = 0; ok && i < ev->nannotations; i++)
        ok = cJSON_AddStringToObject(an, ev->annotations[i].key, ev->annotations[i].value) != NULL;
    if (!ok) {
        cJSON_Delete(e);
        fprintf(stderr, "understory serve: %s: out of memory\n", what);
        return;
    }
    snprintf(path, sizeof path, "/apis/events.k8s.io/v1/namespaces/%s/events", ns);
    write_json(x, "POST", path, e, what, NULL, NULL, NULL);
}

static void event(sv_writes *x, const us_event_info *ev) {
    char ns[256], name[256], path[600], what[800], now[40], ename[300];
    struct timespec ts;
    if (!strcmp(ev->object, "policies") &&
        (!strcmp(ev->reason, "PolicyReloaded") || !strcmp(ev->reason, "PolicyReloadRefused"))) {
        policy_event(x, ev);
        return;
    }
    if (strcmp(ev->reason, "Evict") != 0 || !split(ev->object, ns, sizeof ns, name, sizeof name)) return;
    const char *action = "evict";
    for (size_t i = 0; i < ev->nannotations; i++)
        if (!strcmp(ev->annotations[i].key, "evictor-action-type")) action = ev->annotations[i].value;
    now_rfc3339(now, sizeof now, true, &ts);
    cJSON *e = cJSON_CreateObject(), *md, *an, *reg = regarding(x, ev->object);
    /* named as client-go's recorder names events (regarding.time in hex
     * nanoseconds): a retry sends the same name, so it cannot make two */
    const char *rname = str(at(reg, "name", NULL));
    snprintf(ename, sizeof ename, "%.200s.%llx", rname ? rname : name,
             (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    bool ok = e && reg && cJSON_AddStringToObject(e, "apiVersion", "events.k8s.io/v1") &&
              cJSON_AddStringToObject(e, "kind", "Event") && (md = cJSON_AddObjectToObject(e, "metadata")) &&
              cJSON_AddStringToObject(md, "name", ename) &&
              cJSON_AddStringToObject(md, "namespace", ns) && (an = cJSON_AddObjectToObject(md, "annotations")) &&
              cJSON_AddStringToObject(e, "eventTime", now) &&
              cJSON_AddStringToObject(e, "reportingController", "understory") &&
              cJSON_AddStringToObject(e, "reportingInstance", x->identity ? x->identity : "understory") &&
              cJSON_AddStringToObject(e, "action", action) && cJSON_AddStringToObject(e, "reason", ev->reason) &&
              cJSON_AddStringToObject(e, "type", ev->type) && cJSON_AddStringToObject(e, "note", ev->message);
    for (size_t i = 0; ok && i < ev->nannotations; i++)
        ok = cJSON_AddStringToObject(an, ev->annotations[i].key, ev->annotations[i].value) != NULL;
    ok = ok && cJSON_AddItemToObject(e, "regarding", reg);
    if (!ok) {
        if (!cJSON_GetObjectItemCaseSensitive(e, "regarding")) cJSON_Delete(reg);
        cJSON_Delete(e);
        fprintf(stderr, "understory serve: event about %s: out of memory\n", ev->object);
        return;
    }
    snprintf(path, sizeof path, "/apis/events.k8s.io/v1/namespaces/%s/events", ns);
    snprintf(what, sizeof what, "event %s %s %s", ev->reason, action, ev->object);
    write_json(x, "POST", path, e, what, NULL, NULL, NULL);
}

/* The PodScheduled=False condition of a real pending pod, when it changes. */
static void unschedulable(sv_writes *x, const us_pod_info *p, const char *why) {
    char ns[256], name[256], path[800], what[800];
    if (!sv_workloads_is_pending(x->wl, p->name) || !split(p->name, ns, sizeof ns, name, sizeof name)) return;
    const char *reason = p->background ? "WaitingForIdleResources" : "Unschedulable";
    const char *msg = p->background ? "a background pod waits for idle resources" : why ? why : "not scheduled yet";
    const cJSON *c = condition(sv_workloads_get(x->wl, SV_PODS, p->name), "PodScheduled");
    bool same = c && str(at(c, "status", NULL)) && !strcmp(str(at(c, "status", NULL)), "False") &&
                str(at(c, "reason", NULL)) && !strcmp(str(at(c, "reason", NULL)), reason);
    /* the engine gives its reason when the cause changes: a cycle without
     * one leaves the last reason standing */
    if (same && (!why || (str(at(c, "message", NULL)) && !strcmp(str(at(c, "message", NULL)), msg)))) return;
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/status", ns, name);
    snprintf(what, sizeof what, "pending %s: %s (%s)", p->name, reason, msg);
    if (in_flight(x, what)) return;
    cJSON *b = status_patch("PodScheduled", "False", reason, msg, NULL);
    if (b) write_json(x, "PATCH", path, b, what, NULL, NULL, NULL);
}

/* A cycle's reason for a workload: the message of its first event that is
 * not an Evict (the engine's NotScheduled and the like). */
typedef struct why_of {
    const char *workload, *message;
    size_t order;
} why_of;

static int cmp_why(const void *a, const void *b) {
    const why_of *p = a, *q = b;
    int c = strcmp(p->workload, q->workload);
    return c ? c : (p->order > q->order) - (p->order < q->order);
}

static int cmp_waited(const void *a, const void *b) {
    return strcmp(((const waited *)a)->name, ((const waited *)b)->name);
}

static waited *find_waited(waited *v, size_t n, const char *name) {
    waited key = {(char *)name, NULL};
    return n ? bsearch(&key, v, n, sizeof *v, cmp_waited) : NULL;
}

/* The pods pending now, as the waited set of the next cycle: sorted
 * copies of their names into *out (NULL when none), no reasons yet;
 * false when out of memory. */
static bool pending_names(sv_writes *x, waited **out, size_t *n) {
    size_t cap = 0;
    waited *v = NULL;
    *n = 0;
    *out = NULL;
    for (size_t i = 0; i < us_engine_pod_count(x->engine); i++) {
        us_pod_info p;
        if (us_engine_pod(x->engine, i, &p) != US_OK || p.phase != US_PHASE_PENDING || p.external) continue;
        if (*n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            waited *nv = realloc(v, nc * sizeof *nv);
            if (!nv) goto oom;
            v = nv;
            cap = nc;
        }
        if (!(v[*n].name = strdup(p.name))) goto oom;
        v[(*n)++].why = NULL;
    }
    if (*n) qsort(v, *n, sizeof *v, cmp_waited);
    *out = v;
    return true;
oom:
    free_waited(v, *n);
    *n = 0;
    return false;
}

static void free_names(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* x->busy from the requests in flight; left empty when out of memory (a
 * PATCH may then be queued twice, as before). */
static void busy_index(sv_writes *x) {
    size_t n = 0;
    for (const req *r = x->inflight; r; r = r->next) n += r->kind == W_PATCH && !r->then_path;
    x->busy = n ? malloc(n * sizeof *x->busy) : NULL;
    x->nbusy = 0;
    if (!x->busy) return;
    for (const req *r = x->inflight; r; r = r->next) {
        if (r->kind != W_PATCH || r->then_path) continue;
        if (!(x->busy[x->nbusy] = strdup(r->what))) {
            free_names(x->busy, x->nbusy);
            x->busy = NULL;
            x->nbusy = 0;
            return;
        }
        x->nbusy++;
    }
    qsort(x->busy, x->nbusy, sizeof *x->busy, cmp_name);
}

void sv_writes_apply(sv_writes *x, double t) {
    (void)t;
    busy_index(x);
    for (size_t i = 0; i < us_engine_decision_count(x->engine); i++) {
        us_decision_info d;
        if (us_engine_decision(x->engine, i, &d) != US_OK) continue;
        if (d.op == US_DECISION_BIND) bind_pod(x, &d);
        else if (d.op == US_DECISION_PIPELINE) pipeline(x, &d);
        else evict(x, &d);
    }
    size_t nev = us_engine_event_count(x->engine), nwhy = 0;
    why_of *whys = nev ? malloc(nev * sizeof *whys) : NULL;
    for (size_t i = 0; i < nev; i++) {
        us_event_info ev;
        if (us_engine_event(x->engine, i, &ev) != US_OK) continue;
        event(x, &ev);
        if (whys && strcmp(ev.reason, "Evict") != 0) /* the index of the reasons, by workload */
            whys[nwhy++] = (why_of){ev.object, ev.message, i};
    }
    if (nwhy) qsort(whys, nwhy, sizeof *whys, cmp_why);
    /* pods left pending that were pending a cycle ago too: the engine's
     * reason is its NotScheduled event's message (the workload's first
     * event other than Evict).  Out of memory for the index or the set:
     * the condition is written for every pending pod, as before, rather
     * than lost. */
    size_t nnow;
    waited *now;
    bool known = pending_names(x, &now, &nnow);
    if (!known) fprintf(stderr, "understory serve: pending pods: out of memory (their conditions written regardless)\n");
    for (size_t i = 0; i < us_engine_pod_count(x->engine); i++) {
        us_pod_info p;
        if (us_engine_pod(x->engine, i, &p) != US_OK || p.phase != US_PHASE_PENDING || p.external) continue;
        const char *why = NULL;
        if (whys) {
            size_t lo = 0, hi = nwhy;
            while (lo < hi) { /* the first event of p's workload */
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(whys[mid].workload, p.workload) < 0) lo = mid + 1;
                else hi = mid;
            }
            if (lo < nwhy && !strcmp(whys[lo].workload, p.workload)) why = whys[lo].message;
        } else {
            for (size_t j = 0; j < nev && !why; j++) {
                us_event_info ev;
                if (us_engine_event(x->engine, j, &ev) == US_OK && !strcmp(ev.object, p.workload) &&
                    strcmp(ev.reason, "Evict") != 0)
                    why = ev.message;
            }
        }
        if (!known) {
            unschedulable(x, &p, why);
            continue;
        }
        const waited *before = find_waited(x->waited, x->nwaited, p.name);
        if (!why && before) why = before->why;
        waited *w = find_waited(now, nnow, p.name);
        if (w && why && !(w->why = strdup(why)))
            fprintf(stderr, "understory serve: pending %s: out of memory (its reason forgotten)\n", p.name);
        if (before) unschedulable(x, &p, why);
    }
    free(whys);
    free_names(x->busy, x->nbusy);
    x->busy = NULL;
    x->nbusy = 0;
    if (known) {
        free_waited(x->waited, x->nwaited);
        x->waited = now;
        x->nwaited = nnow;
    }
    fflush(stdout);
}
