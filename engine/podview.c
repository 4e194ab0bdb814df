/*
 * podview.c — what a pool's snapshot reads from the pods, kept and
 * followed through the log of changed pods (podview.h).
 */
#include "podview.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cycle.h"
#include "plan.h"

uint8_t us_pv_wkind(const us_workload *w, bool mine) {
    bool active = w->state == US_WL_ACTIVE && !w->blocked;
    uint8_t k = 0;
    if (mine) k |= US_PVW_OWN;
    if (mine && active && !w->background && !w->external) k |= US_PVW_AI;
    if (mine && active && w->background) k |= US_PVW_BG;
    if (w->external || (w->blocked && w->state == US_WL_ACTIVE)) k |= US_PVW_FIXED;
    if (w->background) k |= US_PVW_BACKGROUND;
    return k;
}

/* What pod i adds to the pool's snapshot, and the position of its node
 * (-1 when it holds no room on one): the rule of virtual eviction and of
 * everything the snapshot gathers for the phases after it (plan.h).
 * Pods nothing may move keep their room in the AI view (an external
 * workload's, or running pods of work that breaks a rule: nothing evicts
 * them), in no queue: planning through them would pipeline onto room that
 * never frees (found by tests/fuzz/fuzz_scenario, and for background work
 * by tests/fuzz/fuzz_api).  A terminating pod holds none in the AI view and is
 * no victim: its node is still empty for AI. */
static uint16_t rec_of(const us_podview_in *in, size_t i, int *at) {
    const us_pod *pd = &in->st->pods[i];
    *at = -1;
    if (pd->gone) return 0;  /* left: holds nothing, wants nothing */
    uint8_t k = in->wkind[pd->workload];
    int pos = pd->node >= 0 ? in->pos[pd->node] : -1;
    bool here = pos >= 0;
    if (!(k & US_PVW_OWN) && !here) return 0;
    bool run = pd->state == US_POD_RUNNING, pipe = pd->state == US_POD_PIPELINED;
    bool pend = pd->state == US_POD_PENDING, rel = pd->state == US_POD_RELEASING;
    uint16_t r = US_PV_READ;
    bool in_view;
    if (k & US_PVW_AI) {
        in_view = (run || pipe) && here;
        if (in_view) r |= US_PV_HELD;
        if (run || pipe || pend) r |= US_PV_WANTED;
    } else {
        in_view = (k & US_PVW_FIXED) && (run || pipe) && here;
    }
    if (in_view) r |= US_PV_VIEW;
    if (rel) r |= US_PV_TERMW;
    bool placeable = pend && !(in->reported_pods && !pd->named);  /* us_cycle_may_place */
    if (placeable) r |= US_PV_PEND;
    if (here && (run || pipe || rel)) {
        r |= US_PV_AT;
        *at = pos;
        bool bg = k & US_PVW_BACKGROUND;
        if (in_view || (!bg && (run || pipe))) r |= US_PV_KAI;
        else if (run && bg) r |= US_PV_KBG;
    }
    if (here && rel) r |= US_PV_TLIST;
    if (k & US_PVW_BG) {
        if (run && here) r |= US_PV_BGRUN;
        else if (placeable) r |= US_PV_BGPEND;
    }
    return r;
}

static void kind_of_node(us_podview *v, int at) {
    v->node_kind[at] = (uint8_t)((v->nk_ai[at] > 0 ? US_NODE_HOLDS_AI : 0) |
                                 (v->nk_bg[at] > 0 ? US_NODE_RUNS_BG : 0));
}

/* Pod i (of workload w) with r at `at` counted in (sign 1) or out (-1). */
static void count(us_podview *v, int i, int w, uint16_t r, int at, int sign) {
    if (r & US_PV_WANTED) v->wanted[w] += sign;
    if (r & US_PV_HELD) v->held[w] += sign;
    if (r & US_PV_TERMW) v->terminating[w] += sign;
    if (r & US_PV_KAI) v->nk_ai[at] += sign;
    if (r & US_PV_KBG) v->nk_bg[at] += sign;
    if (r && sign > 0) {
        if (i < v->first[w]) v->first[w] = i;
        if (i > v->last[w]) v->last[w] = i;
    }
}

