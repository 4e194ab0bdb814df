/*
 * nodeclass.c — equivalence classes of nodes and pods, and the score cache
 * keyed by them (see nodeclass.h).
 *
 * Node classes are found by the hash of the node's view (hashidx.h); each
 * class keeps a min-heap of member positions so that the first member by
 * name is found at once.  Members that left are dropped from the heap
 * lazily.  Pod classes (one per distinct pod view) are found by hash too,
 * and cached per workload: a cluster of many distinct pending jobs made a
 * scan of them quadratic.
 */
#include "nodeclass.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hashidx.h"
#include "nodelabels.h"


typedef struct nkey {
    const us_labels *labels;
    const us_taints *taints;  /* feasibility depends on them */
    us_res cap;
    int gpus;
    int cordon;
    us_use ai;
} nkey;

typedef struct nclass {
    nkey key;
    int count;         /* members now */
    int *heap, nheap, capheap;
} nclass;

/* What is cached for one (pod class, node class) pair. */
typedef struct cell {
    double score;      /* NAN: not scored */
} cell;

typedef struct pclass {
    us_res req;
    const us_labels *sel, *labels;
    const us_tolerations *tol;
    int priority, queue;
    bool background;
    cell *cells;       /* [ncells] what is known, by node class */
    int ncells;
} pclass;

struct us_classes {
    nclass *cls;
    int ncls, capcls;
    us_hashidx table;  /* node classes by their key's hash */
    int *node_class;   /* [nnodes] */
    int *live;         /* ids of the classes with members, ascending */
    int nlive, caplive;
    pclass *pcs;
    int npcs, cappcs;
    us_hashidx pc_table;  /* pod classes by their key's hash */
    int *wl_class;     /* [nworkloads]: pod class, or -1 not known yet */
};

/* ---- hashing ---------------------------------------------------------- */

/* The fixed part of a key (capacity and use: about 200 bytes, most of
 * them the zero shared-slot counts) a word at a time: hashing it byte by
 * byte was most of what joining a node to its class cost. */
static uint64_t hash_key(const nkey *k) {
    uint64_t h = us_hash_taints(us_hash_labels(US_HASH_SEED, k->labels), k->taints);
    /* the key is zero-filled before it is set, so padding hashes the same;
     * of the shared-slot counts only the node's own devices' are hashed
     * (equal keys have equal gpus, so they still hash the same), the rest
     * is compared by key_equal */
    h = us_hash_words(h, &k->cap, offsetof(nkey, ai.shared) - offsetof(nkey, cap));
    size_t slots = k->gpus > 0 && k->gpus <= US_MAX_GPUS ? (size_t)k->gpus : 0;
    h = us_hash_words(h, k->ai.shared, (slots + 3) / 4 * 4 * sizeof *k->ai.shared);
    return us_hash_finish(h);
}

static bool key_equal(const nkey *a, const nkey *b) {
    return us_labels_equal(a->labels, b->labels) && us_taints_equal(a->taints, b->taints) &&
           memcmp(&a->cap, &b->cap, sizeof *a - offsetof(nkey, cap)) == 0;
}

/* ---- node classes --------------------------------------------------------- */

static void make_key(const us_plan *p, int pos, nkey *k) {
    const us_node *n = &p->st->nodes[p->nodes[pos]];
    memset(k, 0, sizeof *k);
    k->labels = us_nodelabels_of(p->labels, (size_t)pos);
    k->taints = &n->taints;
    k->cap = n->cap;
    k->gpus = n->gpus;
    k->cordon = n->unschedulable;
    k->ai = p->ai[pos];
}

static bool class_is(int id, const void *key, void *ctx) {
    const us_classes *c = ctx;
    return key_equal(&c->cls[id].key, key);
}

