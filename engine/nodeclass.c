/*
 * nodeclass.c — equivalence classes of nodes and pods, and the score cache
 * keyed by them (see nodeclass.h).
 *
 * Node classes are found by the hash of the node's view (hashidx.h); each
 * class keeps a min-heap of member positions so that the first member by
 * name is found at once.  Members that left are dropped from the heap
 * lazily.  A view is two parts: the static one (labels that matter,
 * taints, capacity, devices, cordon), numbered once per node as its sid
 * while the nodes' specs hold, and the use in the AI view, which is what
 * changes from cycle to cycle; keys hold no pointer, so the next cycle
 * starts from this one's classes (us_classes_renew).  Pod classes (one
 * per distinct pod view) are found by hash too, and cached per workload:
 * a cluster of many distinct pending jobs made a scan of them quadratic.
 * Pod classes do hold pointers into the state, so the scores that outlive
 * the cycle go with a copy of their class's key (carried,
 * us_classes_hand_over), and the node class ids they are for are mapped
 * by key to the next cycle's (take_carry).
 */
#include "nodeclass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashidx.h"
#include "nodelabels.h"
#include "sort.h"


/* What a node's class is keyed on: its static view (sid: the labels that
 * matter, taints, capacity, cordon), its devices, and its use in the AI
 * view.  No pointer: a key outlives the cycle that made it. */
typedef struct nkey {
    int sid;
    int gpus;
    us_use ai;
} nkey;

typedef struct nclass {
    nkey key;
    uint64_t hash;     /* of key (hash_key) */
    int count;         /* members now */
    int *heap, nheap, capheap;
} nclass;

/* What is cached for one (pod class, node class) pair. */
typedef struct cell {
    double score;      /* NAN: not scored */
    bool pure;         /* a function of the views alone: may outlive the cycle */
} cell;

typedef struct pclass {
    us_res req;
    const us_labels *sel, *labels;
    const us_tolerations *tol;
    int priority, queue;
    const char *qname; /* the queue's name: what the view shows */
    bool background;
    cell *cells;       /* [ncells] what is known, by node class */
    int ncells;
} pclass;

/* A pod class's pure scores, kept for the next cycle: its key copied (the
 * workload it was read from may change or go), its scores by node class
 * id (the last cycle's until us_classes_renew maps them to this one's). */
typedef struct kept_score {
    int nc;
    double score;
} kept_score;

typedef struct carried {
    us_res req;
    us_labels sel, labels;
    us_tolerations tol;
    int priority;
    char *qname;
    bool background;
    uint64_t hash;     /* hash_pclass of the same key */
    int age;           /* cycles since a pod of the class was last met */
    kept_score *scores;
    int nscores;       /* 0 once claimed */
} carried;

struct us_classes {
    nclass *cls;
    int ncls, capcls;
    us_hashidx table;  /* node classes by their key's hash */
    int *node_class;   /* [nnodes] */
    int *sid;          /* [nnodes] each node's static view (compute_sids) */
    int *live;         /* ids of the classes with members, ascending */
    int nlive, caplive;
    pclass *pcs;
    int npcs, cappcs;
    us_hashidx pc_table;  /* pod classes by their key's hash */
    int *wl_class;     /* [nworkloads]: pod class, or -1 not known yet */
    /* what the static views were made from: while all of it holds, every
     * node's sid holds (us_classes_renew) */
    size_t nnodes;
    uint64_t nodes_version, specs_version;
    char **keys;       /* the label keys that mattered, copied */
    size_t nkeys;
    size_t kept;       /* nodes that kept the last cycle's class key */
    /* the pure scores of the last cycle's pod classes, from the placement
     * version whose id is scorer; claimed by the pod class of the same key
     * when it is first met (us_classes_pod_class) */
    carried *carry;
    int ncarry;
    us_hashidx carry_table;  /* carry by hash */
    char scorer[24];   /* "": nothing carried */
    size_t scores_kept;      /* scores claimed from carry */
};

/* ---- static views ------------------------------------------------------ */

/* A node's view but for its use: two nodes of equal static views differ
 * only by what they run. */
typedef struct skey {
    const us_labels *labels;
    const us_taints *taints;
    us_res cap;
    int gpus, cordon;
} skey;

typedef struct sids {
    skey *keys;
    int n, cap;
} sids;

