/*
 * lifecycle.c — state transitions a cluster makes by itself: controllers
 * creating and recreating pods, deletion, completion, nodes coming and
 * going, grace periods ending.  See lifecycle.h.
 *
 * It never decides where a pod runs: new and recreated pods are pending.
 */
#include "lifecycle.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sort.h"
#include "strmap.h"

static bool live(const us_pod *p) {
    return !p->gone && (p->state == US_POD_PENDING || p->state == US_POD_PIPELINED ||
                        p->state == US_POD_RUNNING);
}

/* Should node n run a pod of DaemonSet w?  With running, whether a pod it
 * has may stay: as Kubernetes' DaemonSet controller, a NoSchedule taint
 * keeps new pods off but leaves the one there; NoExecute removes it. */
static bool node_runs_daemon(const us_state *st, const us_workload *w, int n, bool running) {
    const us_node *node = &st->nodes[n];
    return !node->removed && strcmp(node->pool, w->pool) == 0 &&
           us_labels_match(&node->labels, &w->node_selector) &&
           us_tolerates(&w->tolerations, &node->taints, running);
}

#define NAMEBUF 256

/* "<workload>-<suffix>" in buf (NAMEBUF bytes) when it fits, else (or when
 * buf is NULL) in memory of its own that the caller frees (when the result
 * is not buf), or NULL.  A name is never cut short: two cut names could be
 * the same. */
static char *pod_name(char *buf, const char *workload, const char *suffix) {
    size_t n = strlen(workload) + strlen(suffix) + 2;
    char *name = buf && n <= NAMEBUF ? buf : malloc(n);
    if (name) snprintf(name, n, "%s-%s", workload, suffix);
    return name;
}

/* The names live pods hold, so that a pod a controller creates never takes
 * one, as Kubernetes' generated names never do: a pod the scenario or the
 * caller named may be called "train-0" in another workload, and a
 * DaemonSet "a" on node "b-0" would name its pod as workload "a-b" names
 * its first replica.  Built on first use, from the live pods then (a pass
 * that creates no pod pays nothing); the pods created after are added.
 * Or the caller's own index answers (held), which follows the pods. */
typedef struct taken {
    us_strmap names;      /* the pods' own strings */
    bool built;
    us_life_held_fn held; /* NULL: the set above */
    void *ctx;
} taken;

static int taken_add(taken *t, const char *name) { return us_strmap_add(&t->names, name, 0) < 0 ? -1 : 0; }

/* Does a live pod hold name?  -1 when out of memory. */
static int taken_has(const us_state *st, taken *t, const char *name) {
    if (t->held) return t->held(t->ctx, name);
    if (!t->built) {
        t->built = true;
        /* sized once for every pod (the pods created after grow it) */
        if (us_strmap_reserve(&t->names, st->npods) < 0) return -1;
        for (size_t i = 0; i < st->npods; i++)
            if (live(&st->pods[i]) && taken_add(t, st->pods[i].name) < 0) return -1;
    }
    return us_strmap_get(&t->names, name) >= 0 ? 1 : 0;
}

static void taken_free(taken *t) { us_strmap_free(&t->names); }

/* A new pending pod of w named name, unless a live pod has that name
 * (then 0, and nothing is created).  1 when created, -1 out of memory. */
static int create_pod(us_state *st, taken *t, int w, const char *name, int pin) {
    int has = taken_has(st, t, name);
    if (has != 0) return has < 0 ? -1 : 0;
    int p = us_state_add_pod(st, w, name, pin);
    if (p < 0 || (!t->held && taken_add(t, st->pods[p].name) < 0)) return -1;
    return 1;
}

/* Node n's pod of DaemonSet w: "<w>-<node>", or "<w>-<node>-<k>" for the
 * first k that no live pod holds. */
