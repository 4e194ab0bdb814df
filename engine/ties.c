/*
 * ties.c — the least-displacement tie-break.  AI placement chooses nodes
 * as if background pods did not exist (ties by node name); afterwards, in
 * each group of nodes interchangeable for every AI pod of the cycle, the
 * new AI pods of one node (its bundle) may move, all together, to another
 * member of the group where they displace less background work.
 *
 * Interchangeable: same pool, labels that matter (nodelabels.h: a unique
 * hostname does not tell nodes apart), taints, capacity, GPU devices and
 * cordon, no pod holding room on the node in the AI view at the snapshot
 * (an AI pod running or pipelined, or one nothing may move: a terminating
 * one holds none in the AI view and is no victim),
 * and no bundle pinned there (a DaemonSet pod).  Every such
 * node looks the same to every AI pod of the cycle — to feasibility, to
 * the placement policy's score (which may not depend on names), to victim
 * search (there are no AI pods on them to take) — so swapping two bundles
 * gives the AI plan placement would have made had the two nodes' names
 * been swapped: the same pods placed, the same pods pending, the same
 * queue allocations, each pod on a node of the same kind.  The preference
 * therefore never changes an AI outcome; it only chooses which of two
 * identical nodes the background work has to leave.
 *
 * Owns only that rearrangement; never decides whether an AI pod runs.
 */
#include "ties.h"

#include <stdlib.h>
#include <string.h>

#include "hashidx.h"
#include "nodeclass.h"
#include "nodelabels.h"
#include "sort.h"

/* The running background pod of the node at position pos that follows
 * last (a pod index, or -1 for the first) in name order, or -1.  A node's
 * list is short, so a selection by name needs no scratch array. */
static int next_bg(const us_plan *p, int pos, int last) {
    const us_state *st = p->st;
    size_t cnt;
    const int *list = us_plan_node_pods(p, (size_t)pos, &cnt);
    const char *after = last >= 0 ? st->pods[last].name : NULL;
    int best = -1;
    for (size_t k = 0; k < cnt; k++) {
        const us_pod *pd = &st->pods[list[k]];
        if (pd->state != US_POD_RUNNING || !st->workloads[pd->workload].background) continue;
        if (after && strcmp(pd->name, after) <= 0) continue;
        if (best < 0 || strcmp(pd->name, st->pods[best].name) < 0) best = list[k];
    }
    return best;
}

static us_res request_of(const us_plan *p, int pod) { return p->st->workloads[p->st->pods[pod].workload].request; }

int us_ties_displaced(const us_plan *p, int pos, const us_use *ai) {
    const us_node *n = &p->st->nodes[p->nodes[pos]];
    /* beside the AI end state, as the re-offer keeps: terminating pods are
     * gone by then and displace nothing; running background pods in name
     * order, kept while they fit */
    us_use u = *ai;
    int displaced = 0;
    for (int pd = next_bg(p, pos, -1); pd >= 0; pd = next_bg(p, pos, pd)) {
        us_res req = request_of(p, pd);
        if (us_use_fits(&u, n, req, -1)) us_use_add(&u, n, req, -1);
        else displaced++;
    }
    return displaced;
}

/* What us_ties_displaced reads of a node beside its kind: the requests of
 * its running background pods in name order.  Members of a group with the
 * same requests displace the same beside any bundle. */
static uint64_t bg_hash(const us_plan *p, int pos) {
    uint64_t h = US_HASH_SEED;
    for (int pd = next_bg(p, pos, -1); pd >= 0; pd = next_bg(p, pos, pd)) {
        us_res req = request_of(p, pd);
        h = us_hash_words(h, &req, sizeof req);
    }
    return us_hash_finish(h);
}

typedef struct sig_ctx {
    const us_plan *p;
    const int *rep;  /* a member position per signature */
} sig_ctx;

static bool same_bg(int sig, const void *key, void *ctx) {
    const sig_ctx *c = ctx;
    int x = c->rep[sig], y = *(const int *)key, a = next_bg(c->p, x, -1), b = next_bg(c->p, y, -1);
    for (; a >= 0 && b >= 0; a = next_bg(c->p, x, a), b = next_bg(c->p, y, b)) {
        us_res ra = request_of(c->p, a), rb = request_of(c->p, b);
        if (memcmp(&ra, &rb, sizeof ra) != 0) return false;
    }
    return a < 0 && b < 0;
}