/* The class of key k, created when new; -1 when memory runs out. */
static int class_of(us_classes *c, const nkey *k) {
    uint64_t h = hash_key(k);
    int id = us_hashidx_find(&c->table, h, class_is, k, c);
    if (id >= 0) return id;
    if (c->ncls == c->capcls) {
        int ncap = c->capcls ? c->capcls * 2 : 64;
        nclass *x = realloc(c->cls, (size_t)ncap * sizeof *x);
        if (!x) return -1;
        c->cls = x;
        c->capcls = ncap;
    }
    if (us_hashidx_add(&c->table, h, c->ncls) < 0) return -1;
    nclass *x = &c->cls[c->ncls];
    memset(x, 0, sizeof *x);
    x->key = *k;
    return c->ncls++;
}

static int heap_push(nclass *x, int pos) {
    if (x->nheap == x->capheap) {
        int ncap = x->capheap ? x->capheap * 2 : 8;
        int *h = realloc(x->heap, (size_t)ncap * sizeof *h);
        if (!h) return -1;
        x->heap = h;
        x->capheap = ncap;
    }
    int i = x->nheap++;
    while (i > 0 && x->heap[(i - 1) / 2] > pos) {
        x->heap[i] = x->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    x->heap[i] = pos;
    return 0;
}

static void heap_pop(nclass *x) {
    int last = x->heap[--x->nheap], i = 0;
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l >= x->nheap) break;
        m = (l + 1 < x->nheap && x->heap[l + 1] < x->heap[l]) ? l + 1 : l;
        if (x->heap[m] >= last) break;
        x->heap[i] = x->heap[m];
        i = m;
    }
    if (x->nheap > 0) x->heap[i] = last;
}