static void skey_of(const us_plan *p, int pos, skey *k) {
    const us_node *n = &p->st->nodes[p->nodes[pos]];
    memset(k, 0, sizeof *k);
    k->labels = us_nodelabels_of(p->labels, (size_t)pos);
    k->taints = &n->taints;
    k->cap = n->cap;
    k->gpus = n->gpus;
    k->cordon = n->unschedulable;
}

static uint64_t hash_skey(const skey *k) {
    uint64_t h = us_hash_taints(us_hash_labels(US_HASH_SEED, k->labels), k->taints);
    h = us_hash_words(h, &k->cap, sizeof *k - offsetof(skey, cap));
    return us_hash_finish(h);
}

static bool skey_equal(const skey *a, const skey *b) {
    return us_labels_equal(a->labels, b->labels) && us_taints_equal(a->taints, b->taints) &&
           memcmp(&a->cap, &b->cap, sizeof *a - offsetof(skey, cap)) == 0;
}

static bool skey_is(int id, const void *key, void *ctx) {
    return skey_equal(&((const sids *)ctx)->keys[id], key);
}

/* Each node's static view, numbered in order of first appearance.  Nodes
 * next to each other by name are mostly alike (one instance type, one
 * zone): one that is its neighbour's twin takes its sid unhashed. */
static int compute_sids(us_classes *c, const us_plan *p) {
    sids s = {0};
    us_hashidx t = {0};
    int rc = 0;
    skey prev;
    for (size_t pos = 0; pos < p->nnodes && rc == 0; pos++) {
        skey k;
        skey_of(p, (int)pos, &k);
        if (pos > 0 && skey_equal(&k, &prev)) {
            c->sid[pos] = c->sid[pos - 1];
            continue;
        }
        prev = k;
        uint64_t h = hash_skey(&k);
        int id = us_hashidx_find(&t, h, skey_is, &k, &s);
        if (id < 0) {
            if (s.n == s.cap) {
                int ncap = s.cap ? s.cap * 2 : 16;
                skey *x = realloc(s.keys, (size_t)ncap * sizeof *x);
                if (!x) {
                    rc = -1;
                    break;
                }
                s.keys = x;
                s.cap = ncap;
            }
            if (us_hashidx_add(&t, h, s.n) < 0) {
                rc = -1;
                break;
            }
            s.keys[id = s.n++] = k;
        }
        c->sid[pos] = id;
    }
    free(s.keys);
    us_hashidx_free(&t);
    return rc;
}

/* ---- hashing ---------------------------------------------------------- */

/* The use's bytes that are compared: all but the struct's tail padding. */
#define USE_BYTES (offsetof(us_use, shared) + sizeof ((us_use *)0)->shared)

/* The fixed part of a key (use: about 160 bytes, most of them the zero
 * shared-slot counts) a word at a time: hashing it byte by byte was most
 * of what joining a node to its class cost. */
static uint64_t hash_key(const nkey *k) {
    uint64_t h = us_hash_words(US_HASH_SEED, k, offsetof(nkey, ai.shared));
    /* of the shared-slot counts only the node's own devices' are hashed
     * (equal keys have equal gpus, so they still hash the same), the rest
     * is compared by key_equal */
    size_t slots = k->gpus > 0 && k->gpus <= US_MAX_GPUS ? (size_t)k->gpus : 0;
    h = us_hash_words(h, k->ai.shared, (slots + 3) / 4 * 4 * sizeof *k->ai.shared);
    return us_hash_finish(h);
}

static bool use_same(const us_use *a, const us_use *b) { return memcmp(a, b, USE_BYTES) == 0; }

static bool key_equal(const nkey *a, const nkey *b) {
    return a->sid == b->sid && a->gpus == b->gpus && use_same(&a->ai, &b->ai);
}

/* ---- node classes --------------------------------------------------------- */

static void make_key(const us_classes *c, const us_plan *p, int pos, nkey *k) {
    memset(k, 0, sizeof *k);
    k->sid = c->sid[pos];
    k->gpus = p->st->nodes[p->nodes[pos]].gpus;
    memcpy(&k->ai, &p->ai[pos], USE_BYTES);
    k->ai.top = p->ai[pos].top;  /* not compared, but keeps k->ai a use */
}

static bool class_is(int id, const void *key, void *ctx) {
    const us_classes *c = ctx;
    return key_equal(&c->cls[id].key, key);
}

