/*
 * statejson.c — a state written back as a scenario document
 * (docs/scenario.md) that loads into the same state at t=0: what
 * `understory serve` shows on /debug/state and `understory import
 * --canonical` prints, so production can be replayed in the simulator.
 * Owns only the writing; it never changes the state.
 *
 * Times are relative to now (created_at and release_at: now is t=0), every
 * field is written out (no default left implicit), quantities in engine
 * units (cpu "Nm", memory bytes as a string, gpu a number), objects in the
 * state's order.  Pending pods are not listed: a workload's replicas
 * stand for them, and loading creates them.  A workload no longer active
 * (deleted, completed) whose pods still terminate is written as an
 * external workload holding those pods, as `understory import` writes a
 * workload whose pods are all being deleted; workloads due after now are
 * left out (a scenario's workloads due at t=0 are in: loading submits
 * them at the first cycle).
 */
#include "statejson.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct out {
    bool bad; /* an allocation failed */
} out;

static cJSON *put(out *o, cJSON *obj, const char *key, cJSON *item) {
    if (o->bad || !item || !cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        o->bad = true;
        return NULL;
    }
    return item;
}

static cJSON *push(out *o, cJSON *arr, cJSON *item) {
    if (o->bad || !item || !cJSON_AddItemToArray(arr, item)) {
        cJSON_Delete(item);
        o->bad = true;
        return NULL;
    }
    return item;
}

/* A value in engine units as the scenario writes it; -1 (unlimited) stays
 * a number. */
static cJSON *quantity(int r, int64_t v) {
    char s[32];
    if (v == US_UNLIMITED) return cJSON_CreateNumber(-1);
    if (r == US_GPU) return cJSON_CreateNumber((double)v / US_GPU_UNIT);
    snprintf(s, sizeof s, r == US_CPU ? "%lldm" : "%lld", (long long)v);
    return cJSON_CreateString(s);
}

static void labels(out *o, cJSON *obj, const char *key, const us_labels *l) {
    cJSON *m = put(o, obj, key, cJSON_CreateObject());
    for (size_t i = 0; m && i < l->n; i++) put(o, m, l->items[i].key, cJSON_CreateString(l->items[i].value));
}

/* A time relative to now; -0 written as 0. */
static cJSON *rel(double t, double now) {
    double d = t - now;
    return cJSON_CreateNumber(d == 0 ? 0 : d);
}

static cJSON *node(out *o, const us_node *n) {
    cJSON *x = cJSON_CreateObject(), *t;
    if (!x) return NULL;
    put(o, x, "name", cJSON_CreateString(n->name));
    put(o, x, "pool", cJSON_CreateString(n->pool));
    put(o, x, "cpu", quantity(US_CPU, n->cap.v[US_CPU]));
    put(o, x, "memory", quantity(US_MEM, n->cap.v[US_MEM]));
    put(o, x, "gpu", cJSON_CreateNumber(n->gpus));
    labels(o, x, "labels", &n->labels);
    put(o, x, "unschedulable", cJSON_CreateBool(n->unschedulable));
    t = put(o, x, "taints", cJSON_CreateArray());
    for (size_t i = 0; t && i < n->taints.n; i++) {
        const us_taint_item *ti = &n->taints.items[i];
        cJSON *e = push(o, t, cJSON_CreateObject());
        if (!e) break;
        put(o, e, "key", cJSON_CreateString(ti->key));
        if (*ti->value) put(o, e, "value", cJSON_CreateString(ti->value));
        put(o, e, "effect", cJSON_CreateString(us_effect_names[ti->effect]));
    }
    return x;
}

/* {gpu: {quota, limit, over_quota_weight}, cpu: ..., memory: ...}; with
 * set, only the resources it marks (a pool override). */