/* Where id is, or would go, in the live list (binary search). */
static int live_slot(const us_classes *c, int id) {
    int lo = 0, hi = c->nlive;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (c->live[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Kept sorted so candidates are offered in class order, as when every id
 * was scanned; a move costs O(live classes), which choosing a node for one
 * pod pays anyway. */
static int live_add(us_classes *c, int id) {
    if (c->nlive == c->caplive) {
        int ncap = c->caplive ? c->caplive * 2 : 64;
        int *x = realloc(c->live, (size_t)ncap * sizeof *x);
        if (!x) return -1;
        c->live = x;
        c->caplive = ncap;
    }
    int at = live_slot(c, id);
    memmove(c->live + at + 1, c->live + at, (size_t)(c->nlive - at) * sizeof *c->live);
    c->live[at] = id;
    c->nlive++;
    return 0;
}

static void live_remove(us_classes *c, int id) {
    int at = live_slot(c, id);
    if (at < c->nlive && c->live[at] == id) {
        memmove(c->live + at, c->live + at + 1, (size_t)(c->nlive - at - 1) * sizeof *c->live);
        c->nlive--;
    }
}

static int join(us_classes *c, const us_plan *p, int pos) {
    nkey k;
    make_key(p, pos, &k);
    int id = class_of(c, &k);
    if (id < 0) return -1;
    c->node_class[pos] = id;
    if (c->cls[id].count++ == 0 && live_add(c, id) < 0) return -1;
    return heap_push(&c->cls[id], pos);
}

us_classes *us_classes_new(const us_plan *p) {
    us_classes *c = calloc(1, sizeof *c);
    size_t nn = p->nnodes ? p->nnodes : 1, nw = p->st->nworkloads ? p->st->nworkloads : 1;
    if (!c) return NULL;
    c->node_class = malloc(nn * sizeof *c->node_class);
    c->wl_class = malloc(nw * sizeof *c->wl_class);
    if (!c->node_class || !c->wl_class) goto fail;
    for (size_t w = 0; w < nw; w++) c->wl_class[w] = -1;
    for (size_t pos = 0; pos < p->nnodes; pos++)
        if (join(c, p, (int)pos) < 0) goto fail;
    return c;
fail:
    us_classes_free(c);
    return NULL;
}

void us_classes_free(us_classes *c) {
    if (!c) return;
    for (int i = 0; i < c->ncls; i++) free(c->cls[i].heap);
    for (int i = 0; i < c->npcs; i++) {
        free(c->pcs[i].cells);
    }
    free(c->cls);
    us_hashidx_free(&c->table);
    free(c->node_class);
    free(c->live);
    free(c->pcs);
    us_hashidx_free(&c->pc_table);
    free(c->wl_class);
    free(c);
}

int us_classes_node_changed(us_classes *c, const us_plan *p, int pos) {
    int old = c->node_class[pos];
    /* its heap entry goes lazily */
    if (--c->cls[old].count == 0) live_remove(c, old);
    return join(c, p, pos);
}

const int *us_classes_live(const us_classes *c, int *n) {
    *n = c->nlive;
    return c->live;
}

int us_classes_first(us_classes *c, int id) {
    nclass *x = &c->cls[id];
    if (x->count == 0) return -1;
    while (x->nheap > 0 && c->node_class[x->heap[0]] != id) heap_pop(x);
    return x->nheap > 0 ? x->heap[0] : -1;
}

/* ---- pod classes and the score cache --------------------------------------- */

static uint64_t hash_pclass(const pclass *k) {
    uint64_t h = us_hash_words(US_HASH_SEED, &k->req, sizeof k->req);
    int ints[3] = {k->priority, k->queue, k->background};
    h = us_hash_words(h, ints, sizeof ints);
    h = us_hash_tolerations(us_hash_labels(us_hash_labels(h, k->sel), k->labels), k->tol);
    return us_hash_finish(h);
}

static bool pclass_is(int id, const void *key, void *ctx) {
    const pclass *x = &((const us_classes *)ctx)->pcs[id], *k = key;
    return memcmp(&x->req, &k->req, sizeof k->req) == 0 && x->priority == k->priority &&
           x->queue == k->queue && x->background == k->background && us_labels_equal(x->sel, k->sel) &&
           us_labels_equal(x->labels, k->labels) && us_tolerations_equal(x->tol, k->tol);
}

int us_classes_pod_class(us_classes *c, const us_plan *p, int pod) {
    int w = p->st->pods[pod].workload;
    if (c->wl_class[w] >= 0) return c->wl_class[w];
    const us_workload *wl = &p->st->workloads[w];
    pclass k = {wl->request, &wl->node_selector, &wl->labels, &wl->tolerations, wl->priority,
                wl->queue, wl->background, NULL, 0};
    uint64_t h = hash_pclass(&k);
    int id = us_hashidx_find(&c->pc_table, h, pclass_is, &k, c);
    if (id >= 0) return c->wl_class[w] = id;
    if (c->npcs == c->cappcs) {
        int ncap = c->cappcs ? c->cappcs * 2 : 16;
        pclass *x = realloc(c->pcs, (size_t)ncap * sizeof *x);
        if (!x) return -1;
        c->pcs = x;
        c->cappcs = ncap;
    }
    if (us_hashidx_add(&c->pc_table, h, c->npcs) < 0) return -1;
    c->pcs[c->npcs] = k;
    return c->wl_class[w] = c->npcs++;
}

/* The cell of (pc, nc), growing the pod class's row to hold it; NULL when
 * memory runs out. */
static cell *cell_at(us_classes *c, int pc, int nc) {
    pclass *x = &c->pcs[pc];
    if (nc >= x->ncells) {
        int n = c->capcls > nc ? c->capcls : nc + 1;
        cell *g = realloc(x->cells, (size_t)n * sizeof *g);
        if (!g) return NULL;
        for (int i = x->ncells; i < n; i++) g[i] = (cell){NAN};
        x->cells = g;
        x->ncells = n;
    }
    return &x->cells[nc];
}

bool us_classes_score(us_classes *c, int pc, int nc, double *score) {
    const pclass *x = &c->pcs[pc];
    if (nc >= x->ncells || isnan(x->cells[nc].score)) return false;
    *score = x->cells[nc].score;
    return true;
}

int us_classes_set_score(us_classes *c, int pc, int nc, double score) {
    cell *k = cell_at(c, pc, nc);
    if (!k) return -1;
    k->score = score;
    return 0;
}

void us_classes_clear_scores(us_classes *c) {
    for (int i = 0; i < c->npcs; i++)
        for (int j = 0; j < c->pcs[i].ncells; j++) c->pcs[i].cells[j].score = NAN;
}