/* The class of key k (hash h), created when new; -1 when memory runs out. */
static int class_of(us_classes *c, const nkey *k, uint64_t h) {
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
    x->hash = h;
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
    return (int)us_ints_below(c->live, (size_t)c->nlive, id);
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

/* Node pos into class id. */
static int add_member(us_classes *c, int pos, int id) {
    c->node_class[pos] = id;
    if (c->cls[id].count++ == 0 && live_add(c, id) < 0) return -1;
    return heap_push(&c->cls[id], pos);
}

static int join(us_classes *c, const us_plan *p, int pos) {
    nkey k;
    make_key(c, p, pos, &k);
    int id = class_of(c, &k, hash_key(&k));
    return id < 0 ? -1 : add_member(c, pos, id);
}

/* Every node of p into its class, in position order, so that class ids
 * are numbered in order of first appearance however the classes were
 * found.  old (NULL: none): the last cycle's classes over the same nodes
 * and static views; a node whose use is still its class's there takes
 * that class's key and hash without making and hashing its own. */
static int build(us_classes *c, const us_plan *p, const us_classes *old) {
    int *now_id = NULL;  /* [old class] its id here, or -1 not met yet */
    if (old) {
        if (!(now_id = malloc((size_t)(old->ncls ? old->ncls : 1) * sizeof *now_id))) return -1;
        for (int i = 0; i < old->ncls; i++) now_id[i] = -1;
    }
    int rc = 0;
    for (size_t pos = 0; pos < p->nnodes && rc == 0; pos++) {
        int o = old ? old->node_class[pos] : -1;
        if (o >= 0 && use_same(&old->cls[o].key.ai, &p->ai[pos])) {
            if (now_id[o] < 0) now_id[o] = class_of(c, &old->cls[o].key, old->cls[o].hash);
            rc = now_id[o] < 0 ? -1 : add_member(c, (int)pos, now_id[o]);
            c->kept++;
        } else {
            rc = join(c, p, (int)pos);
        }
    }
    free(now_id);
    return rc;
}

/* A classes object for p, empty, with its per-workload and per-node
 * arrays; NULL when memory runs out. */
static us_classes *alloc_classes(const us_plan *p) {
    us_classes *c = calloc(1, sizeof *c);
    size_t nn = p->nnodes ? p->nnodes : 1, nw = p->st->nworkloads ? p->st->nworkloads : 1;
    if (!c) return NULL;
    c->node_class = malloc(nn * sizeof *c->node_class);
    c->wl_class = malloc(nw * sizeof *c->wl_class);
    if (!c->node_class || !c->wl_class) {
        us_classes_free(c);
        return NULL;
    }
    for (size_t w = 0; w < nw; w++) c->wl_class[w] = -1;
    c->nnodes = p->nnodes;
    c->nodes_version = p->st->nodes_version;
    c->specs_version = p->st->node_specs_version;
    return c;
}

/* Copy the label keys that matter for p into c (the static views' stamp). */
static int copy_keys(us_classes *c, const us_plan *p) {
    size_t n;
    const char *const *keys = us_nodelabels_keys(p->labels, &n);
    if (!(c->keys = calloc(n ? n : 1, sizeof *c->keys))) return -1;
    for (size_t i = 0; i < n; i++) {
        if (!(c->keys[i] = strdup(keys[i]))) return -1;
        c->nkeys++;
    }
    return 0;
}

/* Do old's static views still hold for p's nodes?  Versions are unique
 * in the process (state.h), so equal versions are the same nodes. */
static bool views_hold(const us_classes *old, const us_plan *p) {
    size_t n;
    const char *const *keys = us_nodelabels_keys(p->labels, &n);
    if (old->nodes_version == 0 || old->nodes_version != p->st->nodes_version ||
        old->specs_version != p->st->node_specs_version || old->nnodes != p->nnodes || old->nkeys != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(old->keys[i], keys[i]) != 0) return false;
    return true;
}

/* The node classes of every node of p, built afresh; NULL when memory
 * runs out. */
static us_classes *classes_new(const us_plan *p) {
    us_classes *c = alloc_classes(p);
    if (!c) return NULL;
    if (!(c->sid = malloc((p->nnodes ? p->nnodes : 1) * sizeof *c->sid)) || copy_keys(c, p) < 0 ||
        compute_sids(c, p) < 0 || build(c, p, NULL) < 0) {
        us_classes_free(c);
        return NULL;
    }
    return c;
}

static void take_carry(us_classes *c, us_classes *old, const us_plan *p);
static void drop_carry(us_classes *c);

int us_classes_renew(us_classes **cp, const us_plan *p, const char **broken) {
    us_classes *old = *cp, *c;
    *broken = NULL;
    if (!old || !views_hold(old, p)) {
        us_classes_free(old);
        return (*cp = classes_new(p)) ? 0 : -1;
    }
    *cp = NULL;
    if (!(c = alloc_classes(p))) {
        us_classes_free(old);
        return -1;
    }
    /* the static views hold: the sids and their stamp move over */
    c->sid = old->sid;
    c->keys = old->keys;
    c->nkeys = old->nkeys;
    old->sid = NULL;
    old->keys = NULL;
    old->nkeys = 0;
    int rc = build(c, p, old);
    if (rc == 0) take_carry(c, old, p);
    us_classes_free(old);
    if (rc < 0) {
        us_classes_free(c);
        return -1;
    }
#ifdef US_CHECK_INVARIANTS
    /* checking builds: the classes found afresh are these, id for id */
    us_classes *fresh = classes_new(p);
    if (!fresh) {
        us_classes_free(c);
        return -1;
    }
    bool same = fresh->ncls == c->ncls &&
                (p->nnodes == 0 || memcmp(fresh->node_class, c->node_class, p->nnodes * sizeof *c->node_class) == 0);
    for (size_t pos = 0; same && pos < p->nnodes; pos++) same = fresh->sid[pos] == c->sid[pos];
    us_classes_free(fresh);
    if (!same) {
        us_classes_free(c);
        *broken = "invariant \"node-classes\" broken: the node classes kept from the last cycle are "
                  "not those found afresh (a change to a node's labels, taints, capacity or cordon "
                  "did not move the state's node spec version)";
        return -2;
    }
#endif
    *cp = c;
    return 0;
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
    free(c->sid);
    free(c->live);
    free(c->pcs);
    us_hashidx_free(&c->pc_table);
    free(c->wl_class);
    for (size_t i = 0; i < c->nkeys; i++) free(c->keys[i]);
    free(c->keys);
    drop_carry(c);
    free(c);
}

int us_classes_node_changed(us_classes *c, const us_plan *p, int pos) {
    int old = c->node_class[pos];
    /* its heap entry goes lazily */
    if (--c->cls[old].count == 0) live_remove(c, old);
    return join(c, p, pos);
}

size_t us_classes_kept(const us_classes *c) { return c->kept; }

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

/* Over what the pod's view shows (and its selector and tolerations), by
 * content and the queue's name, so that a carried class hashes as the
 * class it was copied from. */
static uint64_t hash_pod(us_res req, const us_labels *sel, const us_labels *labels,
                         const us_tolerations *tol, int priority, const char *qname, bool background) {
    uint64_t h = us_hash_words(US_HASH_SEED, &req, sizeof req);
    int ints[2] = {priority, background};
    h = us_hash_words(h, ints, sizeof ints);
    h = us_hash_str(h, qname);
    h = us_hash_tolerations(us_hash_labels(us_hash_labels(h, sel), labels), tol);
    return us_hash_finish(h);
}

static uint64_t hash_pclass(const pclass *k) {
    return hash_pod(k->req, k->sel, k->labels, k->tol, k->priority, k->qname, k->background);
}

static bool pclass_is(int id, const void *key, void *ctx) {
    const pclass *x = &((const us_classes *)ctx)->pcs[id], *k = key;
    return memcmp(&x->req, &k->req, sizeof k->req) == 0 && x->priority == k->priority &&
           x->queue == k->queue && x->background == k->background && us_labels_equal(x->sel, k->sel) &&
           us_labels_equal(x->labels, k->labels) && us_tolerations_equal(x->tol, k->tol);
}

static bool carried_is(int id, const void *key, void *ctx) {
    const carried *x = &((const us_classes *)ctx)->carry[id];
    const pclass *k = key;
    return memcmp(&x->req, &k->req, sizeof k->req) == 0 && x->priority == k->priority &&
           x->background == k->background && strcmp(x->qname, k->qname) == 0 &&
           us_labels_equal(&x->sel, k->sel) && us_labels_equal(&x->labels, k->labels) &&
           us_tolerations_equal(&x->tol, k->tol);
}

static cell *cell_at(us_classes *c, int pc, int nc);

/* A new pod class (id pc, key k, hash h) takes the scores carried for its
 * key, if any.  0, or -1 when memory runs out. */
static int claim(us_classes *c, int pc, const pclass *k, uint64_t h) {
    if (c->ncarry == 0) return 0;
    int id = us_hashidx_find(&c->carry_table, h, carried_is, k, c);
    if (id < 0) return 0;
    carried *x = &c->carry[id];
    for (int i = 0; i < x->nscores; i++) {
        cell *g = cell_at(c, pc, x->scores[i].nc);
        if (!g) return -1;
        *g = (cell){x->scores[i].score, true};
    }
    c->scores_kept += (size_t)x->nscores;
    free(x->scores);
    x->scores = NULL;
    x->nscores = 0;
    return 0;
}

int us_classes_pod_class(us_classes *c, const us_plan *p, int pod) {
    int w = p->st->pods[pod].workload;
    if (c->wl_class[w] >= 0) return c->wl_class[w];
    const us_workload *wl = &p->st->workloads[w];
    pclass k = {wl->request, &wl->node_selector, &wl->labels, &wl->tolerations, wl->priority,
                wl->queue, p->st->queues[wl->queue].name, wl->background, NULL, 0};
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
    id = c->wl_class[w] = c->npcs++;  /* counted first: its cells are freed with it */
    return claim(c, id, &k, h) < 0 ? -1 : id;
}

/* The cell of (pc, nc), growing the pod class's row to hold it; NULL when
 * memory runs out. */
static cell *cell_at(us_classes *c, int pc, int nc) {
    pclass *x = &c->pcs[pc];
    if (nc >= x->ncells) {
        int n = c->capcls > nc ? c->capcls : nc + 1;
        cell *g = realloc(x->cells, (size_t)n * sizeof *g);
        if (!g) return NULL;
        for (int i = x->ncells; i < n; i++) g[i] = (cell){NAN, false};
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

int us_classes_set_score(us_classes *c, int pc, int nc, double score, bool pure) {
    cell *k = cell_at(c, pc, nc);
    if (!k) return -1;
    *k = (cell){score, pure};
    return 0;
}

void us_classes_clear_scores(us_classes *c) {
    for (int i = 0; i < c->npcs; i++)
        for (int j = 0; j < c->pcs[i].ncells; j++) c->pcs[i].cells[j] = (cell){NAN, false};
    drop_carry(c);
}

size_t us_classes_scores_kept(const us_classes *c) { return c->scores_kept; }

/* ---- scores kept across cycles ------------------------------------------------ */

static void carried_free(carried *x) {
    us_labels_free(&x->sel);
    us_labels_free(&x->labels);
    us_tolerations_free(&x->tol);
    free(x->qname);
    free(x->scores);
}

/* c's carried entries, handed to the caller (*n of them; NULL when none),
 * c left carrying nothing. */
static carried *detach_carry(us_classes *c, int *n) {
    carried *x = c->carry;
    *n = c->ncarry;
    c->carry = NULL;
    c->ncarry = 0;
    us_hashidx_free(&c->carry_table);
    memset(&c->carry_table, 0, sizeof c->carry_table);
    c->scorer[0] = '\0';
    return x;
}

static void drop_carry(us_classes *c) {
    int n;
    carried *x = detach_carry(c, &n);
    for (int i = 0; i < n; i++) carried_free(&x[i]);
    free(x);
}

/* Is cell g a score that may outlive the cycle? */
static bool keepable(const cell *g) { return g->pure && !isnan(g->score); }

/* Pod class x's pure scores into a carried entry y, its key copied.  0, or
 * -1 when memory runs out (y then owns what it has, for carried_free). */
static int carry_one(carried *y, const pclass *x, uint64_t h) {
    memset(y, 0, sizeof *y);
    y->req = x->req;
    y->priority = x->priority;
    y->background = x->background;
    y->hash = h;
    if (us_labels_copy(&y->sel, x->sel) < 0 || us_labels_copy(&y->labels, x->labels) < 0 ||
        us_tolerations_copy(&y->tol, x->tol) < 0 || !(y->qname = strdup(x->qname)))
        return -1;
    int n = 0;
    for (int j = 0; j < x->ncells; j++) n += keepable(&x->cells[j]);
    if (!(y->scores = malloc((size_t)(n ? n : 1) * sizeof *y->scores))) return -1;
    for (int j = 0; j < x->ncells; j++)
        if (keepable(&x->cells[j]))
            y->scores[y->nscores++] = (kept_score){j, x->cells[j].score};
    return 0;
}

/* How long a pod class's scores are kept while no pod of it is met (in
 * cycles), and how many scores of such classes at most (beyond those of
 * the pod classes met this cycle): keeping them costs a lookup per score
 * each cycle, which must stay small beside the cycle. */
#define KEEP_UNMET_CYCLES 8
#define KEEP_UNMET_SCORES(nnodes) ((nnodes) > 4096 ? (nnodes) : 4096)

static bool has_pure(const pclass *x) {
    for (int j = 0; j < x->ncells; j++)
        if (keepable(&x->cells[j])) return true;
    return false;
}

void us_classes_hand_over(us_classes *c, const us_plan *p) {
    /* what is still carried was not met this cycle (claim empties it) */
    int nunmet;
    carried *unmet = detach_carry(c, &nunmet);
    int n = nunmet;
    bool ok = p->score_pol != NULL;  /* built-in scores: the next cycle asks the policy */
    for (int i = 0; ok && i < c->npcs; i++) n += has_pure(&c->pcs[i]);
    if (ok && n > 0 && !(c->carry = calloc((size_t)n, sizeof *c->carry))) ok = false;
    /* this cycle's pod classes first, then the unmet ones youngest first
     * (the order they are in), while they fit */
    for (int i = 0; ok && i < c->npcs; i++) {
        const pclass *x = &c->pcs[i];
        if (!has_pure(x)) continue;
        uint64_t h = hash_pclass(x);
        int rc = carry_one(&c->carry[c->ncarry], x, h);
        c->ncarry++;  /* counted either way: carried_free takes what it has */
        if (rc < 0 || us_hashidx_add(&c->carry_table, h, c->ncarry - 1) < 0) ok = false;
    }
    size_t room = KEEP_UNMET_SCORES(p->nnodes);
    for (int i = 0; i < nunmet; i++) {
        carried *x = &unmet[i];
        if (ok && x->nscores > 0 && x->age + 1 < KEEP_UNMET_CYCLES && (size_t)x->nscores <= room) {
            room -= (size_t)x->nscores;
            x->age++;
            c->carry[c->ncarry] = *x;
            if (us_hashidx_add(&c->carry_table, x->hash, c->ncarry++) < 0) ok = false;
        } else {
            carried_free(x);
        }
    }
    free(unmet);
    if (ok) snprintf(c->scorer, sizeof c->scorer, "%s", us_policy_id(p->score_pol));
    else drop_carry(c);  /* keeping scores only saves calls */
    /* the pod classes' keys point into the state, which may change before
     * the next cycle: only the carried copies are read from here on */
    for (int i = 0; i < c->npcs; i++) c->pcs[i].sel = c->pcs[i].labels = NULL, c->pcs[i].tol = NULL;
}

/* The carried scores of old, moved to c: each kept where the node class it
 * was for is one of c's (same key), under c's id for it.  Kept only from
 * the placement version c's plan scores with. */
static void take_carry(us_classes *c, us_classes *old, const us_plan *p) {
    if (old->ncarry == 0 || !p->score_pol || strcmp(old->scorer, us_policy_id(p->score_pol)) != 0) return;
    int *now = malloc((size_t)(old->ncls ? old->ncls : 1) * sizeof *now);
    if (!now) return;  /* keeping scores only saves calls */
    for (int i = 0; i < old->ncls; i++) now[i] = -2;  /* -2: not looked up yet; -1: gone */
    for (int i = 0; i < old->ncarry; i++) {
        carried *x = &old->carry[i];
        int m = 0;
        for (int j = 0; j < x->nscores; j++) {
            int o = x->scores[j].nc;
            if (now[o] == -2) now[o] = us_hashidx_find(&c->table, old->cls[o].hash, class_is, &old->cls[o].key, c);
            if (now[o] >= 0) x->scores[m++] = (kept_score){now[o], x->scores[j].score};
        }
        x->nscores = m;
    }
    free(now);
    c->carry = old->carry;
    c->ncarry = old->ncarry;
    c->carry_table = old->carry_table;
    snprintf(c->scorer, sizeof c->scorer, "%s", old->scorer);
    old->carry = NULL;
    old->ncarry = 0;
    memset(&old->carry_table, 0, sizeof old->carry_table);
}