static int cmp_labels(const us_labels *a, const us_labels *b) {
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    for (size_t i = 0; i < a->n; i++) {
        int c = strcmp(a->items[i].key, b->items[i].key);
        if (!c) c = strcmp(a->items[i].value, b->items[i].value);
        if (c) return c;
    }
    return 0;
}

static int cmp_taints(const us_taints *a, const us_taints *b) {
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    for (size_t i = 0; i < a->n; i++) {
        int c = strcmp(a->items[i].key, b->items[i].key);
        if (!c) c = strcmp(a->items[i].value, b->items[i].value);
        if (!c && a->items[i].effect != b->items[i].effect) c = a->items[i].effect < b->items[i].effect ? -1 : 1;
        if (c) return c;
    }
    return 0;
}

/* Order of the static node key of the nodes at positions x and y: what
 * makes two nodes interchangeable for every AI pod (the labels that matter,
 * the same ones node classes and policies see; taints, capacity, devices,
 * cordon). */
static int cmp_kind(const us_plan *p, int x, int y) {
    const us_node *n = &p->st->nodes[p->nodes[x]], *m = &p->st->nodes[p->nodes[y]];
    int c = cmp_labels(us_nodelabels_of(p->labels, (size_t)x), us_nodelabels_of(p->labels, (size_t)y));
    if (!c) c = cmp_taints(&n->taints, &m->taints);
    if (c) return c;
    for (int r = 0; r < US_NRES; r++)
        if (n->cap.v[r] != m->cap.v[r]) return n->cap.v[r] < m->cap.v[r] ? -1 : 1;
    if (n->gpus != m->gpus) return n->gpus < m->gpus ? -1 : 1;
    if (n->unschedulable != m->unschedulable) return n->unschedulable ? 1 : -1;
    return 0;
}

/* The static node key, then the position, so that a group is a run of the
 * sorted list in name order. */
static int cmp_key(const void *a, const void *b, void *ctx) {
    const us_plan *p = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    int c = cmp_kind(p, x, y);
    if (c) return c;
    return x < y ? -1 : x > y;
}

static bool same_kind(const us_plan *p, int x, int y) {
    return cmp_kind(p, x, y) == 0;
}

/* Larger bundles choose first (GPU, then CPU, then memory), then by name. */
static int cmp_bundle(const void *a, const void *b, void *ctx) {
    const us_plan *p = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    for (int r = 0; r < US_NRES; r++)
        if (p->ai[x].used.v[r] != p->ai[y].used.v[r]) return p->ai[x].used.v[r] > p->ai[y].used.v[r] ? -1 : 1;
    return x < y ? -1 : x > y;
}

typedef struct work {
    int *npl;      /* [nnodes] new AI pods planned there; -1: not interchangeable */
    bool *bg;      /* [nnodes] running background pods there */
    int *to;       /* [nnodes] where the bundle of a position goes, or -1 */
    bool *taken;   /* [nnodes] position already receives a bundle */
    int *elig;     /* interchangeable positions, sorted by key */
    int *src;      /* one group's bundles */
    us_use *old;   /* one group's AI views before the move */
    /* one group's members by background signature (same_bg), [nnodes]
     * each: a member's signature (by position), a signature's member,
     * its members in group order (mem, from sfirst), the next member
     * not taken (skip: a find with path halving), the bundle's
     * displacement per signature */
    int *sig_of, *at, *rep, *sfirst, *mem, *skip, *d;  /* at: a member's place in mem */
    us_hashidx sigs;
} work;

/* The first member not taken at or after k in mem, or past the end. */
static int untaken(work *w, int k) {
    while (w->skip[k] != k) {
        w->skip[k] = w->skip[w->skip[k]];
        k = w->skip[k];
    }
    return k;
}

#ifdef US_CHECK_INVARIANTS
/* The member the scan of every member chooses for bundle s (what
 * assign_group did before signatures): checking builds hold the choice by
 * signature to it. */
