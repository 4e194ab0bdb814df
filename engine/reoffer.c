/*
 * reoffer.c — background re-offer.  The AI plan is final; background pods
 * get what it left: a running background pod that still fits on its node
 * stays undisturbed, the rest are evicted, and pending ones are placed in
 * idle room.  background.lua decides; this file builds its view, checks
 * the answer against the invariants (no node over capacity, a kept pod stays
 * on its own node, a placed pod only where it may go) and falls back to the
 * built-in policy when the answer breaks one.
 *
 * Two rooms per node, because keeping and placing are different questions.
 * A running pod is kept when it fits beside where the AI plan ends
 * (pipelined and new AI pods on their nodes, every pod they wait for gone):
 * a transition, a releasing pod and its pipelined replacement, is never
 * counted twice.  A pending pod is placed only in idle room, room nobody
 * holds now: not the AI plan's, not what terminating pods still hold, and
 * not what an offered running pod holds, kept or evicted (an evicted pod
 * terminates for its grace period), so commit never refuses a placement and
 * a background pod never waits in line (it is never pipelined).
 *
 * The view is incremental, so a quiet 10,000-node cycle costs little: only
 * running pods on nodes the AI plan changed are offered (elsewhere nothing
 * they fitted in has changed), candidates are the nodes with room, and only
 * the nodes those name are shown.
 */
#include "reoffer.h"

#include "nodelabels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "cyclecache.h"
#include "hashidx.h"
#include "placement.h"
#include "sort.h"

static int by_pod_name(const void *a, const void *b, void *ctx) {
    const us_state *st = ctx;
    const us_pod *x = &st->pods[*(const int *)a], *y = &st->pods[*(const int *)b];
    int c = strcmp(x->name, y->name);
    return c ? c : (x->seq < y->seq ? -1 : x->seq > y->seq);
}

static uint64_t pod_key(int pod, void *ctx) { return ((const us_state *)ctx)->pods[pod].seq; }