static cJSON *resources(out *o, const us_qres *res, const bool *set) {
    cJSON *x = cJSON_CreateObject();
    for (int r = 0; x && r < US_NRES; r++) {
        if (set && !set[r]) continue;
        cJSON *q = put(o, x, us_res_names[r], cJSON_CreateObject());
        if (!q) break;
        put(o, q, "quota", quantity(r, res[r].quota));
        put(o, q, "limit", quantity(r, res[r].limit));
        put(o, q, "over_quota_weight", cJSON_CreateNumber(res[r].over_quota_weight));
    }
    return x;
}

static cJSON *queue(out *o, const us_state *st, const us_queue *q, double now) {
    cJSON *x = cJSON_CreateObject(), *p;
    if (!x) return NULL;
    put(o, x, "name", cJSON_CreateString(q->name));
    if (q->parent >= 0) put(o, x, "parent", cJSON_CreateString(st->queues[q->parent].name));
    put(o, x, "priority", cJSON_CreateNumber(q->priority));
    put(o, x, "resources", resources(o, q->res, NULL));
    if (q->npools && (p = put(o, x, "pools", cJSON_CreateObject())))
        for (size_t i = 0; i < q->npools; i++) put(o, p, q->pools[i].pool, resources(o, q->pools[i].res, q->pools[i].set));
    put(o, x, "created_at", rel(q->created_at, now));
    return x;
}

static const char *const preempt_names[] = {"preemptible", "non-preemptible", "semi-preemptible"};
static const char *const ctrl_names[] = {"none", "job", "deployment", "daemonset"};

/* Workload wi is active, or no active workload has its name (a workload
 * deleted and submitted again leaves its former incarnation's pods
 * terminating: they are written under the active one, as releasing):
 * the workload whose entry holds wi's pods. */
static bool live(const us_workload *w, double now);

static int active_named(const us_state *st, int wi, double now) {
    const us_workload *w = &st->workloads[wi];
    int first = wi; /* else the first of its name stands for them all */
    if (live(w, now)) return wi;
    for (size_t i = 0; i < st->nworkloads; i++) {
        const us_workload *v = &st->workloads[i];
        if ((v->state == US_WL_WAITING && !live(v, now)) || strcmp(v->name, w->name) != 0) continue;
        if (live(v, now)) return (int)i;
        if ((int)i < first) first = (int)i;
    }
    return first;
}

/* Pods written for workload wi: running, pipelined and releasing ones, and
 * the releasing ones of former workloads of its name (releasing only, as
 * external, when ext). */
static void pods(out *o, cJSON *x, const us_state *st, int wi, bool ext, double now) {
    cJSON *arr = put(o, x, "pods", cJSON_CreateArray());
    for (size_t i = 0; arr && i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        if (p->gone || p->node < 0 || active_named(st, p->workload, now) != wi) continue;
        if (p->state != US_POD_RUNNING && p->state != US_POD_PIPELINED && p->state != US_POD_RELEASING) continue;
        if ((ext || p->workload != wi) && p->state != US_POD_RELEASING) continue;
        cJSON *e = push(o, arr, cJSON_CreateObject());
        if (!e) return;
        put(o, e, "name", cJSON_CreateString(p->name));
        put(o, e, "node", cJSON_CreateString(st->nodes[p->node].name));
        put(o, e, "state", cJSON_CreateString(us_pod_state_names[p->state]));
        if (p->state == US_POD_RELEASING) put(o, e, "release_at", rel(p->release_at > now ? p->release_at : now, now));
    }
}

/* Active, or due to be submitted by now (a scenario just loaded: the
 * simulator submits its t=0 workloads at the first cycle). */
static bool live(const us_workload *w, double now) {
    return w->state == US_WL_ACTIVE || (w->state == US_WL_WAITING && w->submit_at <= now);
}

static bool releasing_pods(const us_state *st, int wi) {
    for (size_t i = 0; i < st->npods; i++)
        if (st->pods[i].workload == wi && !st->pods[i].gone && st->pods[i].state == US_POD_RELEASING &&
            st->pods[i].node >= 0)
            return true;
    return false;
}

