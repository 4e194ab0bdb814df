/*
 * state.c — the cluster state's storage: adding objects, lookups, labels,
 * derived queue fields and the static background rules.
 *
 * It never schedules anything; lifecycle.c changes objects over time and
 * cycle.c decides placements.
 */
#include "state.h"

#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "strmap.h"

const char *const us_res_names[US_NRES] = {"gpu", "cpu", "memory"};
const char us_background_label_blocked[] =
    "the label " US_BACKGROUND_LABEL " must be \"true\" (background work) or \"false\" (AI work); "
    "with any other value the workload is never scheduled";
const char *const us_pod_state_names[] = {"pending", "pipelined", "running",
                                          "releasing", "completed"};

int64_t us_res_round(double x) {
    if (!(x == x)) return 0;
    /* 2^63 is the first double past INT64_MAX */
    if (x >= 9223372036854775808.0) return INT64_MAX;
    if (x <= -9223372036854775808.0) return INT64_MIN;
    return llround(x);
}

const char *us_labels_get(const us_labels *l, const char *key) {
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i].key, key) == 0) return l->items[i].value;
    return NULL;
}

bool us_labels_match(const us_labels *l, const us_labels *sel) {
    for (size_t i = 0; i < sel->n; i++) {
        const char *v = us_labels_get(l, sel->items[i].key);
        if (!v || strcmp(v, sel->items[i].value) != 0) return false;
    }
    return true;
}

bool us_labels_equal(const us_labels *a, const us_labels *b) {
    if (a == b) return true;
    if (a->n != b->n) return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->items[i].key, b->items[i].key) || strcmp(a->items[i].value, b->items[i].value))
            return false;
    return true;
}

int us_labels_copy(us_labels *dst, const us_labels *src) {
    dst->items = NULL;
    dst->n = 0;
    if (src->n == 0) return 0;
    dst->items = calloc(src->n, sizeof *dst->items);
    if (!dst->items) return -1;
    for (size_t i = 0; i < src->n; i++) {
        dst->items[i].key = strdup(src->items[i].key);
        dst->items[i].value = strdup(src->items[i].value);
        dst->n = i + 1;
        if (!dst->items[i].key || !dst->items[i].value) {
            us_labels_free(dst);
            return -1;
        }
    }
    return 0;
}

void us_labels_free(us_labels *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].key);
        free(l->items[i].value);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

void us_state_init(us_state *st) {
    memset(st, 0, sizeof *st);
    st->gone_share = US_GONE_SHARE;
}

void us_node_free(us_node *n) {
    free(n->name);
    free(n->pool);
    us_labels_free(&n->labels);
    us_taints_free(&n->taints);
}

void us_queue_free(us_queue *q) {
    free(q->name);
    for (size_t i = 0; i < q->npools; i++) free(q->pools[i].pool);
    free(q->pools);
}

void us_workload_free(us_workload *w) {
    free(w->name);
    free(w->pool);
    us_labels_free(&w->node_selector);
    us_labels_free(&w->labels);
    us_tolerations_free(&w->tolerations);
    free(w->last_status);
}

void us_state_free(us_state *st) {
    for (size_t i = 0; i < st->nnodes; i++) us_node_free(&st->nodes[i]);
    for (size_t i = 0; i < st->nqueues; i++) us_queue_free(&st->queues[i]);
    for (size_t i = 0; i < st->nworkloads; i++) us_workload_free(&st->workloads[i]);
    for (size_t i = 0; i < st->npods; i++) free(st->pods[i].name);
    free(st->nodes);
    free(st->queues);
    free(st->workloads);
    free(st->pods);
    free(st->qslot);
    free(st->journal);
    free(st->passing);
    free(st->watch);
    free(st->changes);
    us_droplog_free(&st->drops);
    memset(st, 0, sizeof *st);
}

/* A copy of s, or NULL; *ok turns false when a non-NULL s could not be
 * copied (a NULL s copies to NULL). */
static char *dup_or_null(const char *s, bool *ok) {
    if (!s) return NULL;
    char *c = strdup(s);
    if (!c) *ok = false;
    return c;
}

/* A copy of n elements of elem bytes (at least one slot, so an empty array
 * still has a valid pointer to grow from), or NULL. */