static int create_daemon_pod(us_state *st, taken *t, int w, int n) {
    char buf[NAMEBUF], *name = pod_name(buf, st->workloads[w].name, st->nodes[n].name), *alt = NULL;
    int rc = name ? create_pod(st, t, w, name, n) : -1;
    for (unsigned k = 1; rc == 0; k++) {
        char sfx[24];
        snprintf(sfx, sizeof sfx, "%u", k);
        free(alt);
        rc = (alt = pod_name(NULL, name, sfx)) ? create_pod(st, t, w, alt, n) : -1;
    }
    free(alt);
    if (name != buf) free(name);
    return rc < 0 ? -1 : 0;
}

/* Give node n its pod of daemonset w, unless it has one. */
static int add_daemon_pod(us_state *st, taken *t, int w, int n) {
    for (size_t i = 0; i < st->npods; i++)
        if (st->pods[i].workload == w && st->pods[i].pin == n && live(&st->pods[i])) return 0;
    return create_daemon_pod(st, t, w, n);
}

/* Create the pods w lacks, given the indices of its live pods. */
static int submit_one(us_state *st, taken *t, int w, const int *live_pods, size_t nlive) {
    us_workload *wl = &st->workloads[w];
    wl->state = US_WL_ACTIVE;
    wl->started_at = -1;
    if (isnan(wl->created_at)) wl->created_at = wl->submit_at;  /* not given: created when submitted */
    if (wl->controller == US_CTRL_DAEMONSET) {
        bool *has = calloc(st->nnodes ? st->nnodes : 1, sizeof *has);
        int rc = has ? 0 : -1;
        for (size_t k = 0; rc == 0 && k < nlive; k++)
            if (st->pods[live_pods[k]].pin >= 0) has[st->pods[live_pods[k]].pin] = true;
        for (size_t n = 0; rc == 0 && n < st->nnodes; n++)
            if (!has[n] && node_runs_daemon(st, wl, (int)n, false)) rc = create_daemon_pod(st, t, w, (int)n);
        free(has);
        return rc;
    }
    char buf[NAMEBUF];
    /* replicas take the lowest free indices: a name held is skipped */
    for (int i = 0, have = (int)nlive; have < wl->replicas; i++) {
        char idx[24], *name;
        snprintf(idx, sizeof idx, "%d", i);
        if (!(name = pod_name(buf, wl->name, idx))) return -1;
        int rc = create_pod(st, t, w, name, -1);
        if (name != buf) free(name);
        if (rc < 0) return -1;
        have += rc;
    }
    return 0;
}

int us_life_submit(us_state *st, int w, double now) {
    (void)now;
    size_t n = 0;
    int *live_pods = malloc((st->npods + 1) * sizeof *live_pods);
    if (!live_pods) return -1;
    for (size_t i = 0; i < st->npods; i++)
        if (st->pods[i].workload == w && live(&st->pods[i])) live_pods[n++] = (int)i;
    taken t = {0};
    int rc = submit_one(st, &t, w, live_pods, n);
    taken_free(&t);
    free(live_pods);
    return rc;
}

/* One pass over the pods finds what every workload has, so submitting the
 * workloads of a large cluster at once stays linear. */
int us_life_submit_due(us_state *st, double now, bool *any) {
    size_t nw = st->nworkloads;
    int *first = calloc(nw + 1, sizeof *first), *fill = calloc(nw + 1, sizeof *fill);
    int *byw = malloc((st->npods + 1) * sizeof *byw);
    taken t = {0};
    int rc = -1;
    if (!first || !fill || !byw) goto out;
    for (size_t i = 0; i < st->npods; i++)
        if (live(&st->pods[i])) first[st->pods[i].workload + 1]++;
    for (size_t w = 0; w < nw; w++) first[w + 1] += first[w];
    for (size_t i = 0; i < st->npods; i++)
        if (live(&st->pods[i])) {
            int w = st->pods[i].workload;
            byw[first[w] + fill[w]++] = (int)i;
        }
    for (size_t w = 0; w < nw; w++) {
        us_workload *wl = &st->workloads[w];
        if (wl->state != US_WL_WAITING || wl->submit_at > now) continue;
        *any = true;
        /* pods created here are appended: the lists of others stay valid */
        if (submit_one(st, &t, (int)w, byw + first[w], (size_t)(first[w + 1] - first[w])) < 0) goto out;
    }
    rc = 0;
out:
    taken_free(&t);
    free(first);
    free(fill);
    free(byw);
    return rc;
}

