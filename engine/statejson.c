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
 * workload whose pods are all being deleted, or they are the releasing
 * pods of a live workload of its name that asks the same room (holder());
 * workloads due after now are
 * left out (a scenario's workloads due at t=0 are in: loading submits
 * them at the first cycle).
 */
#include "statejson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Active, or due to be submitted by now (a scenario just loaded: the
 * simulator submits its t=0 workloads at the first cycle). */
static bool live(const us_workload *w, double now) {
    return w->state == US_WL_ACTIVE || (w->state == US_WL_WAITING && w->submit_at <= now);
}

/* Pods of a and b take the same room on a node. */
static bool same_room(const us_workload *a, const us_workload *b) {
    return memcmp(&a->request, &b->request, sizeof a->request) == 0 && strcmp(a->pool, b->pool) == 0;
}

/* The workload whose entry holds wi's pods: wi when live.  A former
 * workload (deleted, completed) leaves pods terminating; when a live
 * workload of its name asks the same room (deleted and submitted again),
 * they are that one's releasing pods, as `understory import` lists a
 * terminating pod with its owner's others; else the first former workload
 * of its name asking the same room holds them all. */
static int holder(const us_state *st, int wi, double now) {
    const us_workload *w = &st->workloads[wi];
    int first = wi;
    if (live(w, now)) return wi;
    for (size_t i = 0; i < st->nworkloads; i++) {
        const us_workload *v = &st->workloads[i];
        if (v->dropped || strcmp(v->name, w->name) != 0 || !same_room(v, w) ||
            (v->state == US_WL_WAITING && !live(v, now)))
            continue;
        if (live(v, now)) return (int)i;
        if ((int)i < first) first = (int)i;
    }
    return first;
}

/* Where each workload's pods go, computed once a document. */
typedef struct index {
    int *hold;      /* [nworkloads]: holder() */
    size_t *first;  /* [nworkloads + 1]: pods of holder w at order[first[w]..first[w+1]) */
    size_t *order;  /* [npods]: pod indices by holder, in pod order */
} index;

static void index_free(index *x) {
    free(x->hold);
    free(x->first);
    free(x->order);
}

static int index_build(index *x, const us_state *st, double now) {
    size_t nw = st->nworkloads;
    x->hold = malloc((nw ? nw : 1) * sizeof *x->hold);
    x->first = calloc(nw + 1, sizeof *x->first);
    x->order = malloc((st->npods ? st->npods : 1) * sizeof *x->order);
    if (!x->hold || !x->first || !x->order) return -1;
    for (size_t i = 0; i < nw; i++) x->hold[i] = live(&st->workloads[i], now) ? (int)i : holder(st, (int)i, now);
    for (size_t i = 0; i < st->npods; i++) x->first[x->hold[st->pods[i].workload] + 1]++;
    for (size_t i = 0; i < nw; i++) x->first[i + 1] += x->first[i];
    size_t *at = calloc(nw ? nw : 1, sizeof *at);
    if (!at) return -1;
    for (size_t i = 0; i < st->npods; i++) {
        int h = x->hold[st->pods[i].workload];
        x->order[x->first[h] + at[h]++] = i;
    }
    free(at);
    return 0;
}

/* A former holder whose pods are written: it has terminating pods. */
static bool written_former(const us_state *st, const index *x, int h) {
    for (size_t k = x->first[h]; k < x->first[h + 1]; k++) {
        const us_pod *p = &st->pods[x->order[k]];
        if (!p->gone && p->node >= 0 && p->state == US_POD_RELEASING) return true;
    }
    return false;
}

/* The name holder h is written under: its own, unless a live workload or
 * an earlier former one written has it (a former workload that asks other
 * room than its live namesake): then "<name>~<h>", unique in the state. */
static const char *entry_name(const us_state *st, const index *x, int h, double now, char *buf, size_t len) {
    const us_workload *w = &st->workloads[h];
    if (live(w, now)) return w->name;
    for (size_t i = 0; i < st->nworkloads; i++) {
        const us_workload *v = &st->workloads[i];
        if ((int)i == h || v->dropped || strcmp(v->name, w->name) != 0) continue;
        if (live(v, now) || ((int)i < h && x->hold[i] == (int)i && written_former(st, x, (int)i))) {
            /* numbered as if the workloads a control plane dropped were
             * gone from the array (us_workload.dropped) */
            int k = h;
            for (int j = 0; j < h; j++) k -= st->workloads[j].dropped;
            snprintf(buf, len, "%.200s~%d", w->name, k);
            return buf;
        }
    }
    return w->name;
}

/* Pods written for holder wi: its running, pipelined and releasing ones,
 * and the releasing ones of former workloads it holds (releasing only, as
 * external, when ext). */