static void *dup_array(const void *src, size_t n, size_t elem) {
    void *a = calloc(n ? n : 1, elem);
    if (a && n) memcpy(a, src, n * elem);
    return a;
}

/* The structs are copied first with every owned pointer cleared, so that at
 * any point of a failure us_state_free(dst) frees exactly what was copied. */
int us_state_clone(us_state *dst, const us_state *src) {
    bool ok = true;
    us_state_init(dst);
    dst->next_seq = src->next_seq;
    dst->ngone = src->ngone;
    dst->gone_share = src->gone_share;
    dst->nodes_version = src->nodes_version;  /* the same nodes */
    dst->node_specs_version = src->node_specs_version;
    dst->nodes_warned = src->nodes_warned;  /* with the nodes' warned flags */
    dst->nodes = dup_array(src->nodes, src->nnodes, sizeof *dst->nodes);
    dst->queues = dup_array(src->queues, src->nqueues, sizeof *dst->queues);
    dst->workloads = dup_array(src->workloads, src->nworkloads, sizeof *dst->workloads);
    dst->pods = dup_array(src->pods, src->npods, sizeof *dst->pods);
    if (!dst->nodes || !dst->queues || !dst->workloads || !dst->pods) goto fail;
    dst->nnodes = dst->cap_nodes = src->nnodes;
    dst->nqueues = dst->cap_queues = src->nqueues;
    dst->nworkloads = dst->cap_workloads = src->nworkloads;
    dst->npods = dst->cap_pods = src->npods;
    if (!src->nnodes) dst->cap_nodes = 1;
    if (!src->nqueues) dst->cap_queues = 1;
    if (!src->nworkloads) dst->cap_workloads = 1;
    if (!src->npods) dst->cap_pods = 1;
    /* a copy starts with no journal and no ledger (pods_version 0) */
    for (size_t i = 0; i < dst->npods; i++) dst->pods[i].journal = 0, dst->pods[i].watched = false;
    for (size_t i = 0; i < dst->nnodes; i++) {
        us_node *n = &dst->nodes[i];
        n->name = n->pool = NULL;
        n->labels = (us_labels){NULL, 0};
        n->taints = (us_taints){NULL, 0};
    }
    for (size_t i = 0; i < dst->nqueues; i++) {
        dst->queues[i].name = NULL;
        dst->queues[i].pools = NULL;
        dst->queues[i].npools = 0;
    }
    for (size_t i = 0; i < dst->nworkloads; i++) {
        us_workload *w = &dst->workloads[i];
        w->name = w->pool = w->last_status = NULL;
        w->node_selector = w->labels = (us_labels){NULL, 0};
        w->tolerations = (us_tolerations){NULL, 0};
    }
    for (size_t i = 0; i < dst->npods; i++) dst->pods[i].name = NULL;

    for (size_t i = 0; i < dst->nnodes && ok; i++) {
        const us_node *s = &src->nodes[i];
        us_node *n = &dst->nodes[i];
        n->name = dup_or_null(s->name, &ok);
        n->pool = dup_or_null(s->pool, &ok);
        if (us_labels_copy(&n->labels, &s->labels) < 0 || us_taints_copy(&n->taints, &s->taints) < 0)
            ok = false;
    }
    for (size_t i = 0; i < dst->nqueues && ok; i++) {
        const us_queue *s = &src->queues[i];
        us_queue *q = &dst->queues[i];
        q->name = dup_or_null(s->name, &ok);
        if (!s->npools) continue;
        if (!(q->pools = dup_array(s->pools, s->npools, sizeof *q->pools))) goto fail;
        for (size_t k = 0; k < s->npools; k++) q->pools[k].pool = NULL;
        q->npools = s->npools;
        for (size_t k = 0; k < s->npools; k++) q->pools[k].pool = dup_or_null(s->pools[k].pool, &ok);
    }
    for (size_t i = 0; i < dst->nworkloads && ok; i++) {
        const us_workload *s = &src->workloads[i];
        us_workload *w = &dst->workloads[i];
        w->name = dup_or_null(s->name, &ok);
        w->pool = dup_or_null(s->pool, &ok);
        w->last_status = dup_or_null(s->last_status, &ok);
        if (us_labels_copy(&w->node_selector, &s->node_selector) < 0 ||
            us_labels_copy(&w->labels, &s->labels) < 0 ||
            us_tolerations_copy(&w->tolerations, &s->tolerations) < 0)
            ok = false;
    }
    for (size_t i = 0; i < dst->npods && ok; i++)
        dst->pods[i].name = dup_or_null(src->pods[i].name, &ok);
    if (ok) return 0;
fail:
    us_state_free(dst);
    return -1;
}