/* The lists a pod with r (of workload w, at `at`) is in: up to 5. */
static size_t lists_of(const us_podview *v, int w, uint16_t r, int at, size_t *out) {
    size_t n = 0;
    if (r & US_PV_PEND) out[n++] = us_pv_pending_list(v, (size_t)w);
    if (r & US_PV_AT) out[n++] = US_PVL_NODES + (size_t)at;
    if (r & US_PV_TLIST) out[n++] = US_PVL_TERMINATING;
    if (r & US_PV_BGRUN) out[n++] = US_PVL_BG_RUNNING;
    if (r & US_PV_BGPEND) out[n++] = US_PVL_BG_PENDING;
    return n;
}

static void lists_free(us_podview *v) {
    for (size_t k = 0; v->lists && k < v->nlists; k++)
        if (v->lists[k].own) free(v->lists[k].v);
    free(v->lists);
    free(v->block);
    v->lists = NULL;
    v->block = NULL;
    v->nlists = 0;
}

/* What an update keeps: its scratch (all zero between updates) */
static void scratch_free(us_podview *v) {
    free(v->ops);
    free(v->grouped);
    free(v->nop);
    free(v->touched);
    free(v->marks);
    free(v->changed);
}

/* Everything but the scratch. */
static void record_free(us_podview *v) {
    lists_free(v);
    free(v->rec);
    free(v->at);
    free(v->wkind);
    free(v->held);
    free(v->wanted);
    free(v->terminating);
    free(v->first);
    free(v->last);
    free(v->nk_ai);
    free(v->nk_bg);
    free(v->node_kind);
}

void us_podview_free(us_podview *v) {
    record_free(v);
    scratch_free(v);
    memset(v, 0, sizeof *v);
}

/* Room for `need` entries in list l (its own allocation from then on). */
static int list_reserve(us_pv_list *l, size_t need) {
    if ((size_t)l->cap >= need) return 0;
    size_t cap = need > 2 * (size_t)l->cap ? need : 2 * (size_t)l->cap;
    if (cap < 4) cap = 4;
    if (cap > INT32_MAX) return -1;
    int *nv = malloc(cap * sizeof *nv);
    if (!nv) return -1;
    if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof *nv);
    if (l->own) free(l->v);
    l->v = nv;
    l->cap = (int)cap;
    l->own = true;
    return 0;
}

/* Every pod of the pool read afresh: what the snapshot's pass over them
 * made.  0, -1 (memory: v empty but for its scratch). */