static int scan_choice(const us_plan *p, const work *w, const int *g, size_t n, int s) {
    int best = -1, best_d = 0;
    const us_use *bundle = &p->ai[s];
    if (!w->taken[s]) {
        best = s;
        best_d = w->bg[s] ? us_ties_displaced(p, s, bundle) : 0;
    }
    for (size_t i = 0; i < n && !(best >= 0 && best_d == 0); i++) {
        int t = g[i];
        if (w->taken[t] || t == s) continue;
        int d = w->bg[t] ? us_ties_displaced(p, t, bundle) : 0;
        if (best < 0 || d < best_d) {
            best = t;
            best_d = d;
        }
    }
    return best;
}
#endif

/* Assign the bundles of group g[0..n) to members, greedily, largest
 * bundle first: the member displacing the least, the bundle's own node
 * among equals, then the first by name.  Members with the same background
 * requests (a signature) displace the same, so each bundle is weighed
 * against each signature once, and a signature's first member not taken
 * is found at once: a scan of every member per bundle was quadratic in a
 * large group of identical nodes.  0, -1 when memory runs out, or (in a
 * checking build) -2 when the choice is not the scan's. */
static int assign_group(const us_plan *p, work *w, const int *g, size_t n) {
    size_t ns = 0;
    int nsig = 0;
    sig_ctx ctx = {p, w->rep};
    us_hashidx_clear(&w->sigs);
    for (size_t i = 0; i < n; i++) {
        int pos = g[i];
        uint64_t h = bg_hash(p, pos);
        int sig = us_hashidx_find(&w->sigs, h, same_bg, &pos, &ctx);
        if (sig < 0) {
            if (us_hashidx_add(&w->sigs, h, nsig) < 0) return -1;
            w->rep[nsig] = pos;
            w->sfirst[nsig + 1] = 0;
            sig = nsig++;
        }
        w->sig_of[pos] = sig;
        w->sfirst[sig + 1]++;
        if (w->npl[pos] > 0) w->src[ns++] = pos;
    }
    w->sfirst[0] = 0;
    for (int sg = 0; sg < nsig; sg++) w->sfirst[sg + 1] += w->sfirst[sg];
    for (int sg = 0; sg < nsig; sg++) w->d[sg] = w->sfirst[sg];  /* fill cursors for now */
    for (size_t i = 0; i < n; i++) {
        w->at[g[i]] = w->d[w->sig_of[g[i]]]++;
        w->mem[w->at[g[i]]] = g[i];
    }
    for (size_t k = 0; k <= n; k++) w->skip[k] = (int)k;
    us_sort(w->src, ns, sizeof *w->src, cmp_bundle, (void *)p);
    for (size_t k = 0; k < ns; k++) {
        int s = w->src[k], best = -1, best_d = 0;
        const us_use *bundle = &p->ai[s];
        for (int sg = 0; sg < nsig; sg++) w->d[sg] = us_ties_displaced(p, w->rep[sg], bundle);
        if (!w->taken[s]) {
            best = s;
            best_d = w->d[w->sig_of[s]];
        }
        /* else (or when another displaces less): the first member by name
         * of a signature displacing the least, the bundle's own node aside */
        for (int sg = 0; sg < nsig; sg++) {
            int at = untaken(w, w->sfirst[sg]);
            if (at < w->sfirst[sg + 1] && w->mem[at] == s) at = untaken(w, at + 1);
            if (at >= w->sfirst[sg + 1]) continue;
            if (best < 0 || w->d[sg] < best_d ||
                (w->d[sg] == best_d && best != s && w->mem[at] < best)) {  /* positions: name order */
                best = w->mem[at];
                best_d = w->d[sg];
            }
        }
#ifdef US_CHECK_INVARIANTS
        if (scan_choice(p, w, g, n, s) != best) return -2;
#endif
        w->taken[best] = true;
        w->to[s] = best;
        w->skip[w->at[best]] = w->at[best] + 1;  /* taken: finds pass over it */
    }
    return 0;
}