int us_life_submit_new(us_state *st, size_t first, double now, us_life_held_fn held, void *ctx,
                       bool *any) {
    taken t = {0};
    t.held = held;
    t.ctx = ctx;
    for (size_t w = first; w < st->nworkloads; w++) {
        us_workload *wl = &st->workloads[w];
        if (wl->state != US_WL_WAITING || wl->submit_at > now) continue;
        *any = true;
        if (submit_one(st, &t, (int)w, NULL, 0) < 0) return -1;
    }
    return 0;
}

/* Pods marked gone are dropped only when they are due (us_state_compact_due):
 * a compaction moves every later pod, and what is kept by a pod's index
 * across cycles (the passing list, a pool's view of its pods) starts
 * again after one, so a change that leaves a few gone moves none. */
static void compact_if_due(us_state *st) {
    if (us_state_compact_due(st)) us_state_compact_pods(st);
}

/* A pod stops holding its node: it terminates for its grace period. */
static void terminate(us_state *st, us_pod *p, double now) {
    us_pod_touch(st, p);
    double grace = st->workloads[p->workload].termination_grace;
    if (p->state == US_POD_RUNNING && grace > 0) {
        p->state = US_POD_RELEASING;
        p->release_at = now + grace;
    } else if (p->state != US_POD_RELEASING) {
        us_pod_go(st, p);   /* pending or pipelined pods hold nothing */
    }
}

int us_life_delete(us_state *st, int w, double now) {
    st->workloads[w].state = US_WL_DELETED;
    for (size_t i = 0; i < st->npods; i++) {
        us_pod *p = &st->pods[i];
        if (p->workload == w && live(p)) terminate(st, p, now);
    }
    compact_if_due(st);
    return 0;
}

/* A live pod of a workload that completes finishes. */
static void complete_pod(us_state *st, us_pod *p) {
    us_pod_touch(st, p);
    if (p->state == US_POD_RUNNING) p->state = US_POD_COMPLETED;  /* keeps its node for the record */
    else us_pod_go(st, p);                                          /* never ran: nothing to report */
}

int us_life_delete_listed(us_state *st, int w, const int *pods, size_t n, double now) {
    st->workloads[w].state = US_WL_DELETED;
    for (size_t k = 0; k < n; k++) {
        us_pod *p = &st->pods[pods[k]];
        if (p->workload == w && live(p)) terminate(st, p, now);
    }
    return 0;
}

int us_life_complete_listed(us_state *st, int w, const int *pods, size_t n, double now) {
    (void)now;
    st->workloads[w].state = US_WL_COMPLETED;
    for (size_t k = 0; k < n; k++) {
        us_pod *p = &st->pods[pods[k]];
        if (p->workload == w && live(p)) complete_pod(st, p);
    }
    return 0;
}

int us_life_complete(us_state *st, int w, double now) {
    (void)now;
    st->workloads[w].state = US_WL_COMPLETED;
    for (size_t i = 0; i < st->npods; i++)
        if (st->pods[i].workload == w && live(&st->pods[i])) complete_pod(st, &st->pods[i]);
    compact_if_due(st);
    return 0;
}

int us_life_complete_many(us_state *st, const int *ws, size_t n, double now) {
    (void)now;
    if (n == 0) return 0;
    bool *done = calloc(st->nworkloads ? st->nworkloads : 1, sizeof *done);
    if (!done) return -1;
    for (size_t k = 0; k < n; k++) {
        st->workloads[ws[k]].state = US_WL_COMPLETED;
        done[ws[k]] = true;
    }
    for (size_t i = 0; i < st->npods; i++)
        if (done[st->pods[i].workload] && live(&st->pods[i])) complete_pod(st, &st->pods[i]);
    free(done);
    compact_if_due(st);
    return 0;
}

/* Node n's pods of the DaemonSets that run on it; fresh: n is new, it
 * has none yet. */