static int rebuild(us_podview *v, const us_podview_in *in) {
    us_state *st = in->st;
    record_free(v);
    size_t np = st->npods ? st->npods : 1, nw = st->nworkloads ? st->nworkloads : 1;
    size_t nn = in->nnodes ? in->nnodes : 1;
    v->valid = false;
    v->nnodes = in->nnodes;
    v->nworkloads = st->nworkloads;
    v->cap_workloads = nw;
    v->npods = st->npods;
    v->cap_pods = np;
    v->nlists = US_PVL_NODES + in->nnodes + st->nworkloads;
    v->rec = calloc(np, sizeof *v->rec);
    v->at = malloc(np * sizeof *v->at);  /* read only where rec has US_PV_AT */
    v->wkind = malloc(nw * sizeof *v->wkind);
    v->held = calloc(nw, sizeof *v->held);
    v->wanted = calloc(nw, sizeof *v->wanted);
    v->terminating = calloc(nw, sizeof *v->terminating);
    v->first = malloc(nw * sizeof *v->first);
    v->last = malloc(nw * sizeof *v->last);
    v->nk_ai = calloc(nn, sizeof *v->nk_ai);
    v->nk_bg = calloc(nn, sizeof *v->nk_bg);
    v->node_kind = calloc(nn, sizeof *v->node_kind);
    v->lists = calloc(v->nlists, sizeof *v->lists);
    if (!v->rec || !v->at || !v->wkind || !v->held || !v->wanted || !v->terminating ||
        !v->first || !v->last || !v->nk_ai || !v->nk_bg || !v->node_kind || !v->lists) {
        record_free(v);
        return -1;
    }
    for (size_t w = 0; w < st->nworkloads; w++) {
        v->first[w] = INT32_MAX;
        v->last[w] = -1;
    }
    if (st->nworkloads) memcpy(v->wkind, in->wkind, st->nworkloads * sizeof *v->wkind);
    const us_pod_set *set = in->set;
    size_t nread = set ? set->n + (st->npods - set->from) : st->npods;
    /* counted, then filled, through a plain array of offsets per list:
     * the passes touch lists at random, and 4 bytes a list stay in cache
     * where a list's whole record would not */
    int *fill = calloc(v->nlists + 1, sizeof *fill);
    if (!fill) {
        record_free(v);
        return -1;
    }
    size_t total = 0, ids[5];
    for (size_t x = 0; x < nread; x++) {
        size_t i = us_pod_set_at(set, x);
        int at;
        uint16_t r = rec_of(in, i, &at);
        v->rec[i] = r;
        if (!r) continue;
        const us_pod *pd = &st->pods[i];
        int w = pd->workload;
        v->at[i] = at;
        count(v, (int)i, w, r, at, 1);
        if (in->ai && (r & US_PV_VIEW))
            us_usesum_add(in->ai, (size_t)at, &st->nodes[pd->node], st->workloads[w].request,
                          pd->shared_dev);
        else if (in->bg_total && (r & US_PV_BGRUN))  /* saturated: kept so, as every sum here */
            (void)us_bg_total_add(&in->bg_total[at], st->workloads[w].request, 1);
        size_t n = lists_of(v, w, r, at, ids);
        for (size_t k = 0; k < n; k++) fill[ids[k]]++;
        total += n;
    }
    v->read = nread;
    v->block = malloc((total ? total : 1) * sizeof *v->block);
    if (!v->block || total > INT32_MAX) {
        free(fill);
        record_free(v);
        return -1;
    }
    int off = 0;
    for (size_t k = 0; k < v->nlists; k++) {
        v->lists[k].v = v->block + off;
        v->lists[k].n = v->lists[k].cap = fill[k];
        fill[k] = off;
        off += v->lists[k].cap;
    }
    /* the lists filled in pod order; only a pending pod's list needs its
     * workload, read again for those alone */
    for (size_t x = 0; x < nread; x++) {
        size_t i = us_pod_set_at(set, x);
        uint16_t r = v->rec[i];
        if (!(r & (US_PV_PEND | US_PV_AT | US_PV_TLIST | US_PV_BGRUN | US_PV_BGPEND))) continue;
        int w = r & US_PV_PEND ? st->pods[i].workload : 0;
        size_t n = lists_of(v, w, r, v->at[i], ids);
        for (size_t k = 0; k < n; k++) v->block[fill[ids[k]]++] = (int)i;
    }
    free(fill);
    for (size_t k = 0; k < in->nnodes; k++) kind_of_node(v, (int)k);
    v->rebuilt = true;
    return 0;
}

typedef struct us_pv_op {
    int list, pod, sign;
} op;

static int push_op(us_podview *v, size_t list, int pod, int sign) {
    size_t cap = v->cap_ops;
    if (us_grow((void **)&v->ops, &cap, v->nops, sizeof(op)) < 0) return -1;
    v->cap_ops = cap;
    v->ops[v->nops++] = (op){(int)list, pod, sign};
    return 0;
}

/* Ops (ascending by pod, for one list, each pod once) applied to l in
 * place: the pods taken out close up from the first of them, the pods
 * put in are merged from the end back, so that a list changed near its
 * end (pods appended since) moves only its tail.  0; -1 memory; -2 when
 * a pod taken out is not in it, or one put in already is. */
