/*
 * monitor.c — the admin endpoint's routes and the daemon's metrics
 * (monitor.h).  Counts it can read (informers) are read at scrape time,
 * so a scrape always agrees with the informers; what happens once (an API
 * answer, a cycle, a reload) is counted as it happens.  Never writes to
 * the cluster; reads the engine after a cycle, never changes it.
 */
#include "monitor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "metrics.h"

#define MAX_INFORMERS 16

typedef struct watched {
    char resource[64];
    const sv_informer *inf;
} watched;

struct sv_monitor {
    sv_admin *admin;
    sv_metrics *reg;
    sv_http *http[2];          /* the clients counted: the daemon's and the lease's */
    size_t nhttp;
    watched inf[MAX_INFORMERS];
    size_t ninf;
    sv_metric *api_requests, *lists, *watch_restarts, *objects, *synced;
    sv_metric *cycle, *decisions, *evictions, *pending, *reloads, *leader;
    sv_metric *bg_gpus, *idle_gpus, *bg_gpu_seconds, *policy, *nodes_short;
    double harvest_at, harvest_rate; /* the last cycle's wall time and background GPUs */
    sv_metric *retries, *limiter_wait;
    sv_metric *policy_calls, *node_classes, *scores_kept;  /* what cycles reused (us_cycle_reuse) */
};

static const char *const RESOURCE[] = {"resource", NULL};

/* The Kubernetes verb of a request, as the API server's own metrics name
 * it: after /api/VERSION or /apis/GROUP/VERSION an odd number of segments
 * names a collection (nodes; namespaces/NS/pods), an even one an object. */
const char *sv_monitor_k8s_verb(const char *method, const char *path) {
    const char *q = strchr(path, '?');
    size_t len = q ? (size_t)(q - path) : strlen(path), segs = 0;
    for (size_t i = 0; i < len; i++)
        if (path[i] == '/' && i + 1 < len && path[i + 1] != '/') segs++;
    size_t prefix = strncmp(path, "/apis/", 6) == 0 ? 3 : 2;
    bool collection = segs > prefix && (segs - prefix) % 2 == 1;
    if (strcmp(method, "GET") == 0) {
        if (q && (strstr(q, "watch=1") || strstr(q, "watch=true"))) return "watch";
        return collection ? "list" : "get";
    }
    if (strcmp(method, "POST") == 0) return "create";
    if (strcmp(method, "PUT") == 0) return "update";
    if (strcmp(method, "PATCH") == 0) return "patch";
    if (strcmp(method, "DELETE") == 0) return collection ? "deletecollection" : "delete";
    return "other";
}

static void on_api_answer(void *ud, const char *method, const char *path, long status) {
    sv_monitor *m = ud;
    char code[16];
    snprintf(code, sizeof code, "%ld", status);
    sv_metric_add(m->api_requests, (const char *[]){sv_monitor_k8s_verb(method, path), code}, 1);
}

/* The informers' and the client's counts as of now. */
static void refresh(sv_monitor *m) {
    if (m->nhttp) {
        sv_http_stats sum = {0}, st;
        for (size_t i = 0; i < m->nhttp; i++) {
            sv_http_get_stats(m->http[i], &st);
            sum.retries_unanswered += st.retries_unanswered;
            sum.retries_throttled += st.retries_throttled;
            sum.retries_server_error += st.retries_server_error;
            sum.limiter_wait_seconds += st.limiter_wait_seconds;
        }
        sv_metric_set(m->retries, (const char *[]){"unanswered"}, (double)sum.retries_unanswered);
        sv_metric_set(m->retries, (const char *[]){"throttled"}, (double)sum.retries_throttled);
        sv_metric_set(m->retries, (const char *[]){"server_error"}, (double)sum.retries_server_error);
        sv_metric_set(m->limiter_wait, NULL, sum.limiter_wait_seconds);
    }
    for (size_t i = 0; i < m->ninf; i++) {
        const char *r[] = {m->inf[i].resource};
        unsigned lists = sv_informer_lists(m->inf[i].inf);
        sv_metric_set(m->lists, r, lists);
        sv_metric_set(m->watch_restarts, r, sv_informer_watch_restarts(m->inf[i].inf));
        sv_metric_set(m->objects, r, (double)sv_informer_objects(m->inf[i].inf));
        sv_metric_set(m->synced, r, sv_informer_synced(m->inf[i].inf) ? 1 : 0);
    }
}

static void healthz(void *ud, const sv_admin_request *rq, sv_admin_reply *rp) {
    (void)ud, (void)rq;
    sv_admin_respond(rp, 200, "text/plain; charset=utf-8", "ok\n", 3); /* answered: the loop runs */
}