static void pods(out *o, cJSON *x, const us_state *st, const index *ix, int wi, bool ext, double now) {
    cJSON *arr = put(o, x, "pods", cJSON_CreateArray());
    for (size_t k = ix->first[wi]; arr && k < ix->first[wi + 1]; k++) {
        const us_pod *p = &st->pods[ix->order[k]];
        if (p->gone || p->node < 0) continue;
        if (p->state != US_POD_RUNNING && p->state != US_POD_PIPELINED && p->state != US_POD_RELEASING) continue;
        if ((ext || p->workload != wi) && p->state != US_POD_RELEASING) continue;
        cJSON *e = push(o, arr, cJSON_CreateObject());
        if (!e) return;
        put(o, e, "name", cJSON_CreateString(p->name));
        put(o, e, "node", cJSON_CreateString(st->nodes[p->node].name));
        put(o, e, "state", cJSON_CreateString(us_pod_state_names[p->state]));
        /* a deletion the engine does not time (us_pod_spec.terminating)
         * holds its room until the pod is removed: no time to write */
        if (p->state == US_POD_RELEASING && isinf(p->release_at)) put(o, e, "until_removed", cJSON_CreateTrue());
        else if (p->state == US_POD_RELEASING) put(o, e, "release_at", rel(p->release_at > now ? p->release_at : now, now));
        if (p->shared_dev >= 0) put(o, e, "device", cJSON_CreateNumber(p->shared_dev));
        /* a pin the API gave (a DaemonSet's pods are pinned by their
         * controller): not under a DaemonSet holding a former workload's
         * releasing pod either, which loads back as that DaemonSet's
         * (found by fuzz_api: the pin was written, then not) */
        if (p->pin >= 0 && st->workloads[p->workload].controller != US_CTRL_DAEMONSET &&
            (ext || st->workloads[wi].controller != US_CTRL_DAEMONSET))
            put(o, e, "pin", cJSON_CreateString(st->nodes[p->pin].name));
    }
}

/* Workload wi's pending pods pinned to a node, as {name, pin}, when it has
 * any (docs/scenario.md, pinned_pending): without them a state loaded its
 * pinned pending pods as replicas free to go anywhere.  What would not
 * load is left out, and such a pod loads as a replica like any other: a
 * pin to a node that has left (the node is not written) or that is in
 * another pool, and pods beyond the replicas that the written running
 * and pipelined ones leave. */
static void pinned_pending(out *o, cJSON *x, const us_state *st, const index *ix, int wi) {
    const us_workload *w = &st->workloads[wi];
    cJSON *arr = NULL;
    int room = w->replicas;
    for (size_t k = ix->first[wi]; k < ix->first[wi + 1]; k++) {
        const us_pod *p = &st->pods[ix->order[k]];
        if (!p->gone && p->node >= 0 && p->workload == wi &&
            (p->state == US_POD_RUNNING || p->state == US_POD_PIPELINED))
            room--;
    }
    for (size_t k = ix->first[wi]; k < ix->first[wi + 1] && room > 0; k++) {
        const us_pod *p = &st->pods[ix->order[k]];
        if (p->gone || p->workload != wi || p->state != US_POD_PENDING || p->pin < 0) continue;
        const us_node *n = &st->nodes[p->pin];
        if (n->removed || strcmp(n->pool, w->pool) != 0) continue;
        if (!arr && !(arr = put(o, x, "pinned_pending", cJSON_CreateArray()))) return;
        cJSON *e = push(o, arr, cJSON_CreateObject());
        if (!e) return;
        put(o, e, "name", cJSON_CreateString(p->name));
        put(o, e, "pin", cJSON_CreateString(n->name));
        room--;
    }
}

static cJSON *workload(out *o, const us_state *st, const index *ix, int wi, double now) {
    const us_workload *w = &st->workloads[wi];
    bool ext = w->external || !live(w, now); /* a former workload: its terminating pods */
    char buf[256];
    cJSON *x = cJSON_CreateObject(), *r, *t;
    if (!x) return NULL;
    put(o, x, "name", cJSON_CreateString(entry_name(st, ix, wi, now, buf, sizeof buf)));
    if (ext) put(o, x, "external", cJSON_CreateBool(true));
    else put(o, x, "queue", cJSON_CreateString(st->queues[w->queue].name));
    put(o, x, "priority", cJSON_CreateNumber(w->priority));
    put(o, x, "preemptibility", cJSON_CreateString(preempt_names[w->preemptibility]));
    put(o, x, "controller", cJSON_CreateString(ctrl_names[w->controller]));
    put(o, x, "replicas", cJSON_CreateNumber(live(w, now) ? w->replicas : 0));
    if (!ext) put(o, x, "min_member", cJSON_CreateNumber(w->min_member));
    if (!ext && w->succeeded > 0) put(o, x, "succeeded", cJSON_CreateNumber(w->succeeded));
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
    pods(o, x, st, ix, wi, ext && !w->external, now);
    if (!ext && w->controller != US_CTRL_DAEMONSET) pinned_pending(o, x, st, ix, wi);
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
    index ix = {0};
    if (index_build(&ix, st, now) < 0) o.bad = true;
    if (!o.bad && (a = put(&o, d, "workloads", cJSON_CreateArray())))
        for (size_t i = 0; i < st->nworkloads; i++) {
            const us_workload *w = &st->workloads[i];
            if (!live(w, now) && (ix.hold[i] != (int)i || !written_former(st, &ix, (int)i))) continue;
            push(&o, a, workload(&o, st, &ix, (int)i, now));
        }
    index_free(&ix);
    if (o.bad) {
        cJSON_Delete(d);
        return -1;
    }
    *doc = d;
    return 0;
}