int us_ties_spare_background(us_plan *p, us_err *err) {
    if (!p->opts->background_aware_ties || p->nplaced == 0) return 0;
    const us_state *st = p->st;
    size_t nn = p->nnodes ? p->nnodes : 1;
    work w = {0};
    int rc = 0;
    w.npl = calloc(nn, sizeof *w.npl);
    w.bg = calloc(nn, sizeof *w.bg);
    w.to = malloc(nn * sizeof *w.to);
    w.taken = calloc(nn, sizeof *w.taken);
    w.elig = malloc(nn * sizeof *w.elig);
    w.src = malloc(nn * sizeof *w.src);
    w.old = malloc(nn * sizeof *w.old);
    w.sig_of = malloc(nn * sizeof *w.sig_of);
    w.at = malloc(nn * sizeof *w.at);
    w.rep = malloc(nn * sizeof *w.rep);
    w.sfirst = malloc((nn + 1) * sizeof *w.sfirst);
    w.mem = malloc(nn * sizeof *w.mem);
    w.skip = malloc((nn + 1) * sizeof *w.skip);
    w.d = malloc(nn * sizeof *w.d);
    if (!w.npl || !w.bg || !w.to || !w.taken || !w.elig || !w.src || !w.old || !w.sig_of || !w.at ||
        !w.rep || !w.sfirst || !w.mem || !w.skip || !w.d) {
        rc = us_err_nomem(err);
        goto done;
    }
    /* a node where a pod holds room in the AI view (an AI pod, or one
     * nothing may move, whose room stays on this node whichever bundle
     * lands here) is not eligible; the snapshot said which (node_kind) */
    for (size_t pos = 0; pos < p->nnodes; pos++) {
        w.to[pos] = -1;
        if (p->node_kind[pos] & US_NODE_HOLDS_AI) w.npl[pos] = -1;
        else w.bg[pos] = (p->node_kind[pos] & US_NODE_RUNS_BG) != 0;
    }
    for (size_t k = 0; k < p->nplaced; k++) {
        int pod = p->placed[k], pos = p->pos[p->pnode[pod]];
        if (w.npl[pos] < 0) continue;
        if (st->pods[pod].pin >= 0) w.npl[pos] = -1;
        else w.npl[pos]++;
    }
    size_t ne = 0;
    for (size_t pos = 0; pos < p->nnodes; pos++)
        if (w.npl[pos] >= 0) w.elig[ne++] = (int)pos;
    us_sort(w.elig, ne, sizeof *w.elig, cmp_key, p);

    for (size_t a = 0, b; a < ne; a = b) {
        bool bundles = false, bg = false;
        for (b = a; b < ne && same_kind(p, w.elig[a], w.elig[b]); b++) {
            bundles = bundles || w.npl[w.elig[b]] > 0;
            bg = bg || w.bg[w.elig[b]];
        }
        if (b - a < 2 || !bundles || !bg) continue;  /* nothing to choose, or to spare */
        int arc = assign_group(p, &w, w.elig + a, b - a);
        if (arc < 0) {
            rc = arc == -1 ? us_err_nomem(err)
                           : us_err_set(err, US_EINVARIANT, "invariant \"ties\" broken: the tie-break's "
                                                            "choice by signature is not the scan's");
            goto done;
        }
        /* move: every member's AI view is its bundle, or empty */
        for (size_t i = a; i < b; i++) w.old[i - a] = p->ai[w.elig[i]];
        for (size_t i = a; i < b; i++) memset(&p->ai[w.elig[i]], 0, sizeof p->ai[0]);
        for (size_t i = a; i < b && p->ai_held; i++) p->ai_held[w.elig[i]] = 0;  /* moved */
        for (size_t i = a; i < b; i++)
            if (w.to[w.elig[i]] >= 0) p->ai[w.to[w.elig[i]]] = w.old[i - a];
        for (size_t i = a; i < b && p->classes; i++)
            if (us_classes_node_changed(p->classes, p, w.elig[i]) < 0) {
                rc = us_err_nomem(err);
                goto done;
            }
    }
    for (size_t k = 0; k < p->nplaced; k++) {
        int pod = p->placed[k], to = w.to[p->pos[p->pnode[pod]]];
        if (to >= 0) p->pnode[pod] = p->nodes[to];
    }
done:
    free(w.npl);
    free(w.bg);
    free(w.to);
    free(w.taken);
    free(w.elig);
    free(w.src);
    free(w.old);
    free(w.sig_of);
    free(w.at);
    free(w.rep);
    free(w.sfirst);
    free(w.mem);
    free(w.skip);
    free(w.d);
    us_hashidx_free(&w.sigs);
    return rc;
}