int us_grow(void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, ncap * elem);
    if (!p) return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

int us_state_node_index(const us_state *st, const char *name) {
    for (size_t i = 0; i < st->nnodes; i++)
        if (strcmp(st->nodes[i].name, name) == 0) return (int)i;
    return -1;
}

void us_state_queues_renumbered(us_state *st) { st->qnamed = 0; }

/* The name index covers every queue: the ones appended since are added,
 * a voided or half-full one is rebuilt.  false when memory runs out. */
static bool queue_names_sync(us_state *st) {
    if (st->qnamed > st->nqueues) st->qnamed = 0;
    if (st->qnamed == 0 || 2 * st->nqueues + 2 > st->qcap) {
        size_t cap = 16;
        while (cap < 4 * st->nqueues + 4) cap *= 2;
        if (cap != st->qcap) {
            int *slot = malloc(cap * sizeof *slot);
            if (!slot) return false;
            free(st->qslot);
            st->qslot = slot;
            st->qcap = cap;
        }
        memset(st->qslot, 0xff, st->qcap * sizeof *st->qslot); /* all -1 */
        st->qnamed = 0;
    }
    for (; st->qnamed < st->nqueues; st->qnamed++) {
        size_t k = us_name_hash(st->queues[st->qnamed].name) & (st->qcap - 1);
        while (st->qslot[k] >= 0) k = (k + 1) & (st->qcap - 1);
        st->qslot[k] = (int)st->qnamed;
    }
    return true;
}

int us_state_queue_index(const us_state *cst, const char *name) {
    us_state *st = (us_state *)cst; /* the index is a cache (see state.h) */
    if (!queue_names_sync(st)) {
        for (size_t i = 0; i < st->nqueues; i++)
            if (strcmp(st->queues[i].name, name) == 0) return (int)i;
        return -1;
    }
    for (size_t k = us_name_hash(name) & (st->qcap - 1); st->qslot[k] >= 0; k = (k + 1) & (st->qcap - 1))
        if (strcmp(st->queues[st->qslot[k]].name, name) == 0) return st->qslot[k];
    return -1;
}

int us_state_workload_index(const us_state *st, const char *name) {
    for (size_t i = 0; i < st->nworkloads; i++)
        if (strcmp(st->workloads[i].name, name) == 0) return (int)i;
    return -1;
}

/* Engines share it: versions never repeat in the process. */
static _Atomic uint64_t last_version;

void us_state_nodes_changed(us_state *st) {
    st->nodes_version = atomic_fetch_add(&last_version, 1) + 1;
    us_state_node_specs_changed(st);
}

void us_state_node_specs_changed(us_state *st) {
    st->node_specs_version = atomic_fetch_add(&last_version, 1) + 1;
}

int us_state_add_node(us_state *st, us_node *n) {
    if (us_grow((void **)&st->nodes, &st->cap_nodes, st->nnodes, sizeof *n) < 0) {
        us_node_free(n);
        return -1;
    }
    us_state_nodes_changed(st);
    st->nodes[st->nnodes] = *n;
    return (int)st->nnodes++;
}

int us_state_add_queue(us_state *st, us_queue *q) {
    if (us_grow((void **)&st->queues, &st->cap_queues, st->nqueues, sizeof *q) < 0) {
        us_queue_free(q);
        return -1;
    }
    st->queues[st->nqueues] = *q;
    return (int)st->nqueues++;
}

int us_state_add_workload(us_state *st, us_workload *w) {
    if (us_grow((void **)&st->workloads, &st->cap_workloads, st->nworkloads, sizeof *w) < 0) {
        us_workload_free(w);
        return -1;
    }
    st->workloads[st->nworkloads] = *w;
    st->workloads[st->nworkloads].npods = 0;  /* its pods come with us_state_add_pod */
    return (int)st->nworkloads++;
}