static int add_node_pods(us_state *st, taken *t, int n, bool fresh) {
    int rc = 0;
    st->nodes[n].removed = false;
    us_state_nodes_changed(st);
    for (size_t w = 0; w < st->nworkloads && rc == 0; w++) {
        us_workload *wl = &st->workloads[w];
        if (wl->state == US_WL_ACTIVE && wl->controller == US_CTRL_DAEMONSET &&
            node_runs_daemon(st, wl, n, false))
            rc = fresh ? create_daemon_pod(st, t, (int)w, n) : add_daemon_pod(st, t, (int)w, n);
    }
    return rc;
}

int us_life_add_node(us_state *st, int n, double now) {
    (void)now;
    taken t = {0};
    int rc = add_node_pods(st, &t, n, false);
    taken_free(&t);
    return rc;
}

int us_life_add_new_node(us_state *st, int n, double now, us_life_held_fn held, void *ctx) {
    (void)now;
    taken t = {0};
    t.held = held;
    t.ctx = ctx;
    return add_node_pods(st, &t, n, true);
}

/* What node n's removal does to pod p (any pod: those neither on n nor
 * pinned to it are passed over). */
static void lose_node(us_state *st, us_pod *p, int n) {
    if (p->gone) return;
    if (p->node == n || p->pin == n) us_pod_touch(st, p);
    /* a daemonset pod goes with its node; another pinned pod is lost
     * with it below, and waits for its node to come back */
    if (p->pin == n && st->workloads[p->workload].controller == US_CTRL_DAEMONSET) {
        us_pod_go(st, p);
        return;
    }
    if (p->node != n) return;
    if (p->state == US_POD_RELEASING || p->state == US_POD_COMPLETED) {
        if (p->state == US_POD_RELEASING) us_pod_go(st, p);
        return;
    }
    /* lost with the node; the controller recreates it pending */
    p->state = US_POD_PENDING;
    p->node = -1;
    p->shared_dev = -1;
}

int us_life_remove_node(us_state *st, int n, double now) {
    (void)now;
    st->nodes[n].removed = true;
    us_state_nodes_changed(st);
    for (size_t i = 0; i < st->npods; i++) lose_node(st, &st->pods[i], n);
    compact_if_due(st);
    return 0;
}

int us_life_remove_node_listed(us_state *st, int n, const int *pods, size_t npods, double now) {
    (void)now;
    st->nodes[n].removed = true;
    us_state_nodes_changed(st);
    for (size_t k = 0; k < npods; k++) lose_node(st, &st->pods[pods[k]], n);
    return 0;
}

void us_life_cordon(us_state *st, int n, bool cordoned) {
    if (st->nodes[n].unschedulable != cordoned) us_state_node_specs_changed(st);
    st->nodes[n].unschedulable = cordoned;
}

int us_life_evict(us_state *st, int pod, double now, bool reported) {
    us_pod *p = &st->pods[pod];
    int w = p->workload, pin = p->pin;
    bool was_running = p->state == US_POD_RUNNING;
    char *name = p->name;
    double grace = st->workloads[w].termination_grace;
    us_pod_touch(st, p);
    if (was_running && (grace > 0 || reported)) {
        p->state = US_POD_RELEASING;
        p->release_at = now + grace;
        if (st->workloads[w].state != US_WL_ACTIVE) return -2;
        /* the new incarnation shares the name; add_pod copies it */
        return us_state_add_pod(st, w, name, pin);
    }
    /* nothing to release: the same pod object becomes the new incarnation */
    if (st->workloads[w].state != US_WL_ACTIVE) {
        us_pod_go(st, p);
        return -2;
    }
    p->state = US_POD_PENDING;
    p->node = -1;
    p->shared_dev = -1;
    /* a new incarnation, its name a placeholder; but a reported pod that
     * was never bound is still that pod, pending */
    if (!reported) p->named = false;
    p->seq = st->next_seq++;
    return pod;
}

bool us_life_expiry_due(us_state *st, double now) {
    return us_state_compact_due(st) || us_state_next_release(st) <= now;
}