static void readyz(void *ud, const sv_admin_request *rq, sv_admin_reply *rp) {
    sv_monitor *m = ud;
    char body[2048];
    size_t n = 0;
    (void)rq;
    for (size_t i = 0; i < m->ninf; i++) {
        if (sv_informer_synced(m->inf[i].inf)) continue;
        n += (size_t)snprintf(body + n, n < sizeof body ? sizeof body - n : 0, "not ready: %s not synced yet\n",
                              m->inf[i].resource);
    }
    if (!m->ninf) n = (size_t)snprintf(body, sizeof body, "not ready: nothing watched yet\n");
    if (n >= sizeof body) n = sizeof body - 1;
    if (n) sv_admin_respond(rp, 503, "text/plain; charset=utf-8", body, n);
    else sv_admin_respond(rp, 200, "text/plain; charset=utf-8", "ok\n", 3);
}

char *sv_monitor_render(sv_monitor *m, size_t *len) {
    refresh(m);
    return sv_metrics_render(m->reg, len);
}

static void metrics(void *ud, const sv_admin_request *rq, sv_admin_reply *rp) {
    sv_monitor *m = ud;
    size_t len;
    (void)rq;
    char *text = sv_monitor_render(m, &len);
    if (text) sv_admin_respond(rp, 200, SV_METRICS_CONTENT_TYPE, text, len);
    free(text); /* no answer when out of memory: the admin server says 500 */
}

static bool make_metrics(sv_monitor *m) {
    static const double cycle_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                          0.25,  0.5,    1,     2.5,  5,     10};
    sv_metrics *r = m->reg;
    m->api_requests = sv_metrics_counter(r, "understory_api_requests_total",
                                         "Requests made of the Kubernetes API server, by verb and HTTP status "
                                         "code (0: no answer).",
                                         (const char *[]){"verb", "code", NULL});
    m->lists = sv_metrics_counter(r, "understory_informer_lists_total",
                                  "Full lists made by an informer: 1 at start, then one per relist.", RESOURCE);
    m->watch_restarts = sv_metrics_counter(r, "understory_informer_watch_restarts_total",
                                           "Watches that ended and were resumed or replaced by a relist.", RESOURCE);
    m->objects = sv_metrics_gauge(r, "understory_informer_objects", "Objects an informer holds now.", RESOURCE);
    m->synced = sv_metrics_gauge(r, "understory_informer_synced", "1 once an informer's first list is complete.",
                                 RESOURCE);
    m->cycle = sv_metrics_histogram(r, "understory_cycle_duration_seconds",
                                    "Time a scheduling cycle spent, by phase (total: the whole cycle).",
                                    (const char *[]){"phase", NULL}, cycle_bounds,
                                    sizeof cycle_bounds / sizeof *cycle_bounds);
    m->decisions = sv_metrics_counter(r, "understory_decisions_total",
                                      "Scheduling decisions made, by op (bind, pipeline, evict) and action "
                                      "(allocate, reclaim, preempt, backgroundpods, stalegangeviction; none: a "
                                      "pipelined pod bound once its room is free).",
                                      (const char *[]){"op", "action", NULL});
    m->evictions = sv_metrics_counter(r, "understory_evictions_total", "Pods evicted, by the action that evicted them.",
                                      (const char *[]){"action", NULL});
    m->pending = sv_metrics_gauge(r, "understory_pending_pods",
                                  "Pods waiting to be scheduled, by kind (ai, background) and reason.",
                                  (const char *[]){"kind", "reason", NULL});
    m->reloads = sv_metrics_counter(r, "understory_policy_reloads_total", "Policy reloads, by result (ok, refused).",
                                    (const char *[]){"result", NULL});
    m->policy = sv_metrics_gauge(r, "understory_policy_info", "1 for the id of the policies in force (builtin: the "
                                 "built-in C policies).", (const char *[]){"policy_id", NULL});
    m->leader = sv_metrics_gauge(r, "understory_leader", "1 while this replica is the leader, 0 on standby.", NULL);
    m->bg_gpus = sv_metrics_gauge(r, "understory_background_gpus", "GPUs held by background pods now.", NULL);
    m->idle_gpus = sv_metrics_gauge(r, "understory_idle_gpus", "GPUs held by no pod now.", NULL);
    m->nodes_short = sv_metrics_gauge(r, "understory_nodes_short",
                                      "Nodes whose allocatable is below what their pods hold, taken with what "
                                      "the pods hold until they leave room.",
                                      NULL);
    m->bg_gpu_seconds = sv_metrics_counter(r, "understory_background_gpu_seconds_total",
                                           "GPU-seconds background pods have used.", NULL);
    m->retries = sv_metrics_counter(r, "understory_api_retries_total",
                                    "Requests to the API server tried again, by reason: unanswered (no answer "
                                    "came), throttled (429), server_error (5xx).",
                                    (const char *[]){"reason", NULL});
    m->limiter_wait = sv_metrics_counter(r, "understory_api_rate_limiter_wait_seconds_total",
                                         "Seconds requests spent waiting for a token of the client-side rate "
                                         "limit (--kube-api-qps, --kube-api-burst), summed over requests.",
                                         NULL);
    m->policy_calls = sv_metrics_counter(r, "understory_policy_calls_total",
                                         "Lua policy function calls made by scheduling cycles.", NULL);
    m->node_classes = sv_metrics_counter(r, "understory_node_classes_total",
                                         "Nodes put into node classes by scheduling cycles, by whether the "
                                         "node kept the last cycle's class (kept) or was classed afresh (fresh).",
                                         (const char *[]){"reuse", NULL});
    m->scores_kept = sv_metrics_counter(r, "understory_scores_kept_total",
                                        "Placement scores cycles took from the cycle before instead of asking "
                                        "the policy.",
                                        NULL);
    return m->policy_calls && m->node_classes && m->scores_kept && m->retries && m->limiter_wait && m->api_requests && m->lists && m->watch_restarts && m->objects && m->synced && m->cycle && m->decisions &&
           m->evictions && m->pending && m->reloads && m->leader && m->bg_gpus && m->idle_gpus && m->bg_gpu_seconds &&
           m->policy && m->nodes_short && sv_metric_set(m->leader, NULL, 1) == 0 &&
           sv_metric_set(m->nodes_short, NULL, 0) == 0;
}