/* ---- the journal of changed pods ---------------------------------------- */

/* Drop every entry; the pods they name forget theirs. */
static void journal_drop(us_state *st) {
    for (size_t k = 0; k < st->njournal; k++)
        if (st->journal[k].pod >= 0 && (size_t)st->journal[k].pod < st->npods)
            st->pods[st->journal[k].pod].journal = 0;
    st->njournal = 0;
}

/* Entries of pods that left stay until the next read: a journal far longer
 * than the pods is given up rather than kept growing.  A state no ledger
 * has counted yet (pods_version 0: loading) keeps no journal. */
static void journal_add(us_state *st, us_pod *p, us_pod_was was) {
    /* no ledger follows a state with no pods version yet (one loading) */
    if (!st->pods_version || st->journal_lost || p->journal) return;
    if (st->njournal > 2 * st->npods + 1024 || st->njournal >= INT_MAX ||
        us_grow((void **)&st->journal, &st->cap_journal, st->njournal, sizeof *st->journal) < 0) {
        journal_drop(st);
        st->journal_lost = true;
        st->release_version = 0;  /* a pod changed that no fold will see */
        return;
    }
    st->journal[st->njournal++] = was;
    p->journal = (int)st->njournal;
}

/* p recorded as it was, while watching (us_state.watch). */
static void watch_add(us_state *st, us_pod *p, us_pod_was was) {
    if (!st->watching || p->watched || st->watch_lost) return;
    if (us_grow((void **)&st->watch, &st->cap_watch, st->nwatch, sizeof *st->watch) < 0) {
        st->watch_lost = true;
        return;
    }
    st->watch[st->nwatch++] = was;
    p->watched = true;
}

void us_state_watch_start(us_state *st) {
    for (size_t k = 0; k < st->nwatch; k++)
        if (st->watch[k].pod >= 0 && (size_t)st->watch[k].pod < st->npods) st->pods[st->watch[k].pod].watched = false;
    st->nwatch = 0;
    st->watching = true;
    st->watch_lost = false;
}

void us_state_watch_stop(us_state *st) { st->watching = false; }

void us_pod_touch(us_state *st, us_pod *p) {
    if (st->watching && !p->watched)
        watch_add(st, p, (us_pod_was){(int)(p - st->pods), p->workload, p->node, p->shared_dev, p->state,
                                      p->gone, p->named});
    if (p->journal) return;
    journal_add(st, p, (us_pod_was){(int)(p - st->pods), p->workload, p->node, p->shared_dev, p->state,
                                    p->gone, p->named});
}

void us_pod_go(us_state *st, us_pod *p) {
    if (p->gone) return;
    us_pod_touch(st, p);
    p->gone = true;
    st->ngone++;
    st->workloads[p->workload].ngone++;
}

/* Pod i listed among the pods passing through, unless it is (its flag) or
 * does not pass. */
static void passing_note(us_state *st, size_t i) {
    us_pod *p = &st->pods[i];
    if (p->passing || !us_pod_passes(p)) return;
    if (us_grow((void **)&st->passing, &st->cap_passing, st->npassing, sizeof *st->passing) < 0) {
        st->release_version = 0;  /* not listed: not known until the next pass */
        return;
    }
    st->passing[st->npassing++] = (int)i;
    p->passing = true;
}

void us_state_passing_restart(us_state *st) { st->npassing = 0; }

void us_state_passing_relist(us_state *st, size_t i) {
    st->pods[i].passing = false;
    passing_note(st, i);
}

void us_state_fold_releases(us_state *st) {
    for (size_t k = 0; k < st->njournal; k++) {
        int i = st->journal[k].pod;
        if (i < 0 || (size_t)i >= st->npods) continue;
        const us_pod *p = &st->pods[i];
        if (!p->gone && p->state == US_POD_RELEASING && p->release_at < st->next_release)
            st->next_release = p->release_at;
        passing_note(st, (size_t)i);
    }
}

const int *us_state_passing(us_state *st, size_t *n) {
    *n = 0;
    if (us_state_next_release(st) == -INFINITY) return NULL;  /* folds the journal */
    size_t k = 0;
    for (size_t j = 0; j < st->npassing; j++) {
        us_pod *p = &st->pods[st->passing[j]];
        if (us_pod_passes(p)) st->passing[k++] = st->passing[j];
        else p->passing = false;
    }
    st->npassing = *n = k;
    return st->passing;
}

