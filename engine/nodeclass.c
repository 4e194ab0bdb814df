/*
 * nodeclass.c — equivalence classes of nodes and pods, and the score cache
 * keyed by them (see nodeclass.h).
 *
 * Node classes live in an open-addressing hash table keyed by the node's
 * view; each class keeps a min-heap of member positions so that the first
 * member by name is found at once.  Members that left are dropped from the
 * heap lazily.  Pod classes are few (one per distinct pod view), found by a
 * short linear search and cached per workload.
 */
#include "nodeclass.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    uint64_t hash;
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
    int *table;        /* class id + 1, or 0 for empty */
    size_t tcap;
    int *node_class;   /* [nnodes] */
    int *live;         /* ids of the classes with members, ascending */
    int nlive, caplive;
    pclass *pcs;
    int npcs, cappcs;
    int *wl_class;     /* [nworkloads]: pod class, or -1 not known yet */
};

/* ---- hashing ---------------------------------------------------------- */

static uint64_t mix(uint64_t h, const void *data, size_t n) {
    const unsigned char *s = data;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t mix_str(uint64_t h, const char *s) { return mix(h, s, strlen(s) + 1); }

static uint64_t hash_labels(uint64_t h, const us_labels *l) {
    for (size_t i = 0; i < l->n; i++) h = mix_str(mix_str(h, l->items[i].key), l->items[i].value);
    return mix(h, &l->n, sizeof l->n);
}


static uint64_t hash_taints(uint64_t h, const us_taints *t) {
    for (size_t i = 0; i < t->n; i++)
        h = mix(mix_str(mix_str(h, t->items[i].key), t->items[i].value), &t->items[i].effect,
                sizeof t->items[i].effect);
    return mix(h, &t->n, sizeof t->n);
}

/* The fixed part of a key (capacity and use: about 200 bytes, most of
 * them the zero shared-slot counts) a word at a time: hashing it byte by
 * byte was most of what joining a node to its class cost.  The shift
 * folds high bits down, as the table's slot is the hash's low bits and
 * memory sizes differ only in high ones. */
static uint64_t mix_words(uint64_t h, const void *data, size_t n) {
    const unsigned char *s = data;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, sizeof w);
        h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 32;
    }
    return mix(h, s + i, n - i);
}

static uint64_t hash_key(const nkey *k) {
    uint64_t h = hash_taints(hash_labels(0xcbf29ce484222325ULL, k->labels), k->taints);
    /* the key is zero-filled before it is set, so padding hashes the same */
    h = mix_words(h, &k->cap, sizeof *k - offsetof(nkey, cap));
    /* MurmurHash3's finaliser: every bit of h reaches the low ones */
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    return h ^ (h >> 33);
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

static int grow_table(us_classes *c) {
    size_t ncap = c->tcap ? c->tcap * 2 : 256;
    int *t = calloc(ncap, sizeof *t);
    if (!t) return -1;
    for (int id = 0; id < c->ncls; id++) {
        size_t h = c->cls[id].hash & (ncap - 1);
        while (t[h]) h = (h + 1) & (ncap - 1);
        t[h] = id + 1;
    }
    free(c->table);
    c->table = t;
    c->tcap = ncap;
    return 0;
}

/* The class of key k, created when new; -1 when memory runs out. */
static int class_of(us_classes *c, const nkey *k) {
    uint64_t h = hash_key(k);
    if ((size_t)(c->ncls + 1) * 2 > c->tcap && grow_table(c) < 0) return -1;
    size_t slot = h & (c->tcap - 1);
    for (; c->table[slot]; slot = (slot + 1) & (c->tcap - 1)) {
        nclass *x = &c->cls[c->table[slot] - 1];
        if (x->hash == h && key_equal(&x->key, k)) return c->table[slot] - 1;
    }
    if (c->ncls == c->capcls) {
        int ncap = c->capcls ? c->capcls * 2 : 64;
        nclass *x = realloc(c->cls, (size_t)ncap * sizeof *x);
        if (!x) return -1;
        c->cls = x;
        c->capcls = ncap;
    }
    nclass *x = &c->cls[c->ncls];
    memset(x, 0, sizeof *x);
    x->key = *k;
    x->hash = h;
    c->table[slot] = c->ncls + 1;
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
    free(c->table);
    free(c->node_class);
    free(c->live);
    free(c->pcs);
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

int us_classes_pod_class(us_classes *c, const us_plan *p, int pod) {
    int w = p->st->pods[pod].workload;
    if (c->wl_class[w] >= 0) return c->wl_class[w];
    const us_workload *wl = &p->st->workloads[w];
    pclass k = {wl->request, &wl->node_selector, &wl->labels, &wl->tolerations, wl->priority,
                wl->queue, wl->background, NULL, 0};
    for (int i = 0; i < c->npcs; i++) {
        const pclass *x = &c->pcs[i];
        if (memcmp(&x->req, &k.req, sizeof k.req) == 0 && x->priority == k.priority &&
            x->queue == k.queue && x->background == k.background && us_labels_equal(x->sel, k.sel) &&
            us_labels_equal(x->labels, k.labels) && us_tolerations_equal(x->tol, k.tol))
            return c->wl_class[w] = i;
    }
    if (c->npcs == c->cappcs) {
        int ncap = c->cappcs ? c->cappcs * 2 : 16;
        pclass *x = realloc(c->pcs, (size_t)ncap * sizeof *x);
        if (!x) return -1;
        c->pcs = x;
        c->cappcs = ncap;
    }
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