void us_reoffer_free(us_reoffer *r) {
    free(r->running);
    free(r->keep);
    free(r->pending);
    free(r->place);
    memset(r, 0, sizeof *r);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* NULL when keep/place respect the rules, else what broke: a kept pod
 * must fit beside the AI end state (end), an evicted one must not (a pod
 * is evicted only when an AI workload needs its room), a placed one goes
 * in idle room (idle). */
static const char *check(const us_bg_input *in, const bool *keep, const int *place, us_use *end,
                         us_use *idle, char *buf, size_t len) {
    for (size_t i = 0; i < in->nrunning; i++) {
        if (!keep[i]) continue;
        int pos = in->running[i].node;
        us_res req = in->running[i].wl->request;
        if (!us_use_fits(&end[pos], in->nodes[pos].node, req, -1)) {
            snprintf(buf, len, "keeping pod \"%s\" would put node \"%s\" over capacity once the "
                     "AI plan ends", in->running[i].pod->name, in->nodes[pos].node->name);
            return buf;
        }
        us_use_add(&end[pos], in->nodes[pos].node, req, -1);
    }
    for (size_t i = 0; i < in->nrunning; i++) {
        int pos = in->running[i].node;
        if (!keep[i] && us_use_fits(&end[pos], in->nodes[pos].node, in->running[i].wl->request, -1)) {
            snprintf(buf, len, "evicting pod \"%s\", which fits on node \"%s\" beside the AI "
                     "plan's end state and the pods kept: a background pod is evicted only when "
                     "an AI workload needs its room", in->running[i].pod->name,
                     in->nodes[pos].node->name);
            return buf;
        }
    }
    for (size_t i = 0; i < in->npending; i++) {
        if (place[i] < 0) continue;
        const us_bg_pod *bp = &in->pending[i];
        /* candidate lists are ascending */
        bool allowed = bp->ncandidates > 0 &&
                       bsearch(&place[i], bp->candidates, bp->ncandidates, sizeof *bp->candidates,
                               cmp_int) != NULL;
        if (!allowed) {
            snprintf(buf, len, "pod \"%s\" may not go on node \"%s\"", bp->pod->name,
                     in->nodes[place[i]].node->name);
            return buf;
        }
        if (!us_use_fits(&idle[place[i]], in->nodes[place[i]].node, bp->wl->request, -1)) {
            snprintf(buf, len, "placing pod \"%s\" would put node \"%s\" over capacity: a pending "
                     "pod takes idle room only (what no pod holds now, evicted pods included)",
                     bp->pod->name, in->nodes[place[i]].node->name);
            return buf;
        }
        us_use_add(&idle[place[i]], in->nodes[place[i]].node, bp->wl->request, -1);
    }
    return NULL;
}

/* Node uses written out for a few nodes only (by position), one after the
 * other: a node use is 160 bytes, and an array of them for every node was
 * tens of megabytes to write, or to fault in page by page. */
typedef struct few_uses {
    int *at;               /* [pos] 1 + its entry in use, or 0: not written */
    us_use *use;
    size_t n, cap;
} few_uses;

/* Node pos's use, or NULL when it is not written out. */
static us_use *use_at(const few_uses *f, size_t pos) {
    return f->at[pos] ? &f->use[f->at[pos] - 1] : NULL;
}

/* Node pos's use written out, starting as *from when it was not; NULL
 * when memory runs out. */
static us_use *use_own(few_uses *f, size_t pos, const us_use *from) {
    if (f->at[pos]) return &f->use[f->at[pos] - 1];
    if (us_grow((void **)&f->use, &f->cap, f->n, sizeof *f->use) < 0) return NULL;
    f->use[f->n] = *from;
    f->at[pos] = (int)++f->n;
    return &f->use[f->n - 1];
}

static void few_uses_free(few_uses *f) {
    free(f->at);
    free(f->use);
}

/* The re-offer of one pool being put together.  Positions (pos) index the
 * plan's nodes; view indices (v) index the nodes the policy is shown. */
typedef struct work {
    us_plan *p;
    us_reoffer *out;
    /* held (what is taken now, whatever the policy says), end (what is
     * taken once the AI plan ends) and idle (held plus every offered
     * running pod) are written out only where they differ from the AI
     * view and the node's background total (held_of, end_of, idle_of) */
    few_uses held;         /* nodes with pods terminating, or a staying pod
                              that shares a device */
    few_uses end;          /* untouched nodes with a pod sharing a device */
    few_uses idle;         /* touched nodes */
    bool *touched;         /* [pos] the AI plan changed the node */
    bool *shown;           /* [pos] the node is in the view */
    int *view_of;          /* [pos] its view index, or -1 */
    int *pos_of;           /* [v] its position */
    us_bg_node *nodes;     /* [v] */
    us_use *vend;          /* [v] end, by view index */
    us_use *vidle;         /* [v] idle, by view index */
    size_t nview;
    us_bg_pod *running;    /* offered running pods */
    us_bg_pod *pending;
    int *cands;            /* every candidate list, one after the other */
    int *victims;          /* the plan's victims, in pod order */
    size_t nvictims, cap_victims;
    bool broken;           /* checking builds: idle_fits was not us_use_fits */
} work;

/* Pod i's room into what is held on its node.  0, or -1 when memory runs
 * out. */
static int add_held(work *w, int i) {
    const us_state *st = w->p->st;
    const us_pod *pd = &st->pods[i];
    size_t pos = (size_t)w->p->pos[pd->node];
    us_use *u = use_own(&w->held, pos, &w->p->ai[pos]);
    if (!u) return -1;
    us_use_add(u, &st->nodes[pd->node], st->workloads[pd->workload].request, pd->shared_dev);
    return 0;
}

/* What is held now on each node beyond the AI view: held and idle start
 * as the AI view plus every pod still terminating or about to (releasing
 * pods, and AI victims that were running with a grace).  The snapshot
 * listed the terminating pods (plan.h, podview.h); the
 * victims are the plan's own.  The pods of one node
 * are added in pod order, as a walk of the node's pods would add them, so
 * device slots come out the same.  0, or -1 when memory runs out. */
static int collect_bg(work *w) {
    const us_plan *p = w->p;
    const us_state *st = p->st;
    const int *term = p->terminating;
    size_t t = 0;
    for (size_t i = 0; i < p->npods; i++) {
        if (!(p->flags[i] & US_PF_VICTIM)) continue;
        if (us_grow((void **)&w->victims, &w->cap_victims, w->nvictims, sizeof *w->victims) < 0)
            return -1;
        w->victims[w->nvictims++] = (int)i;
        /* an AI victim that was running terminates for its grace period */
        const us_pod *pd = &st->pods[i];
        if (pd->state != US_POD_RUNNING || pd->node < 0 || p->pos[pd->node] < 0 ||
            !us_cycle_evict_terminates(p->opts, &st->workloads[pd->workload]))
            continue;
        for (; t < p->nterminating && term[t] < (int)i; t++)
            if (add_held(w, term[t]) < 0) return -1;
        if (add_held(w, (int)i) < 0) return -1;
    }
    for (; t < p->nterminating; t++)
        if (add_held(w, term[t]) < 0) return -1;
    return 0;
}

/* Is pod i one the re-offer may offer: running, of the background work
 * it offers (us_plan.wl_bg)?  Read on the pods of one node (us_plan_node_pods). */
static bool offerable(const us_plan *p, int i) {
    const us_pod *pd = &p->st->pods[i];
    return pd->state == US_POD_RUNNING && p->wl_bg[pd->workload];
}

/* What is taken on node pos once the AI plan ends: the AI view, and on a
 * node the AI plan left alone the background pods that stay there (all of
 * them: one that does not fit makes the node touched, mark_touched); *tmp
 * holds it when it is made here. */
static const us_use *end_of(const work *w, size_t pos, us_use *tmp);

/* Does want (whole devices: gpus of them) fit in u once beside (whole
 * devices, its gpus) is taken too?  As us_use_fits would answer on u with
 * beside added, without writing that use out.  Whole-GPU pods fit one
 * after the other exactly when their sum fits at once (every request is
 * whole devices, cpu and memory, none negative). */
static bool whole_fits(const us_use *u, const us_node *n, us_res beside, int beside_gpus,
                       us_res want, int gpus) {
    us_res used = us_res_add(u->used, beside);
    return want.v[US_CPU] <= n->cap.v[US_CPU] - used.v[US_CPU] &&
           want.v[US_MEM] <= n->cap.v[US_MEM] - used.v[US_MEM] &&
           gpus <= us_use_free_gpus(u, n) - beside_gpus;
}

/* Does a node's background total fit in u? */
static bool total_fits(const us_use *u, const us_node *n, const struct us_bg_total *t) {
    return whole_fits(u, n, (us_res){{0}}, 0, t->whole, t->gpus);
}

/* The total's whole-GPU pods into u, as one after the other would add them. */
static void total_add(us_use *u, const struct us_bg_total *t) {
    u->used = us_res_add(u->used, t->whole);
    u->whole += t->gpus;
}

/* The AI view of node pos with its background total added, in *tmp. */
static const us_use *ai_and_total(const us_plan *p, size_t pos, us_use *tmp) {
    *tmp = p->ai[pos];
    total_add(tmp, &p->bg_total[pos]);
    return tmp;
}

/* Add the offerable pods of node pos to u one by one, in pod order, while
 * each fits; true when all did (u is then what they leave). */
static bool walk_fits(const us_plan *p, size_t pos, us_use *u) {
    const us_state *st = p->st;
    const us_node *n = &st->nodes[p->nodes[pos]];
    size_t cnt;
    const int *pods = us_plan_node_pods(p, pos, &cnt);
    for (size_t k = 0; k < cnt; k++) {
        int i = pods[k];
        if (!offerable(p, i)) continue;
        us_res req = st->workloads[st->pods[i].workload].request;
        if (!us_use_fits(u, n, req, -1)) return false;
        us_use_add(u, n, req, -1);
    }
    return true;
}

#ifdef US_CHECK_INVARIANTS
/* Checking builds: a node's total decides what adding its pods one by one
 * in pod order decides, and leaves the same end state. */
static bool total_is_walk(const us_plan *p, size_t pos, bool fits, const us_use *after) {
    us_use u = p->ai[pos];
    bool all = walk_fits(p, pos, &u);
    return all == fits && (!fits || memcmp(&u, after, sizeof u) == 0);
}
#endif

/* The pool's kept verdicts on nodes left alone (us_pool_hints.fits), for
 * this plan's node positions: those of the last plan while no node was
 * added, removed or changed (the node spec version: the list and each
 * node's capacity are as they were), else all unknown; NULL without hints
 * (no stamps: us_plan_view_stamp), or when memory runs out (every node
 * is then checked). */
static uint64_t *kept_verdicts(us_plan *p) {
    us_pool_hints *h = p->hints;
    uint64_t specs = p->st->node_specs_version;
    if (!h || !p->ai_held || !specs) return NULL;
    if (!h->fits || h->nfits != p->nnodes || h->fits_version != specs) {
        uint64_t *f = calloc(p->nnodes + 1, sizeof *f);
        if (!f) return NULL;
        free(h->fits);
        h->fits = f;
        h->nfits = p->nnodes;
        h->fits_version = specs;
    }
    return h->fits;
}

/* Nodes the AI plan changed (a placement or an eviction), and nodes whose
 * background pods no longer fit beside the AI end state for another reason
 * (a lowered capacity, say): their running background pods are offered;
 * elsewhere they stay.  A node's pods are read one by one only when one of
 * them shares a device: then its end state (the AI view and every pod that
 * stays, added in pod order as gather adds them) is kept in w->end; else
 * its total answers (us_plan.bg_total) and end_of makes the end state when
 * asked, so a quiet cycle reads no pod that stays.  On a node found
 * touched, the end state is the AI view alone (its pods are offered, and
 * an offered pod holds no room at the end).  *noffered: how many pods are
 * offered.  A node left alone whose views carry the ledger stamp they
 * had when its pods last fitted (us_pool_hints.fits) is not checked again:
 * a quiet cycle checks the nodes that changed.  0; -1 when memory runs
 * out; in checking builds, -2 when a total decided otherwise than its pods
 * would, -3 when a node not checked again does not fit. */
static int mark_touched(work *w, size_t *noffered) {
    us_plan *p = w->p;
    const us_state *st = p->st;
    uint64_t *fits = kept_verdicts(p);
    us_cycle_profile *prof = p->opts ? p->opts->profile : NULL;
    *noffered = 0;
    for (size_t k = 0; k < p->nplaced; k++) w->touched[p->pos[p->pnode[p->placed[k]]]] = true;
    for (size_t k = 0; k < w->nvictims; k++) w->touched[p->pos[st->pods[w->victims[k]].node]] = true;
    for (size_t pos = 0; pos < p->nnodes; pos++) {
        const struct us_bg_total *t = &p->bg_total[pos];
        const us_node *n = &st->nodes[p->nodes[pos]];
        if (t->pods == 0) continue;
        if (w->touched[pos]) {  /* its next views carry a new stamp */
            *noffered += (size_t)t->pods;
            continue;
        }
        if (t->fractional == 0) {
            /* a node the plan left alone whose views are those its pods
             * were found to fit beside before: they still do */
            uint64_t stamp = fits ? us_plan_view_stamp(p, pos) : 0;
            if (stamp && fits[pos] == stamp) {
#ifdef US_CHECK_INVARIANTS
                if (!total_fits(&p->ai[pos], n, t)) return -3;
#endif
                if (prof) prof->nodes_fit_kept++;
                continue;
            }
            if (prof) prof->nodes_fit_asked++;
            w->touched[pos] = !total_fits(&p->ai[pos], n, t);
            if (fits) fits[pos] = w->touched[pos] ? 0 : stamp;
#ifdef US_CHECK_INVARIANTS
            us_use tmp;
            if (!total_is_walk(p, pos, !w->touched[pos], end_of(w, pos, &tmp))) return -2;
#endif
        } else {
            if (prof) prof->nodes_fit_asked++;
            us_use *end = use_own(&w->end, pos, &p->ai[pos]);
            if (!end) return -1;
            w->touched[pos] = !walk_fits(p, pos, end);
        }
        if (w->touched[pos]) *noffered += (size_t)t->pods;
    }
    return 0;
}

static const us_use *end_of(const work *w, size_t pos, us_use *tmp) {
    const us_plan *p = w->p;
    const struct us_bg_total *t = &p->bg_total[pos];
    if (w->touched[pos] || t->pods == 0) return &p->ai[pos];
    if (t->fractional) return use_at(&w->end, pos);
    return ai_and_total(p, pos, tmp);
}

/* What is held on node pos now: the AI view, the pods terminating there
 * and, on a node the AI plan left alone, the background pods that stay
 * (once gather has run).  Written out where pods were added one by one,
 * else the AI view plus the node's total, in *tmp. */
static const us_use *held_of(const work *w, size_t pos, us_use *tmp) {
    const us_plan *p = w->p;
    const struct us_bg_total *t = &p->bg_total[pos];
    const us_use *held = use_at(&w->held, pos);
    if (held) return held;
    if (w->touched[pos] || t->pods == 0) return &p->ai[pos];
    return ai_and_total(p, pos, tmp);
}

/* What is idle room on node pos for a pending pod: held, plus the offered
 * pods, which are on touched nodes only. */
static const us_use *idle_of(const work *w, size_t pos, us_use *tmp) {
    return w->touched[pos] ? use_at(&w->idle, pos) : held_of(w, pos, tmp);
}

/* Does req fit in the idle room of node pos?  As us_use_fits on idle_of,
 * without writing the use out where it is the AI view plus the node's
 * total of whole-GPU pods: the candidate search asks this of every node
 * for each kind of pending pod.  Checking builds compare the two and set
 * w->broken when they differ. */
static bool idle_fits(work *w, size_t pos, const us_node *n, us_res req) {
    const us_plan *p = w->p;
    const struct us_bg_total *t = &p->bg_total[pos];
    us_use tmp;
    if (w->touched[pos] || use_at(&w->held, pos) || t->pods == 0 || us_req_is_fractional(req))
        return us_use_fits(idle_of(w, pos, &tmp), n, req, -1);
    bool fits = whole_fits(&p->ai[pos], n, t->whole, t->gpus, req, us_req_whole_gpus(req));
#ifdef US_CHECK_INVARIANTS
    if (fits != us_use_fits(idle_of(w, pos, &tmp), n, req, -1)) w->broken = true;
#endif
    return fits;
}

/* Background pods of the pool: the running ones on touched nodes, offered
 * by name (out->running), and pending ones of the work the re-offer offers
 * by name (out->pending).  Running pods on untouched nodes stay and keep
 * holding their room, and are not listed: commit evicts only offered pods,
 * so a quiet cycle sorts few and reads none that stays.  A staying pod
 * holds its room in held, end and idle alike: in end through end_of, in
 * held (which is idle where it stays, idle_of) here, through its node's
 * total where no pod of the node shares a device (as us_usesum would add
 * them), else one by one in pod order.  Idle room on a touched node starts
 * from held, which is final there: no pod stays on it. */
static int gather(work *w, size_t noffered) {
    us_plan *p = w->p;
    us_state *st = p->st;
    us_reoffer *out = w->out;
    /* many offered (a first cycle offers nearly all): one pass over the
     * running ones in pod order beats reading node after node, and hands
     * the sort by name its input in creation order, often nearly sorted */
    bool by_pod = noffered > p->nbg_running / 8;
    for (size_t k = 0; by_pod && k < p->nbg_running; k++) {
        int i = p->bg_running[k];
        if (w->touched[p->pos[st->pods[i].node]]) out->running[out->nrunning++] = i;
    }
    for (size_t pos = 0; pos < p->nnodes; pos++) {
        const struct us_bg_total *t = &p->bg_total[pos];
        const us_node *n = &st->nodes[p->nodes[pos]];
        us_use tmp;
        /* idle room on a touched node starts from what is held, final
         * there: no pod stays */
        if (w->touched[pos] && !use_own(&w->idle, pos, held_of(w, pos, &tmp))) return -1;
        if (t->pods == 0 || (w->touched[pos] && by_pod)) continue;
        if (!w->touched[pos] && t->fractional == 0) {
            /* written out: the total joins it; else held_of adds it */
            us_use *held = use_at(&w->held, pos);
            if (held) total_add(held, t);
            continue;
        }
        us_use *held = w->touched[pos] ? NULL : use_own(&w->held, pos, &p->ai[pos]);
        if (!w->touched[pos] && !held) return -1;
        size_t cnt;
        const int *pods = us_plan_node_pods(p, pos, &cnt);
        for (size_t k = 0; k < cnt; k++) {
            int i = pods[k];
            if (!offerable(p, i)) continue;
            if (w->touched[pos]) {
                out->running[out->nrunning++] = i;
                continue;
            }
            us_use_add(held, n, st->workloads[st->pods[i].workload].request, -1);
        }
    }
    memcpy(out->pending, p->bg_pending, p->nbg_pending * sizeof *out->pending);
    out->npending = p->nbg_pending;
    if (p->hints) {
        /* without memory for the hint the sort is a full one: same order */
        (void)us_order_sort(&p->hints->bg_running, out->running, out->nrunning, pod_key, by_pod_name, st);
        (void)us_order_sort(&p->hints->bg_pending, out->pending, out->npending, pod_key, by_pod_name, st);
    } else {
        us_sort(out->running, out->nrunning, sizeof *out->running, by_pod_name, st);
        us_sort(out->pending, out->npending, sizeof *out->pending, by_pod_name, st);
    }
    for (size_t i = 0; i < out->nrunning; i++) {
        int pod = out->running[i], pos = p->pos[st->pods[pod].node];
        const us_workload *wl = &st->workloads[st->pods[pod].workload];
        w->running[i] = (us_bg_pod){&st->pods[pod], wl, pos, NULL, 0};
        w->shown[pos] = true;
        us_use_add(use_at(&w->idle, pos), &st->nodes[p->nodes[pos]], wl->request, -1);
    }
    return 0;
}

/* Same selector, tolerations and request: pods that may go to the same
 * nodes.  Groups are found by hash (hashidx.h): many distinct background
 * workloads pending at once made a scan of the groups quadratic. */
static bool same_need(const us_workload *a, const us_workload *b) {
    return memcmp(&a->request, &b->request, sizeof a->request) == 0 &&
           us_labels_equal(&a->node_selector, &b->node_selector) &&
           us_tolerations_equal(&a->tolerations, &b->tolerations);
}

static uint64_t need_hash(const us_workload *w) {
    uint64_t h = us_hash_words(US_HASH_SEED, &w->request, sizeof w->request);
    return us_hash_finish(us_hash_tolerations(us_hash_labels(h, &w->node_selector), &w->tolerations));
}

typedef struct groups {
    const us_state *st;
    const int *lead;  /* a pod per group */
} groups;

static bool group_is(int g, const void *key, void *ctx) {
    const groups *gs = ctx;
    return same_need(&gs->st->workloads[gs->st->pods[gs->lead[g]].workload], key);
}

/* Candidate lists: the nodes a pending pod may go to and has room on.  A
 * pinned pod (a DaemonSet's) has at most its own node; other pods share one
 * list per selector and request, so the work stays linear in pods plus
 * nodes.  Lists hold positions, ascending; every candidate is shown. */
static int candidates(work *w) {
    us_plan *p = w->p;
    const us_state *st = p->st;
    const us_reoffer *out = w->out;
    size_t ngroups = 0, npinned = 0, ncand = 0;
    int *lead = malloc((out->npending + 1) * sizeof *lead);
    int *group = malloc((out->npending + 1) * sizeof *group);  /* each pending pod's */
    const int **list = malloc((out->npending + 1) * sizeof *list);
    size_t *len = malloc((out->npending + 1) * sizeof *len);
    us_hashidx byneed = {0};
    groups gs = {st, lead};
    int rc = -1;
    if (!lead || !group || !list || !len) goto out;
    for (size_t i = 0; i < out->npending; i++) {
        const us_pod *pd = &st->pods[out->pending[i]];
        const us_workload *wl = &st->workloads[pd->workload];
        group[i] = -1;
        if (pd->pin >= 0) {
            npinned++;
            continue;
        }
        uint64_t h = need_hash(wl);
        int g = us_hashidx_find(&byneed, h, group_is, wl, &gs);
        if (g < 0) {
            if (us_hashidx_add(&byneed, h, (int)ngroups) < 0) goto out;
            g = (int)ngroups;
            lead[ngroups++] = out->pending[i];
        }
        group[i] = g;
    }
    if (!(w->cands = malloc((ngroups * p->nnodes + npinned + 1) * sizeof *w->cands))) goto out;
    for (size_t g = 0; g < ngroups; g++) {
        us_res req = st->workloads[st->pods[lead[g]].workload].request;
        list[g] = w->cands + ncand;
        for (size_t k = 0; k < p->nnodes; k++)
            if (us_place_allowed(p, lead[g], p->nodes[k]) &&
                idle_fits(w, k, &st->nodes[p->nodes[k]], req)) {
                w->cands[ncand++] = (int)k;
                w->shown[k] = true;
            }
        len[g] = (size_t)(w->cands + ncand - list[g]);
    }
    for (size_t i = 0; i < out->npending; i++) {
        int pod = out->pending[i];
        const us_pod *pd = &st->pods[pod];
        const us_workload *wl = &st->workloads[pd->workload];
        const int *mine = NULL;
        size_t n = 0;
        if (pd->pin >= 0) {
            int k = p->pos[pd->pin];
            if (k >= 0 && us_place_allowed(p, pod, pd->pin) &&
                idle_fits(w, (size_t)k, &st->nodes[pd->pin], wl->request)) {
                w->cands[ncand] = k;
                mine = w->cands + ncand++;
                n = 1;
                w->shown[k] = true;
            }
        } else {
            mine = len[group[i]] ? list[group[i]] : NULL;  /* an empty list has no address */
            n = len[group[i]];
        }
        w->pending[i] = (us_bg_pod){pd, wl, -1, mine, n};
    }
    rc = 0;
out:
    free(lead);
    free(group);
    free(list);
    free(len);
    us_hashidx_free(&byneed);
    return rc;
}

/* The view shows the nodes that matter this cycle (offered pods' nodes and
 * candidates), in name order; positions become view indices. */
static void build_view(work *w) {
    us_plan *p = w->p;
    const us_state *st = p->st;
    for (size_t k = 0; k < p->nnodes; k++) {
        w->view_of[k] = -1;
        if (!w->shown[k]) continue;
        const us_node *n = &st->nodes[p->nodes[k]];
        us_use tmp, itmp, htmp;
        const us_use *end = end_of(w, k, &tmp), *idle = idle_of(w, k, &itmp),
                     *held = held_of(w, k, &htmp);
        w->view_of[k] = (int)w->nview;
        w->pos_of[w->nview] = (int)k;
        w->vend[w->nview] = *end;
        w->vidle[w->nview] = *idle;
        w->nodes[w->nview++] = (us_bg_node){n,
                                            us_res_sub(n->cap, held->used),
                                            us_use_free_gpus(held, n),
                                            us_res_sub(n->cap, end->used),
                                            us_use_free_gpus(end, n),
                                            us_res_sub(n->cap, idle->used),
                                            us_use_free_gpus(idle, n),
                                            us_nodelabels_of(p->labels, k)};
    }
    for (size_t i = 0; i < w->out->nrunning; i++) w->running[i].node = w->view_of[w->running[i].node];
    /* lists may be shared: remap each once (positions are >= 0, views
     * become negative while in flight, then flipped back) */
    for (size_t j = 0; j < w->out->npending; j++) {
        us_bg_pod *bp = &w->pending[j];
        int *c = (int *)bp->candidates;
        if (bp->ncandidates == 0 || c[0] < 0) continue;
        for (size_t k = 0; k < bp->ncandidates; k++) c[k] = -1 - w->view_of[c[k]];
    }
    for (size_t j = 0; j < w->out->npending; j++) {
        us_bg_pod *bp = &w->pending[j];
        int *c = (int *)bp->candidates;
        if (bp->ncandidates == 0 || c[0] >= 0) continue;
        for (size_t k = 0; k < bp->ncandidates; k++) c[k] = -1 - c[k];
    }
}

/* Ask background.lua (the version in force, then the last good one), check
 * its answer, and fall back to the built-in policy.  keep/place are by the
 * offered and pending lists; place holds view indices. */
static int decide(work *w, bool *keep, int *place, us_err *err) {
    us_plan *p = w->p;
    us_bg_input in = {w->nodes, w->nview, w->running, w->out->nrunning, w->pending, w->out->npending};
    us_use *scratch = malloc(2 * (w->nview + 1) * sizeof *scratch), *iscratch = scratch + w->nview + 1;
    size_t nkeep = w->out->nrunning + 1;
    if (!scratch) return us_err_nomem(err);
    int rc = 0;
    bool decided = false;
    for (us_policy *v = p->pol; v && !decided; v = us_policy_previous(v)) {
        us_err perr = {0};
        char why[512], what[700];
        int may = us_plan_policy_may_run(p, v, "background.lua");
        if (may <= 0) {  /* the cycle's budget is spent: the built-in decides */
            rc = may;
            break;
        }
        memset(keep, 0, nkeep * sizeof *keep);
        double t0 = us_plan_policy_start(p);
        int prc = us_policy_reoffer(v, &in, keep, place, &perr);
        us_plan_policy_done(p, t0, 1);
        if (prc < 0) {
            if ((rc = us_plan_policy_event(p, v, "PolicyFailed", "background.lua", perr.msg)) < 0)
                break;
            continue;
        }
        memcpy(scratch, w->vend, w->nview * sizeof *scratch);
        memcpy(iscratch, w->vidle, w->nview * sizeof *iscratch);
        const char *bad = check(&in, keep, place, scratch, iscratch, why, sizeof why);
        if (!bad) {
            decided = true;
            continue;
        }
        snprintf(what, sizeof what, "background.lua: result rejected: %s", bad);
        if ((rc = us_plan_policy_event(p, v, "PolicyRejected", "background.lua", what)) < 0) break;
    }
    if (rc < 0) {
        us_err_nomem(err);
    } else if (!decided) {
        memset(keep, 0, nkeep * sizeof *keep);
        rc = us_builtin_reoffer(&in, keep, place, err);
        /* checked like any policy; keeping, in view order, every offered
         * pod that still fits beside the end state and placing nothing
         * obeys every rule, so that is what a rejected built-in result
         * becomes */
        char why[512];
        const char *bad = NULL;
        if (rc == 0) {
            memcpy(scratch, w->vend, w->nview * sizeof *scratch);
            memcpy(iscratch, w->vidle, w->nview * sizeof *iscratch);
            bad = check(&in, keep, place, scratch, iscratch, why, sizeof why);
        }
        if (bad) {
            const char *ann[] = {"policy", "background", "policy-id", "builtin", "pool", p->pool, NULL};
            memcpy(scratch, w->vend, w->nview * sizeof *scratch);
            for (size_t i = 0; i < in.nrunning; i++) {
                const us_bg_pod *bp = &in.running[i];
                const us_node *n = in.nodes[bp->node].node;
                keep[i] = us_use_fits(&scratch[bp->node], n, bp->wl->request, -1);
                if (keep[i]) us_use_add(&scratch[bp->node], n, bp->wl->request, -1);
            }
            for (size_t i = 0; i < w->out->npending; i++) place[i] = -1;
            if (us_log_event(p->log, "Warning", "PolicyRejected", "background (built-in)", ann,
                             "built-in re-offer: result rejected: %s; this cycle keeps what "
                             "fits and places no background pod on pool \"%s\"", bad, p->pool) < 0)
                rc = us_err_nomem(err);
        }
    }
    free(scratch);
    return rc;
}

int us_reoffer_run(us_plan *p, us_reoffer *out, us_err *err) {
    memset(out, 0, sizeof *out);
    size_t nn = p->nnodes + 1;
    work w = {.p = p, .out = out};
    int *place = NULL;
    /* node uses are large (a slot count per device): held, end and idle
     * are written out for a few nodes only (few_uses), the view's arrays
     * by view index as build_view fills them, never zeroed */
    w.held.at = calloc(nn, sizeof *w.held.at);
    w.end.at = calloc(nn, sizeof *w.end.at);
    w.idle.at = calloc(nn, sizeof *w.idle.at);
    w.touched = calloc(nn, sizeof *w.touched);
    w.shown = calloc(nn, sizeof *w.shown);
    w.view_of = malloc(nn * sizeof *w.view_of);
    w.pos_of = malloc(nn * sizeof *w.pos_of);
    w.nodes = malloc(nn * sizeof *w.nodes);
    w.vend = malloc(nn * sizeof *w.vend);
    w.vidle = malloc(nn * sizeof *w.vidle);
    int rc = -1;
    if (!w.held.at || !w.end.at || !w.idle.at || !w.touched || !w.shown || !w.view_of || !w.pos_of ||
        !w.nodes || !w.vend || !w.vidle || collect_bg(&w) < 0) {
        us_err_nomem(err);
        goto done;
    }
    /* what follows is per offered or pending pod: sized by them, not by
     * every pod (zeroing arrays of every pod each cycle cost more than
     * using them) */
    size_t noffered, npending = p->nbg_pending + 1;
    int marked = mark_touched(&w, &noffered);
    if (marked == -2) {
        us_err_set(err, US_EINVARIANT, "invariant \"reoffer-totals\" broken: a node's total of "
                   "background pods decided otherwise than its pods one by one");
        goto done;
    }
    if (marked == -3) {
        us_err_set(err, US_EINVARIANT, "invariant \"reoffer-verdicts\" broken: a node whose views "
                   "kept their ledger stamp no longer fits its background pods");
        goto done;
    }
    if (marked < 0) {
        us_err_nomem(err);
        goto done;
    }
    place = calloc(npending, sizeof *place);
    w.running = malloc((noffered + 1) * sizeof *w.running);
    w.pending = malloc(npending * sizeof *w.pending);
    out->running = malloc((noffered + 1) * sizeof *out->running);
    out->keep = calloc(noffered + 1, sizeof *out->keep);
    out->pending = malloc(npending * sizeof *out->pending);
    out->place = malloc(npending * sizeof *out->place);
    if (!place || !w.running || !w.pending || !out->running || !out->keep || !out->pending ||
        !out->place) {
        us_err_nomem(err);
        goto done;
    }
    if (gather(&w, noffered) < 0 || candidates(&w) < 0) {
        us_err_nomem(err);
        goto done;
    }
    if (w.broken) {
        us_err_set(err, US_EINVARIANT, "invariant \"reoffer-totals\" broken: a node's idle room "
                   "asked through its total of background pods is not its room written out");
        goto done;
    }
    build_view(&w);
    if (decide(&w, out->keep, place, err) < 0) goto done;
    for (size_t i = 0; i < out->npending; i++)
        out->place[i] = place[i] >= 0 ? p->nodes[w.pos_of[place[i]]] : -1;
    rc = 0;
done:
    if (rc < 0) us_reoffer_free(out);
    free(place);
    few_uses_free(&w.held);
    few_uses_free(&w.end);
    few_uses_free(&w.idle);
    free(w.touched);
    free(w.shown);
    free(w.view_of);
    free(w.pos_of);
    free(w.nodes);
    free(w.vend);
    free(w.vidle);
    free(w.running);
    free(w.pending);
    free(w.cands);
    free(w.victims);
    return rc;
}