static int apply_list(us_pv_list *l, const op *ops, size_t n) {
    size_t ins = 0;
    for (size_t j = 0; j < n; j++) ins += ops[j].sign > 0;
    size_t rem = n - ins;
    if (rem) {
        size_t j = 0;
        while (ops[j].sign > 0) j++;
        /* the first pod taken out: a binary search */
        size_t lo = 0, hi = (size_t)l->n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (l->v[mid] < ops[j].pod) lo = mid + 1;
            else hi = mid;
        }
        size_t k = lo, taken = 0;
        for (size_t i = lo; i < (size_t)l->n; i++) {
            while (j < n && (ops[j].sign > 0 || ops[j].pod < l->v[i])) j++;
            if (j < n && ops[j].pod == l->v[i]) {
                taken++;
                j++;
                continue;
            }
            l->v[k++] = l->v[i];
        }
        if (taken != rem) return -2;
        l->n = (int)k;
    }
    if (ins) {
        if (list_reserve(l, (size_t)l->n + ins) < 0) return -1;
        long i = l->n - 1, k = (long)(l->n + (int)ins) - 1, j = (long)n - 1;
        while (j >= 0) {
            if (ops[j].sign < 0) {
                j--;
                continue;
            }
            if (i >= 0 && l->v[i] == ops[j].pod) return -2;
            if (i >= 0 && l->v[i] > ops[j].pod) l->v[k--] = l->v[i--];
            else l->v[k--] = ops[j--].pod;
        }
        l->n += (int)ins;
    }
    return 0;
}

/* Room for the pods and workloads added since the last update: new pods
 * are read as changed, new workloads have nothing yet. */
static int grow(us_podview *v, const us_state *st) {
    if (st->npods > v->cap_pods) {
        size_t cap = st->npods * 2;
        uint16_t *r = realloc(v->rec, cap * sizeof *r);
        if (!r) return -1;
        v->rec = r;
        int *a = realloc(v->at, cap * sizeof *a);
        if (!a) return -1;
        v->at = a;
        v->cap_pods = cap;
    }
    if (st->npods > v->npods) memset(v->rec + v->npods, 0, (st->npods - v->npods) * sizeof *v->rec);
    v->npods = st->npods;
    if (st->nworkloads > v->cap_workloads) {
        size_t cap = st->nworkloads * 2;
        uint8_t *k = realloc(v->wkind, cap * sizeof *k);
        if (!k) return -1;
        v->wkind = k;
        int **arrs[] = {&v->held, &v->wanted, &v->terminating, &v->first, &v->last};
        for (size_t a = 0; a < sizeof arrs / sizeof *arrs; a++) {
            int *x = realloc(*arrs[a], cap * sizeof *x);
            if (!x) return -1;
            *arrs[a] = x;
        }
        v->cap_workloads = cap;
    }
    size_t added = st->nworkloads - v->nworkloads;
    if (added) {
        size_t nlists = US_PVL_NODES + v->nnodes + st->nworkloads;
        us_pv_list *l = realloc(v->lists, nlists * sizeof *l);
        if (!l) return -1;
        memset(l + v->nlists, 0, (nlists - v->nlists) * sizeof *l);
        v->lists = l;
        v->nlists = nlists;
        memset(v->wkind + v->nworkloads, 0, added * sizeof *v->wkind);
        memset(v->held + v->nworkloads, 0, added * sizeof *v->held);
        memset(v->wanted + v->nworkloads, 0, added * sizeof *v->wanted);
        memset(v->terminating + v->nworkloads, 0, added * sizeof *v->terminating);
        for (size_t w = v->nworkloads; w < st->nworkloads; w++) {
            v->first[w] = INT32_MAX;
            v->last[w] = -1;
        }
        v->nworkloads = st->nworkloads;
    }
    return 0;
}

static void mark(uint64_t *marks, int i) { marks[(size_t)i / 64] |= (uint64_t)1 << ((size_t)i % 64); }