/* ---- the log of changed pods -------------------------------------------- */

void us_state_changes_gap(us_state *st) {
    st->changes_start += st->nchanges + 1;
    st->nchanges = 0;
}

void us_state_changes_on(us_state *st) {
    if (st->logging_changes) return;
    us_state_changes_gap(st);
    st->logging_changes = true;
}

const int *us_state_changes_since(const us_state *st, uint64_t from, size_t *n) {
    *n = 0;
    if (!st->logging_changes || from < st->changes_start || from > us_state_changes_end(st))
        return NULL;
    static const int none[1];  /* an empty log: a pointer, not NULL (void) */
    *n = (size_t)(us_state_changes_end(st) - from);
    return st->changes ? st->changes + (from - st->changes_start) : none;
}

void us_state_changes_trim(us_state *st, uint64_t upto) {
    if (upto <= st->changes_start) return;
    if (upto >= us_state_changes_end(st)) upto = us_state_changes_end(st);
    size_t drop = (size_t)(upto - st->changes_start);
    memmove(st->changes, st->changes + drop, (st->nchanges - drop) * sizeof *st->changes);
    st->nchanges -= drop;
    st->changes_start = upto;
}

/* The journal's pods go into the log (read before the journal is
 * dropped).  A log longer than the pods twice over is one no reader
 * followed: a gap, so that it never grows without bound. */
static void changes_log(us_state *st) {
    if (!st->logging_changes) return;
    if (st->journal_lost || st->nchanges > 2 * st->npods + 1024) {
        us_state_changes_gap(st);
        if (st->journal_lost) return;
    }
    for (size_t k = 0; k < st->njournal; k++) {
        if (st->journal[k].pod < 0) continue;  /* it left the array: nothing to read */
        if (us_grow((void **)&st->changes, &st->cap_changes, st->nchanges, sizeof *st->changes) < 0) {
            us_state_changes_gap(st);
            return;
        }
        st->changes[st->nchanges++] = st->journal[k].pod;
    }
}

void us_state_journal_clear(us_state *st) {
    changes_log(st);
    us_state_fold_releases(st);
    journal_drop(st);
    st->journal_lost = false;
}

void us_state_pods_renumbered(us_state *st) {
    static _Atomic uint64_t last;  /* engines share it: versions never repeat */
    journal_drop(st);
    st->journal_lost = false;
    st->pods_version = atomic_fetch_add(&last, 1) + 1;
}

int us_state_add_pod(us_state *st, int w, const char *name, int pin) {
    if (us_grow((void **)&st->pods, &st->cap_pods, st->npods, sizeof *st->pods) < 0) return -1;
    char *copy = strdup(name);
    if (!copy) return -1;
    us_pod *p = &st->pods[st->npods];
    memset(p, 0, sizeof *p);
    p->name = copy;
    p->workload = w;
    p->node = -1;
    p->pin = pin;
    p->state = US_POD_PENDING;
    p->shared_dev = -1;
    p->seq = st->next_seq++;
    st->workloads[w].npods++;
    /* appended: it was nothing before */
    int i = (int)st->npods++;
    us_pod_was nothing = {i, w, -1, -1, US_POD_PENDING, true, false};
    journal_add(st, p, nothing);
    watch_add(st, p, nothing);
    return i;
}

/* Depths in one pass over the tree: a queue's walk up stops at the first
 * queue whose depth is known, then a second walk writes the depths along
 * the way, so every queue is walked over a bounded number of times (a
 * chain 100,000 deep is linear, not quadratic). */
void us_state_derive_queues(us_state *st) {
    size_t n = st->nqueues;
    for (size_t i = 0; i < n; i++) {
        st->queues[i].leaf = true;
        st->queues[i].depth = -1;
    }
    for (size_t i = 0; i < n; i++) {
        us_queue *q = &st->queues[i];
        if (q->parent >= 0) st->queues[q->parent].leaf = false;
        int steps = 0, base = 0, p;
        /* bounded walk: the loader rejects cycles, but never trust a loop */
        for (p = (int)i; p >= 0 && st->queues[p].depth < 0 && steps <= (int)n; p = st->queues[p].parent)
            steps++;
        if (p >= 0) base = st->queues[p].depth + 1;
        for (int k = (int)i, d = base + steps - 1; k >= 0 && st->queues[k].depth < 0 && d >= base;
             k = st->queues[k].parent, d--)
            st->queues[k].depth = d;
    }
}