/* The releasing pods whose grace has ended by now marked gone, in pod
 * order, from the pods passing through (us_state.passing): no pass over
 * the pods.  Their earliest end after now in *next.  0, or -1 when memory
 * runs out (nothing marked). */
static int expire_listed(us_state *st, const int *list, size_t n, double now, double *next) {
    int *due = malloc((n ? n : 1) * sizeof *due);
    size_t ndue = 0;
    if (!due) return -1;
    *next = INFINITY;
    for (size_t k = 0; k < n; k++) {
        const us_pod *p = &st->pods[list[k]];
        if (p->state != US_POD_RELEASING) continue;
        if (p->release_at <= now) due[ndue++] = list[k];
        else if (p->release_at < *next) *next = p->release_at;
    }
    us_sort_ints(due, ndue);  /* marked in pod order, as a pass would */
    for (size_t k = 0; k < ndue; k++) us_pod_go(st, &st->pods[due[k]]);
    free(due);
    return 0;
}

/* The same by a pass over every pod, which lists the pods passing through
 * again. */
static void expire_all(us_state *st, double now, double *next) {
    *next = INFINITY;
    us_state_passing_restart(st);
    for (size_t i = 0; i < st->npods; i++) {
        us_pod *p = &st->pods[i];
        if (!p->gone && p->state == US_POD_RELEASING) {
            if (p->release_at <= now) us_pod_go(st, p);
            else if (p->release_at < *next) *next = p->release_at;
        }
        us_state_passing_relist(st, i);
    }
}

#ifdef US_CHECK_INVARIANTS
/* Checking builds: no releasing pod has ended by now, every pod passing
 * through is listed once (when the list is known), and the pods marked
 * gone are the ones counted. */
static bool expiry_holds(us_state *st, double now) {
    size_t n;
    const int *list = us_state_passing(st, &n);
    size_t listed = 0;
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        bool passes = us_pod_passes(p);
        if (!p->gone && p->state == US_POD_RELEASING && p->release_at <= now) return false;
        if (list && passes && !p->passing) return false;
        listed += list && passes;
    }
    return us_state_gone_counted(st) && (!list || listed == n);
}
#endif

/* The releasing pods whose grace has ended marked gone, then the pods gone
 * dropped when they are due (us_state_compact_due: most cycles move no
 * pod, so indices hold).  It runs before every cycle: no pass over the
 * pods while no pod ends and no compaction is due (us_life_expiry_due),
 * and none either when the pods passing through are known (the list is
 * read instead). */
int us_life_expire(us_state *st, double now) {
    if (us_life_expiry_due(st, now)) {
        size_t n;
        const int *list = us_state_passing(st, &n);
        double next;
        if (!list || expire_listed(st, list, n, now, &next) < 0) expire_all(st, now, &next);
        compact_if_due(st);
        st->next_release = next;
        st->release_version = st->pods_version;
    }
#ifdef US_CHECK_INVARIANTS
    if (!expiry_holds(st, now)) return -2;
#endif
    return 0;
}

int us_life_node_changed_listed(us_state *st, int n, const int *pods, size_t np, double now,
                                us_life_held_fn held, void *ctx) {
    taken t = {0};
    t.held = held;
    t.ctx = ctx;
    us_state_node_specs_changed(st);  /* node classes are found again */
    for (size_t w = 0; w < st->nworkloads; w++) {
        us_workload *wl = &st->workloads[w];
        if (wl->state != US_WL_ACTIVE || wl->controller != US_CTRL_DAEMONSET) continue;
        if (node_runs_daemon(st, wl, n, false)) {
            /* its pod on n, unless it has one */
            bool has = false;
            for (size_t k = 0; k < np && !has; k++) {
                const us_pod *p = &st->pods[pods[k]];
                has = p->workload == (int)w && p->pin == n && live(p);
            }
            if (!has && create_daemon_pod(st, &t, (int)w, n) < 0) {
                taken_free(&t);
                return -1;
            }
            continue;
        }
        bool stays = node_runs_daemon(st, wl, n, true); /* only a NoSchedule taint is new */
        for (size_t k = 0; k < np; k++) {
            us_pod *p = &st->pods[pods[k]];
            if (p->workload == (int)w && p->pin == n && live(p) && !(stays && p->state != US_POD_PENDING))
                terminate(st, p, now);
        }
    }
    taken_free(&t);
    return 0;
}