static int by_first(const void *a, const void *b) {
    const int *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* The pods to read again, ascending, each once, into v->changed (*n):
 * those the log names since the last update, those in the journal now,
 * those appended, and the pods read of each workload whose kind changed
 * (found in its span).  0; 1 when they are too many to follow (more than
 * a quarter of the pods: a rebuild reads fewer bytes); -1 memory. */
static int changed_pods(us_podview *v, const us_podview_in *in, const int *logged, size_t nlogged,
                        size_t old_npods, size_t *n) {
    us_state *st = in->st;
    size_t limit = st->npods / 4 + 64, nwords = (st->npods + 63) / 64;
    size_t want = nlogged + st->njournal + (st->npods - old_npods);
    if (want > limit) return 1;
    /* the spans of the workloads whose kind changed, merged */
    int *spans = NULL;
    size_t nspans = 0, cap_spans = 0, spanned = 0;
    for (size_t w = 0; w < v->nworkloads; w++) {
        if (v->wkind[w] == in->wkind[w] || v->first[w] > v->last[w]) continue;
        if (us_grow((void **)&spans, &cap_spans, nspans, 2 * sizeof *spans) < 0) {
            free(spans);
            return -1;
        }
        spans[2 * nspans] = v->first[w];
        spans[2 * nspans + 1] = v->last[w];
        nspans++;
    }
    if (nspans) qsort(spans, nspans, 2 * sizeof *spans, by_first);
    size_t m = 0;
    for (size_t k = 0; k < nspans; k++) {
        if (m && spans[2 * k] <= spans[2 * (m - 1) + 1] + 1) {
            if (spans[2 * k + 1] > spans[2 * (m - 1) + 1]) spans[2 * (m - 1) + 1] = spans[2 * k + 1];
            continue;
        }
        spans[2 * m] = spans[2 * k];
        spans[2 * m + 1] = spans[2 * k + 1];
        m++;
    }
    for (size_t k = 0; k < m; k++) spanned += (size_t)(spans[2 * k + 1] - spans[2 * k] + 1);
    if (want + spanned > limit) {
        free(spans);
        return 1;
    }
    if (v->cap_marks < nwords + 1) {
        uint64_t *mk = realloc(v->marks, (nwords + 1) * sizeof *mk);
        if (!mk) {
            free(spans);
            return -1;
        }
        memset(mk + v->cap_marks, 0, (nwords + 1 - v->cap_marks) * sizeof *mk);
        v->marks = mk;
        v->cap_marks = nwords + 1;
    }
    size_t lo = SIZE_MAX, hi = 0, marked = 0;  /* words marked */
#define MARK(i)                                              \
    do {                                                     \
        size_t i_ = (size_t)(i);                             \
        mark(v->marks, (int)i_);                             \
        if (i_ / 64 < lo) lo = i_ / 64;                      \
        if (i_ / 64 > hi) hi = i_ / 64;                      \
        marked++;                                            \
    } while (0)
    for (size_t j = 0; j < nlogged; j++)
        if (logged[j] >= 0 && (size_t)logged[j] < st->npods) MARK(logged[j]);
    for (size_t j = 0; j < st->njournal; j++)
        if (st->journal[j].pod >= 0 && (size_t)st->journal[j].pod < st->npods) MARK(st->journal[j].pod);
    for (size_t i = old_npods; i < st->npods; i++) MARK(i);
    for (size_t k = 0; k < m; k++)
        for (size_t i = (size_t)spans[2 * k]; i <= (size_t)spans[2 * k + 1] && i < old_npods; i++)
            if (v->rec[i] && v->wkind[st->pods[i].workload] != in->wkind[st->pods[i].workload])
                MARK(i);
#undef MARK
    free(spans);
    size_t cap = v->cap_changed;
    if (marked > cap) {
        int *c = realloc(v->changed, marked * sizeof *c);
        if (!c) {
            memset(v->marks, 0, v->cap_marks * sizeof *v->marks);
            return -1;
        }
        v->changed = c;
        v->cap_changed = marked;
    }
    size_t u = 0;
    for (size_t wd = lo; marked && wd <= hi; wd++) {
        uint64_t bits = v->marks[wd];
        v->marks[wd] = 0;
        while (bits) {
            v->changed[u++] = (int)(wd * 64 + (size_t)__builtin_ctzll(bits));
            bits &= bits - 1;
        }
    }
    *n = u;
    return 0;
}

/* The ops grouped by list, each list's in the order pushed (pod order),
 * and applied: a counting sort over the lists met (nop is zero outside). */
static int apply_ops(us_podview *v) {
    if (!v->nops) return 0;
    if (v->cap_nop < v->nlists) {
        int *c = realloc(v->nop, v->nlists * sizeof *c);
        if (!c) return -1;
        memset(c + v->cap_nop, 0, (v->nlists - v->cap_nop) * sizeof *c);
        v->nop = c;
        v->cap_nop = v->nlists;
    }
    if (v->cap_grouped < v->nops) {
        op *g = realloc(v->grouped, v->nops * sizeof *g);
        int *t = realloc(v->touched, v->nops * sizeof *t);
        if (g) v->grouped = g;
        if (t) v->touched = t;
        if (!g || !t) return -1;
        v->cap_grouped = v->nops;
    }
    size_t ntouched = 0;
    for (size_t j = 0; j < v->nops; j++)
        if (v->nop[v->ops[j].list]++ == 0) v->touched[ntouched++] = v->ops[j].list;
    /* nop becomes each list's start in grouped, then its end */
    int off = 0;
    for (size_t t = 0; t < ntouched; t++) {
        int c = v->nop[v->touched[t]];
        v->nop[v->touched[t]] = off;
        off += c;
    }
    for (size_t j = 0; j < v->nops; j++) v->grouped[v->nop[v->ops[j].list]++] = v->ops[j];
    int rc = 0, from = 0;
    for (size_t t = 0; t < ntouched; t++) {
        int end = v->nop[v->touched[t]];
        v->nop[v->touched[t]] = 0;
        if (rc == 0) rc = apply_list(&v->lists[v->touched[t]], v->grouped + from, (size_t)(end - from));
        from = end;
    }
    v->nops = 0;
    return rc;
}

/* Follow the changes: each pod read again counted out as it was and in
 * as it is, its lists changed where they differ.  0; 1 when it cannot
 * follow (a rebuild is due); -1 memory; -2 when a list does not hold a pod
 * its record says it does (checking builds report it). */
static int follow(us_podview *v, const us_podview_in *in, const int *logged, size_t nlogged) {
    us_state *st = in->st;
    size_t old_npods = v->npods, nc;
    if (grow(v, st) < 0) return -1;
    int got = changed_pods(v, in, logged, nlogged, old_npods, &nc);
    if (got != 0) return got;
    v->nops = 0;
    size_t was_ids[5], is_ids[5];
    for (size_t j = 0; j < nc; j++) {
        int i = v->changed[j], at;
        uint16_t was = v->rec[i], is = rec_of(in, (size_t)i, &at);
        int was_at = (was & US_PV_AT) ? v->at[i] : -1;
        if (was == is && was_at == at) continue;
        int w = st->pods[i].workload;
        count(v, i, w, was, was_at, -1);
        count(v, i, w, is, at, 1);
        if (was_at >= 0) kind_of_node(v, was_at);
        if (at >= 0) kind_of_node(v, at);
        size_t nwas = lists_of(v, w, was, was_at, was_ids), nis = lists_of(v, w, is, at, is_ids);
        for (size_t a = 0; a < nwas; a++) {
            bool stays = false;
            for (size_t b = 0; b < nis && !stays; b++) stays = is_ids[b] == was_ids[a];
            if (!stays && push_op(v, was_ids[a], i, -1) < 0) return -1;
        }
        for (size_t b = 0; b < nis; b++) {
            bool stayed = false;
            for (size_t a = 0; a < nwas && !stayed; a++) stayed = is_ids[b] == was_ids[a];
            if (!stayed && push_op(v, is_ids[b], i, 1) < 0) return -1;
        }
        v->rec[i] = is;
        v->at[i] = at;
    }
    v->read = nc;
    if (v->nworkloads) memcpy(v->wkind, in->wkind, v->nworkloads * sizeof *v->wkind);
    return apply_ops(v);
}

#ifdef US_CHECK_INVARIANTS
/* Is v what reading every pod afresh gives?  1 yes, 0 no, -1 memory. */
static int same_as_read(const us_podview *v, const us_podview_in *in) {
    us_podview_in all = *in;
    all.set = NULL;
    all.ai = NULL;
    all.bg_total = NULL;
    us_podview fresh = {0};
    if (rebuild(&fresh, &all) < 0) return -1;
    const us_state *st = in->st;
    bool same = v->npods == fresh.npods && v->nworkloads == fresh.nworkloads &&
                v->nnodes == fresh.nnodes && v->nlists == fresh.nlists;
    for (size_t i = 0; same && i < st->npods; i++) {
        same = v->rec[i] == fresh.rec[i] && (!(v->rec[i] & US_PV_AT) || v->at[i] == fresh.at[i]);
        /* the span of its workload holds every pod read (the spans differ:
         * a followed one only widens) */
        int w = st->pods[i].workload;
        if (same && v->rec[i]) same = v->first[w] <= (int)i && (int)i <= v->last[w];
    }
    for (size_t w = 0; same && w < st->nworkloads; w++)
        same = v->wkind[w] == fresh.wkind[w] && v->held[w] == fresh.held[w] &&
               v->wanted[w] == fresh.wanted[w] && v->terminating[w] == fresh.terminating[w];
    for (size_t k = 0; same && k < v->nnodes; k++)
        same = v->nk_ai[k] == fresh.nk_ai[k] && v->nk_bg[k] == fresh.nk_bg[k] &&
               v->node_kind[k] == fresh.node_kind[k];
    for (size_t k = 0; same && k < v->nlists; k++)
        same = v->lists[k].n == fresh.lists[k].n &&
               (!v->lists[k].n ||
                memcmp(v->lists[k].v, fresh.lists[k].v, (size_t)v->lists[k].n * sizeof(int)) == 0);
    us_podview_free(&fresh);
    return same;
}
#endif

int us_podview_update(us_podview *v, const us_podview_in *in, const char **broken) {
    us_state *st = in->st;
    *broken = NULL;
    v->read = 0;
    v->rebuilt = false;
    if (in->keep) us_state_changes_on(st);
    size_t nlogged = 0;
    const int *logged = NULL;
    bool can = in->keep && v->valid && st->pods_version && v->pods_version == st->pods_version &&
               v->generation == st->generation && st->nodes_version &&
               v->nodes_version == st->nodes_version && v->nnodes == in->nnodes &&
               v->reported_pods == in->reported_pods && !st->journal_lost &&
               st->nworkloads >= v->nworkloads && st->npods >= v->npods &&
               (logged = us_state_changes_since(st, v->mark, &nlogged));
    int rc = can ? follow(v, in, logged, nlogged) : 1;
    if (rc == -2) {
        *broken = "invariant \"pod-view\" broken: a pod's record kept from the last snapshot "
                  "says it is in a list that does not hold it";
        us_podview_free(v);
        return -2;
    }
    bool followed = rc == 0;
    if (rc != 0 && rebuild(v, in) < 0) {
        us_podview_free(v);
        return -1;
    }
#ifdef US_CHECK_INVARIANTS
    if (followed) {
        int same = same_as_read(v, in);
        if (same < 0) {
            us_podview_free(v);
            return -1;
        }
        if (!same) {
            *broken = "invariant \"pod-view\" broken: what the pool's snapshot kept from the last "
                      "and followed through the pods changed since is not what reading every pod "
                      "gives (a write to a pod that skipped us_pod_touch, or a change the log "
                      "of changed pods missed?)";
            us_podview_free(v);
            return -2;
        }
    }
#else
    (void)followed;
#endif
    v->valid = in->keep;
    v->generation = st->generation;
    v->pods_version = st->pods_version;
    v->nodes_version = st->nodes_version;
    v->reported_pods = in->reported_pods;
    v->mark = us_state_changes_end(st);
    return 0;
}