sv_monitor *sv_monitor_start(uv_loop_t *loop, const char *address, char *err, size_t errlen) {
    sv_monitor *m = calloc(1, sizeof *m);
    if (!m || !(m->reg = sv_metrics_new()) || !make_metrics(m)) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (!(m->admin = sv_admin_start(loop, address, NULL, err, errlen))) goto fail;
    if (sv_admin_route(m->admin, "GET", "/healthz", healthz, m) < 0 ||
        sv_admin_route(m->admin, "GET", "/readyz", readyz, m) < 0 ||
        sv_admin_route(m->admin, "GET", "/metrics", metrics, m) < 0) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    return m;
fail:
    sv_monitor_close(m);
    return NULL;
}

void sv_monitor_close(sv_monitor *m) {
    if (!m) return;
    for (size_t i = 0; i < m->nhttp; i++) sv_http_observe(m->http[i], NULL, NULL);
    sv_admin_close(m->admin); /* its connections close: no handler runs after this */
    sv_metrics_free(m->reg);
    free(m);
}

int sv_monitor_port(const sv_monitor *m) { return sv_admin_port(m->admin); }

int sv_monitor_watch_http(sv_monitor *m, sv_http *h) {
    if (m->nhttp == sizeof m->http / sizeof m->http[0]) return -1;
    m->http[m->nhttp++] = h;
    sv_http_observe(h, on_api_answer, m);
    return 0;
}

int sv_monitor_watch_informer(sv_monitor *m, const char *resource, const sv_informer *inf) {
    if (m->ninf == MAX_INFORMERS || !inf) return -1;
    snprintf(m->inf[m->ninf].resource, sizeof m->inf[m->ninf].resource, "%s", resource);
    m->inf[m->ninf++].inf = inf;
    return 0;
}

void sv_monitor_cycle(sv_monitor *m, const char *phase, double seconds) {
    if (m) sv_metric_observe(m->cycle, (const char *[]){phase}, seconds);
}

void sv_monitor_decisions(sv_monitor *m, const char *op, const char *action, unsigned n) {
    if (m) sv_metric_add(m->decisions, (const char *[]){op, action ? action : "none"}, n);
}

void sv_monitor_evictions(sv_monitor *m, const char *action, unsigned n) {
    if (m) sv_metric_add(m->evictions, (const char *[]){action}, n);
}

void sv_monitor_pending_clear(sv_monitor *m) {
    if (m) sv_metric_clear(m->pending);
}

void sv_monitor_pending(sv_monitor *m, const char *kind, const char *reason, unsigned n) {
    if (m) sv_metric_set(m->pending, (const char *[]){kind, reason}, n);
}

void sv_monitor_reload(sv_monitor *m, const char *result) {
    if (m) sv_metric_add(m->reloads, (const char *[]){result}, 1);
}

void sv_monitor_policy(sv_monitor *m, const char *id) {
    if (!m) return;
    sv_metric_clear(m->policy);
    sv_metric_set(m->policy, (const char *[]){id}, 1);
}

int sv_monitor_route(sv_monitor *m, const char *method, const char *path, sv_admin_fn fn, void *ud) {
    return sv_admin_route(m->admin, method, path, fn, ud);
}

typedef struct wl_reason {
    const char *name, *reason;
    bool background;
} wl_reason;