int us_life_node_changed(us_state *st, int n, double now) {
    size_t np = 0;
    int *pods = malloc((st->npods ? st->npods : 1) * sizeof *pods);
    if (!pods) return -1;
    for (size_t i = 0; i < st->npods; i++)
        if (st->pods[i].pin == n) pods[np++] = (int)i;
    int rc = us_life_node_changed_listed(st, n, pods, np, now, NULL, NULL);
    free(pods);
    compact_if_due(st);
    return rc;
}

/* Rank of a pod for scaling down: lower goes first. */
static int scale_rank(const us_pod *p) {
    return p->state == US_POD_PENDING ? 0 : p->state == US_POD_PIPELINED ? 1 : 2;
}

/* Scale-down order: by rank, newest first within a rank (a scale-down
 * undoes the latest growth).  Pod seqs are unique, so the order is total. */
static int by_scale_order(const void *a, const void *b, void *ctx) {
    const us_state *st = ctx;
    const us_pod *x = &st->pods[*(const int *)a], *y = &st->pods[*(const int *)b];
    int rx = scale_rank(x), ry = scale_rank(y);
    if (rx != ry) return rx < ry ? -1 : 1;
    return x->seq > y->seq ? -1 : x->seq < y->seq;
}

int us_life_scale_listed(us_state *st, int w, int replicas, const int *pods, size_t n, double now,
                         us_life_held_fn held, void *ctx) {
    us_workload *wl = &st->workloads[w];
    double started = wl->started_at;
    size_t have = 0;
    int rc = 0;
    wl->replicas = replicas;
    if (wl->state != US_WL_ACTIVE) return 0;
    int *live_pods = malloc((n ? n : 1) * sizeof *live_pods);
    if (!live_pods) return -1;
    for (size_t k = 0; k < n; k++)
        if (st->pods[pods[k]].workload == w && live(&st->pods[pods[k]])) live_pods[have++] = pods[k];
    if (have > (size_t)replicas) {
        /* one sort of the workload's pods, not a scan of every pod per pod
         * removed: 1,000,000 -> 1 is n log n */
        us_sort(live_pods, have, sizeof *live_pods, by_scale_order, st);
        for (size_t k = 0; k < have - (size_t)replicas; k++) terminate(st, &st->pods[live_pods[k]], now);
    } else if (have < (size_t)replicas) {
        taken t = {0};
        t.held = held;
        t.ctx = ctx;
        rc = submit_one(st, &t, w, live_pods, have);
        taken_free(&t);
    }
    free(live_pods);
    wl->started_at = started;
    return rc;
}

int us_life_scale(us_state *st, int w, int replicas, double now) {
    size_t n = 0;
    int *pods = malloc((st->npods ? st->npods : 1) * sizeof *pods);
    if (!pods) return -1;
    for (size_t i = 0; i < st->npods; i++)
        if (st->pods[i].workload == w) pods[n++] = (int)i;
    int rc = us_life_scale_listed(st, w, replicas, pods, n, now, NULL, NULL);
    free(pods);
    compact_if_due(st);
    return rc;
}

int us_life_pod_lost(us_state *st, int pod, bool recreated, double now) {
    (void)now;
    us_pod *p = &st->pods[pod];
    int w = p->workload;
    us_pod_touch(st, p);
    if (p->state == US_POD_RELEASING || p->state == US_POD_COMPLETED ||
        st->workloads[w].state != US_WL_ACTIVE) {
        us_pod_go(st, p);
    } else {
        p->state = US_POD_PENDING;
        p->node = -1;
        p->shared_dev = -1;
        p->named = false; /* the controller's new pod takes this place */
        if (recreated) p->seq = st->next_seq++;
    }
    return 0;
}