us_qres us_queue_res(const us_queue *q, const char *pool, int r) {
    for (size_t i = 0; i < q->npools; i++)
        if (strcmp(q->pools[i].pool, pool) == 0 && q->pools[i].set[r]) return q->pools[i].res[r];
    return q->res[r];
}

/* A queue "has quota" on a pool when any resource's quota is non-zero
 * (unlimited counts) or its over-quota weight is non-zero. */
static bool queue_entitled(const us_queue *q, const char *pool) {
    for (int r = 0; r < US_NRES; r++) {
        us_qres x = us_queue_res(q, pool, r);
        if (x.quota != 0 || x.over_quota_weight != 0) return true;
    }
    return false;
}

void us_state_check_rules(us_state *st) { us_state_check_rules_from(st, 0); }

void us_state_check_rules_from(us_state *st, size_t first) {
    for (size_t i = first; i < st->nworkloads; i++) {
        us_workload *w = &st->workloads[i];
        const char *label = us_labels_get(&w->labels, US_BACKGROUND_LABEL);
        w->blocked = NULL;
        if (w->external) continue; /* not ours to schedule: no rule of ours applies */
        /* only "true" marks background work and only "false" AI work: a
         * typo ("True", "yes") must not turn burn-in into AI work that
         * reclaims from real teams, so it is never scheduled */
        if (label && strcmp(label, "true") != 0 && strcmp(label, "false") != 0) {
            w->blocked = us_background_label_blocked;
            continue;
        }
        if (!w->background) continue;
        if (w->preemptibility == US_NON_PREEMPTIBLE)
            w->blocked = "background workloads must be preemptible; this one is "
                         "non-preemptible, so it is never scheduled";
        else if (w->preemptibility == US_SEMI_PREEMPTIBLE)
            w->blocked = "background workloads must be preemptible; this one is "
                         "semi-preemptible, so it is never scheduled";
        else if (us_req_is_fractional(w->request))
            w->blocked = "background workloads must request whole GPUs; a fractional "
                         "GPU request is never scheduled";
        else if (w->queue >= 0 && queue_entitled(&st->queues[w->queue], w->pool))
            w->blocked = "background workloads must run in a queue with quota 0 and "
                         "over-quota weight 0 for every resource on their pool; this "
                         "queue has quota, so the workload is never scheduled";
    }
}

void us_state_compact_pods(us_state *st) {
    size_t j = 0;
    us_droplog_begin(&st->drops);
    us_state_passing_restart(st);  /* their places change: listed again */
    for (size_t i = 0; i < st->npods; i++) {
        if (st->pods[i].gone) {
            us_state_pod_dropped(st, i);
            continue;
        }
        if (j != i) {  /* nothing gone yet: no write */
            us_journal_moved(st, &st->pods[i], (long)j);
            st->pods[j] = st->pods[i];
        }
        us_state_passing_relist(st, j);
        if (st->pods[j].watched) st->pods[j].watched = false;  /* the record goes (below) */
        j++;
    }
    if (j != st->npods) st->generation++;
    us_droplog_end(&st->drops, j != st->npods, st->generation);
    /* the pods' record goes: its entries may name places that moved */
    st->nwatch = 0;
    if (st->watching) st->watch_lost = true;
    st->npods = j;
}

void us_state_pod_dropped(us_state *st, size_t i) {
    us_journal_moved(st, &st->pods[i], -1);
    us_droplog_add(&st->drops, i);
    us_state_pod_leaves(st, i);
    free(st->pods[i].name);
}

bool us_state_gone_counted(const us_state *st) {
    size_t ngone = 0;
    for (size_t i = 0; i < st->npods; i++) ngone += st->pods[i].gone;
    return ngone == st->ngone;
}

double us_state_next_release(us_state *st) {
    if (!st->pods_version || st->release_version != st->pods_version || st->journal_lost) return -INFINITY;
    us_state_fold_releases(st);
    return st->next_release;
}