static int by_name(const void *a, const void *b) {
    return strcmp(((const wl_reason *)a)->name, ((const wl_reason *)b)->name);
}

/* Pending pods by kind and reason: each workload's reason (sorted by
 * name, so a pod finds its workload's in log time). */
static void pending(sv_monitor *m, const us_engine *e) {
    size_t nw = us_engine_workload_count(e), n = 0;
    wl_reason *w = malloc((nw ? nw : 1) * sizeof *w);
    sv_metric_clear(m->pending);
    if (!w) return; /* out of memory: no pending figures this cycle */
    for (size_t i = 0; i < nw; i++) {
        us_workload_info wi;
        if (us_engine_workload(e, i, &wi) != US_OK || wi.phase != US_WORKLOAD_ACTIVE || wi.external) continue;
        w[n++] = (wl_reason){wi.name, us_engine_workload_pending_reason(e, i), wi.background != 0};
    }
    qsort(w, n, sizeof *w, by_name);
    /* counts per (kind, reason), a handful of series */
    struct count {
        const char *kind, *reason;
        unsigned n;
    } c[64];
    size_t nc = 0;
    for (size_t i = 0; i < us_engine_pod_count(e); i++) {
        us_pod_info p;
        if (us_engine_pod(e, i, &p) != US_OK || p.phase != US_PHASE_PENDING || p.external) continue;
        wl_reason key = {p.workload, NULL, false};
        const wl_reason *x = bsearch(&key, w, n, sizeof *w, by_name);
        const char *kind = p.background ? "background" : "ai";
        const char *why = x && x->reason ? x->reason : "not-tried"; /* pending since the last cycle */
        size_t k = 0;
        while (k < nc && (strcmp(c[k].kind, kind) || strcmp(c[k].reason, why))) k++;
        if (k == nc && nc < sizeof c / sizeof *c) c[nc++] = (struct count){kind, why, 0};
        if (k < nc) c[k].n++;
    }
    for (size_t k = 0; k < nc; k++) sv_metric_set(m->pending, (const char *[]){c[k].kind, c[k].reason}, c[k].n);
    free(w);
}

void sv_monitor_after_cycle(sv_monitor *m, const us_engine *e, double sync_seconds, double write_seconds,
                            double now) {
    if (!m) return;
    double total = sync_seconds + write_seconds;
    for (size_t i = 0; i < us_engine_cycle_phase_count(e); i++) {
        us_cycle_phase_info ph;
        if (us_engine_cycle_phase(e, i, &ph) != US_OK) continue;
        sv_monitor_cycle(m, ph.name, ph.seconds);
        total += ph.seconds;
    }
    sv_monitor_cycle(m, "sync", sync_seconds);
    sv_monitor_cycle(m, "write", write_seconds);
    sv_monitor_cycle(m, "total", total);
    for (size_t i = 0; i < us_engine_decision_count(e); i++) {
        us_decision_info d;
        if (us_engine_decision(e, i, &d) != US_OK) continue;
        sv_monitor_decisions(m, d.op_name, d.action, 1);
        if (d.op == US_DECISION_EVICT) sv_monitor_evictions(m, d.action ? d.action : "none", 1);
    }
    pending(m, e);
    us_cycle_reuse r;
    if (us_engine_cycle_reuse(e, &r) == US_OK) {
        sv_metric_add(m->policy_calls, NULL, (double)r.policy_calls);
        sv_metric_add(m->node_classes, (const char *[]){"kept"}, (double)r.nodes_class_kept);
        sv_metric_add(m->node_classes, (const char *[]){"fresh"}, (double)(r.nodes_classed - r.nodes_class_kept));
        sv_metric_add(m->scores_kept, NULL, (double)r.scores_kept);
    }
    us_gpu_use g;
    if (us_engine_gpu_use(e, &g) != US_OK) return;
    double accrued = m->harvest_at > 0 && now > m->harvest_at ? m->harvest_rate * (now - m->harvest_at) : 0;
    sv_monitor_harvest(m, g.background, g.idle, accrued);
    m->harvest_at = now;
    m->harvest_rate = g.background;
}

void sv_monitor_leader(sv_monitor *m, bool leader) {
    if (m) sv_metric_set(m->leader, NULL, leader ? 1 : 0);
}

void sv_monitor_nodes_short(sv_monitor *m, size_t n) {
    if (m) sv_metric_set(m->nodes_short, NULL, (double)n);
}

void sv_monitor_harvest(sv_monitor *m, double background_gpus, double idle_gpus, double background_gpu_seconds) {
    if (!m) return;
    sv_metric_set(m->bg_gpus, NULL, background_gpus);
    sv_metric_set(m->idle_gpus, NULL, idle_gpus);
    if (background_gpu_seconds > 0) sv_metric_add(m->bg_gpu_seconds, NULL, background_gpu_seconds);
}