static cJSON *workload(out *o, const us_state *st, int wi, double now) {
    const us_workload *w = &st->workloads[wi];
    bool ext = w->external || !live(w, now); /* a former workload: its terminating pods */
    cJSON *x = cJSON_CreateObject(), *r, *t;
    if (!x) return NULL;
    put(o, x, "name", cJSON_CreateString(w->name));
    if (ext) put(o, x, "external", cJSON_CreateBool(true));
    else put(o, x, "queue", cJSON_CreateString(st->queues[w->queue].name));
    put(o, x, "priority", cJSON_CreateNumber(w->priority));
    put(o, x, "preemptibility", cJSON_CreateString(preempt_names[w->preemptibility]));
    put(o, x, "controller", cJSON_CreateString(ctrl_names[w->controller]));
    put(o, x, "replicas", cJSON_CreateNumber(live(w, now) ? w->replicas : 0));
    if (!ext) put(o, x, "min_member", cJSON_CreateNumber(w->min_member));
    put(o, x, "pool", cJSON_CreateString(w->pool));
    labels(o, x, "node_selector", &w->node_selector);
    labels(o, x, "labels", &w->labels);
    t = put(o, x, "tolerations", cJSON_CreateArray());
    for (size_t i = 0; t && i < w->tolerations.n; i++) {
        const us_toleration_item *ti = &w->tolerations.items[i];
        cJSON *e = push(o, t, cJSON_CreateObject());
        if (!e) break;
        if (*ti->key) put(o, e, "key", cJSON_CreateString(ti->key));
        put(o, e, "operator", cJSON_CreateString(ti->exists ? "Exists" : "Equal"));
        if (*ti->value) put(o, e, "value", cJSON_CreateString(ti->value));
        if (ti->effect != US_EFFECT_ANY) put(o, e, "effect", cJSON_CreateString(us_effect_names[ti->effect]));
    }
    put(o, x, "termination_grace", cJSON_CreateNumber(w->termination_grace));
    if ((r = put(o, x, "requests", cJSON_CreateObject())))
        for (int k = 0; k < US_NRES; k++) put(o, r, us_res_names[k], quantity(k, w->request.v[k]));
    /* what is left of its run: a running gang's clock keeps going */
    if (w->duration >= 0 && !ext) {
        double left = w->started_at >= 0 ? w->duration - (now - w->started_at) : w->duration;
        put(o, x, "duration", cJSON_CreateNumber(left > 0 ? left : 0));
    }
    put(o, x, "created_at", rel(isfinite(w->created_at) ? w->created_at : w->submit_at, now));
    pods(o, x, st, wi, ext && !w->external, now);
    return x;
}

int us_statejson_write(const us_state *st, double now, const char *name, cJSON **doc) {
    out o = {false};
    cJSON *d = cJSON_CreateObject(), *a;
    *doc = NULL;
    if (!d) return -1;
    put(&o, d, "name", cJSON_CreateString(name));
    if ((a = put(&o, d, "nodes", cJSON_CreateArray())))
        for (size_t i = 0; i < st->nnodes; i++)
            if (!st->nodes[i].removed) push(&o, a, node(&o, &st->nodes[i]));
    if ((a = put(&o, d, "queues", cJSON_CreateArray())))
        for (size_t i = 0; i < st->nqueues; i++) push(&o, a, queue(&o, st, &st->queues[i], now));
    if ((a = put(&o, d, "workloads", cJSON_CreateArray())))
        for (size_t i = 0; i < st->nworkloads; i++) {
            const us_workload *w = &st->workloads[i];
            if (w->state == US_WL_WAITING && !live(w, now)) continue;
            if (!live(w, now) && (!releasing_pods(st, (int)i) || active_named(st, (int)i, now) != (int)i)) continue;
            push(&o, a, workload(&o, st, (int)i, now));
        }
    if (o.bad) {
        cJSON_Delete(d);
        return -1;
    }
    *doc = d;
    return 0;
}
