/*
 * plan.c — the working plan of one cycle on one pool: node usage in the AI
 * planning view, tentative placements and evictions with an undo log, and
 * queue allocation.  See plan.h.
 *
 * Virtual eviction happens here: background pods never enter the AI view,
 * and releasing pods are already out of it, so AI planning sees their
 * resources as free.
 */
#include "plan.h"

#include "cyclecache.h"
#include "ledger.h"
#include "nodeclass.h"
#include "nodelabels.h"
#include "sort.h"
#include "usesum.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- snapshot --------------------------------------------------------- */

static int by_node_name(const void *a, const void *b, void *ctx) {
    const us_state *st = ctx;
    return strcmp(st->nodes[*(const int *)a].name, st->nodes[*(const int *)b].name);
}

static uint64_t node_key(int node, void *ctx) {
    (void)ctx;
    return (uint64_t)node;
}

bool us_plan_is_ai(const us_plan *p, int pod) { return p->wl_ai[p->st->pods[pod].workload]; }

bool us_plan_holds_fixed(const us_plan *p, int pod) {
    const us_pod *pd = &p->st->pods[pod];
    const us_workload *w = &p->st->workloads[pd->workload];
    return (w->external || (w->blocked && w->state == US_WL_ACTIVE)) &&
           (pd->state == US_POD_RUNNING || pd->state == US_POD_PIPELINED) && !pd->gone &&
           pd->node >= 0 && p->pos[pd->node] >= 0;
}

static void queue_add(us_plan *p, int q, us_res req, bool np, int sign) {
    for (; q >= 0; q = p->st->queues[q].parent) {
        if (p->qtouched && !p->qtouched[q]) {  /* queueserve.c's rounds */
            p->qtouched[q] = true;
            p->qtouch[p->nqtouch++] = q;
        }
        for (int r = 0; r < US_NRES; r++) {
            p->alloc[q].v[r] = us_sat_add(p->alloc[q].v[r], sign * req.v[r]);
            if (np) p->alloc_np[q].v[r] = us_sat_add(p->alloc_np[q].v[r], sign * req.v[r]);
        }
    }
}

/* req taken n times, saturating as n additions would (requests are never
 * negative) */
static us_res res_times(us_res req, int n) {
    for (int r = 0; r < US_NRES; r++)
        if (__builtin_mul_overflow(req.v[r], (int64_t)n, &req.v[r])) req.v[r] = INT64_MAX;
    return req;
}

/* Queue allocation and demand from the AI pods counted per workload: one
 * walk up the queue tree per workload, not per pod.  Sums of requests,
 * which are never negative, saturate the same in any grouping. */
static void queue_sums(us_plan *p, const int *wanted) {
    const us_state *st = p->st;
    for (size_t i = 0; i < st->nworkloads; i++) {
        const us_workload *w = &st->workloads[i];
        if (!p->wl_ai[i]) continue;
        if (p->held[i] > 0)
            queue_add(p, w->queue, res_times(w->request, p->held[i]),
                      w->preemptibility != US_PREEMPTIBLE, 1);
        if (wanted[i] > 0) {
            us_res d = res_times(w->request, wanted[i]);
            for (int q = w->queue; q >= 0; q = st->queues[q].parent)
                p->demand[q] = us_res_add(p->demand[q], d);
        }
    }
}

/* The pool's nodes present, in index order, into `into`. */
static void list_fresh(us_plan *p, int *into, size_t *n) {
    const us_state *st = p->st;
    *n = 0;
    for (size_t i = 0; i < st->nnodes; i++)
        if (!st->nodes[i].removed && strcmp(st->nodes[i].pool, p->pool) == 0) into[(*n)++] = (int)i;
}

/* The pool's nodes present, sorted by name, into p->nodes: the list the
 * last cycle made while no node changed since (cyclecache.h), else listed
 * and sorted (with the last order as a hint) and kept for the next.
 * Checking builds list them afresh anyway and compare.  0, -1 when memory
 * runs out, -2 when the kept list is not the list (p->broken says so). */
static int list_nodes(us_plan *p) {
    us_state *st = p->st;
    us_pool_hints *h = p->hints;
    if (h && h->nodes_version && h->nodes_version == st->nodes_version) {
        memcpy(p->nodes, h->node_list, h->nnode_list * sizeof *p->nodes);
        p->nnodes = h->nnode_list;
#ifdef US_CHECK_INVARIANTS
        int *fresh = malloc((st->nnodes + 1) * sizeof *fresh);
        size_t n;
        if (!fresh) return -1;
        list_fresh(p, fresh, &n);
        us_sort(fresh, n, sizeof *fresh, by_node_name, st);
        bool same = n == p->nnodes && memcmp(fresh, p->nodes, n * sizeof *fresh) == 0;
        free(fresh);
        if (!same) {
            p->broken = "invariant \"node-list\" broken: the pool's node list kept from the "
                        "last cycle is not its nodes by name (a change to the nodes did not "
                        "move the state's node version)";
            return -2;
        }
#endif
        return 0;
    }
    list_fresh(p, p->nodes, &p->nnodes);
    if (!h) {
        us_sort(p->nodes, p->nnodes, sizeof *p->nodes, by_node_name, st);
        return 0;
    }
    (void)us_order_sort(&h->nodes, p->nodes, p->nnodes, node_key, by_node_name, st);
    h->nodes_version = 0;
    if (h->cap_node_list < p->nnodes + 1) {
        int *list = realloc(h->node_list, (p->nnodes + 1) * sizeof *list);
        if (!list) return 0;  /* no list kept: the next cycle lists them again */
        h->node_list = list;
        h->cap_node_list = p->nnodes + 1;
    }
    memcpy(h->node_list, p->nodes, p->nnodes * sizeof *h->node_list);
    h->nnode_list = p->nnodes;
    h->nodes_version = st->nodes_version;
    return 0;
}

#ifdef US_CHECK_INVARIANTS
/* Are p->ai and p->bg_total what the pool's pods hold, each pod counted
 * where us_view_share says (a second statement of podview.c's rec_of and
 * the ledger's rule)?  Pools by name here, not by the ledger's numbers, so
 * a wrong number fails it too: not to be replaced by us_ledger_take.  1
 * yes, 0 no, -1 when memory runs out. */
static int same_as_counted(const us_plan *p) {
    const us_state *st = p->st;
    size_t n = p->nnodes ? p->nnodes : 1;
    us_use *ai = calloc(n, sizeof *ai);
    us_bg_total *bg = calloc(n, sizeof *bg);
    us_usesum sum;
    if (!ai || !bg || us_usesum_init(&sum, p->nnodes, &ai, 1) < 0) {
        free(ai);
        free(bg);
        return -1;
    }
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *pod = &st->pods[i];
        const us_workload *w = &st->workloads[pod->workload];
        if (pod->node < 0 || p->pos[pod->node] < 0) continue;
        size_t at = (size_t)p->pos[pod->node];
        int share = us_view_share(us_view_kind(w), strcmp(w->pool, p->pool) == 0, pod->state,
                                  pod->gone);
        if (share == US_SHARE_AI)
            us_usesum_add(&sum, at, &st->nodes[pod->node], w->request, pod->shared_dev);
        else if (share == US_SHARE_BG)
            (void)us_bg_total_add(&bg[at], w->request, 1);
    }
    us_usesum_flush_all(&sum);
    us_usesum_free(&sum);
    int same = 1;
    for (size_t k = 0; k < p->nnodes && same; k++)
        same = us_use_equal(&ai[k], &p->ai[k]) && us_use_top_holds(&p->ai[k]) &&
               memcmp(&bg[k], &p->bg_total[k], sizeof bg[k]) == 0;
    free(ai);
    free(bg);
    return same;
}

/* Checking builds: does set leave out a pod the pool's snapshot must
 * read (one of its workloads', by name, or one on its nodes)?  1 when
 * it does, 0 when not, -1 (memory). */
static int left_out(const us_plan *p, const us_pod_set *set, size_t nread) {
    const us_state *st = p->st;
    bool *read = calloc(st->npods ? st->npods : 1, sizeof *read);
    if (!read) return -1;
    for (size_t x = 0; x < nread; x++) read[us_pod_set_at(set, x)] = true;
    int left = 0;
    for (size_t i = 0; i < st->npods && !left; i++) {
        const us_pod *pd = &st->pods[i];
        left = !read[i] && (strcmp(st->workloads[pd->workload].pool, p->pool) == 0 ||
                            (pd->node >= 0 && p->pos[pd->node] >= 0));
    }
    free(read);
    return left;
}
#endif

int us_plan_snapshot(us_plan *p, us_state *st, const char *pool, double now, us_policy *pol,
                     const us_cycle_opts *o, us_cycle_log *log, const us_pod_set *set) {
    memset(p, 0, sizeof *p);
    p->st = st;
    p->pool = pool;
    p->now = now;
    p->pol = pol;
    p->opts = o;
    p->log = log;
    p->score_pol = pol;
    p->npods = st->npods;
    size_t nq = st->nqueues ? st->nqueues : 1, nw = st->nworkloads ? st->nworkloads : 1;
    size_t np = st->npods ? st->npods : 1, nn = st->nnodes ? st->nnodes : 1;

    p->hints = us_cycle_cache_pool(o ? o->cache : NULL, pool);
    /* per-pod arrays read only where written are not zeroed, nor set:
     * pnode and pslot are read only for pods placed (US_PF_NEW), evictor
     * only for victims (US_PF_VICTIM), each written when the flag is set;
     * placed as far as it is filled.  On a large cluster setting them was
     * a cycle's largest memset, then a write per pod that touched every
     * page of three arrays */
    p->nodes = calloc(nn, sizeof *p->nodes);
    p->pos = calloc(nn, sizeof *p->pos);
    /* set below, copied or zeroed: the arrays the pool's last plan had
     * (their pages mapped, each of ai a use), else fresh (zeroed: ai's
     * copies need uses there) */
    if (p->hints && p->hints->ai && p->hints->ncap >= nn) {
        p->ai = p->hints->ai;
        p->bg_total = p->hints->bg_total;
        p->hints->ai = NULL;
        p->hints->bg_total = NULL;
        /* what they hold, for the same node positions */
        if (p->hints->ai_held && p->hints->ai_nodes_version == st->nodes_version && st->nodes_version) {
            p->ai_held = p->hints->ai_held;
            p->hints->ai_held = NULL;
        }
    } else {
        p->ai = calloc(nn, sizeof *p->ai);
        p->bg_total = malloc(nn * sizeof *p->bg_total);
    }
    if (p->hints && !p->ai_held) p->ai_held = calloc(nn, sizeof *p->ai_held);
    p->ai_nodes_version = st->nodes_version;
    p->nai = nn;
    p->flags = malloc(np * sizeof *p->flags);  /* set below, from what the pods say */
    p->pnode = malloc(np * sizeof *p->pnode);
    p->pslot = malloc(np * sizeof *p->pslot);
    p->pact = calloc(np, sizeof *p->pact);
    p->evictor = malloc(np * sizeof *p->evictor);
    p->placed = malloc(np * sizeof *p->placed);
    p->held = malloc(nw * sizeof *p->held);
    p->wl_ai = calloc(nw, sizeof *p->wl_ai);
    p->wl_terminating = malloc(nw * sizeof *p->wl_terminating);
    p->wl_bg = calloc(nw, sizeof *p->wl_bg);
    p->wl_placed = calloc(nw, sizeof *p->wl_placed);
    p->alloc = calloc(nq, sizeof *p->alloc);
    p->alloc_np = calloc(nq, sizeof *p->alloc_np);
    p->demand = calloc(nq, sizeof *p->demand);
    p->fair = calloc(nq * US_NRES, sizeof *p->fair);
    uint8_t *wkind = malloc(nw * sizeof *wkind);  /* [nworkloads] us_pv_wkind */
    if (!p->nodes || !p->pos || !p->ai || !p->flags || !p->pnode || !p->pslot || !p->pact ||
        !p->evictor || !p->placed || !p->held || !p->bg_total || !p->wl_bg || !p->wl_placed ||
        !p->wl_ai || !p->wl_terminating || !p->alloc || !p->alloc_np || !p->demand || !p->fair ||
        !wkind)
        goto fail;

    /* AI jobs of this pool: active, not background, not blocked.  Whether
     * a workload is of the pool: its number, when the ledger has them and
     * the pool has nodes, else its name */
    const us_ledger *ledger = o && o->cache ? &o->cache->ledger : NULL;
    const int *wpool = us_ledger_workload_pools(ledger, st);
    int pool_number = wpool ? us_ledger_pool_number(ledger, pool) : -1;
    for (size_t w = 0; w < st->nworkloads; w++) {
        const us_workload *wl = &st->workloads[w];
        bool own = pool_number >= 0 ? wpool[w] == pool_number : strcmp(wl->pool, pool) == 0;
#ifdef US_CHECK_INVARIANTS
        if (own != (strcmp(wl->pool, pool) == 0)) {
            free(wkind);
            us_plan_free(p);
            p->broken = "invariant \"pool-list\" broken: a workload's pool number kept by the "
                        "ledger is not its pool";
            return -2;
        }
#endif
        wkind[w] = us_pv_wkind(wl, own);
        p->wl_ai[w] = wkind[w] & US_PVW_AI;
        p->wl_bg[w] = wkind[w] & US_PVW_BG;
    }
    int listed = list_nodes(p);
    if (listed == -2) {
        const char *broken = p->broken;
        free(wkind);
        us_plan_free(p);
        p->broken = broken;
        return -2;
    }
    if (listed < 0) goto fail;
    for (size_t i = 0; i < st->nnodes; i++) p->pos[i] = -1;
    for (size_t i = 0; i < p->nnodes; i++) p->pos[p->nodes[i]] = (int)i;
    if (!(p->labels = us_nodelabels_new(st, pol, p->nodes, p->nnodes))) goto fail;

    /* the AI view and background totals: the ledger's, kept across cycles
     * (ledger.h), when it can tell them; else added up from the pods in
     * pod order (a fractional pod with no device takes the slot the pods
     * before it leave) */
    size_t copied = 0;
    bool kept = us_ledger_views(ledger, st, p->nodes, p->nnodes, p->pos, p->ai, p->bg_total,
                                p->ai_held, &copied) == 0;
    if (!kept && p->ai_held) memset(p->ai_held, 0, nn * sizeof *p->ai_held);
    /* copied for the pool's nodes, or to be added up from zero; zeroed
     * past them all the same (a large array zeroed and then copied over
     * was a cycle's largest memset) */
    size_t from = kept ? p->nnodes : 0;
    memset(p->ai + from, 0, (nn - from) * sizeof *p->ai);
    memset(p->bg_total + from, 0, (nn - from) * sizeof *p->bg_total);
    if (kept && o->profile) {
        o->profile->nodes_view_kept += p->nnodes;
        o->profile->nodes_view_copied += copied;
    }
    us_usesum ai;
    if (!kept && us_usesum_init(&ai, p->nnodes, &p->ai, 1) < 0) goto fail;

    /* What the pods say (virtual eviction, pods by node, pending pods by
     * workload, the counts per workload): kept with the pool's hints and
     * followed through the pods changed since the last cycle, else read
     * from every pod of the pool (podview.h), adding up the AI view as it
     * reads them when the ledger could not tell it */
    us_podview *view = p->hints ? p->hints->view : NULL;
    if (p->hints && !view && (view = calloc(1, sizeof *view))) p->hints->view = view;
    if (!view) view = p->own_view = calloc(1, sizeof *view);
    p->view = view;
    us_podview_in in = {st, p->pos, p->nnodes, wkind, o && o->reported_pods, set, p->hints != NULL,
                        kept ? NULL : &ai, kept ? NULL : p->bg_total};
    const char *broken = NULL;
    int updated = view ? us_podview_update(view, &in, &broken) : -1;
    free(wkind);
    wkind = NULL;
    if (!kept && updated == 0 && !view->rebuilt) {
        /* followed: the sums from the records, in pod order (the pods
         * of a node lie far apart) */
        for (size_t i = 0; i < st->npods; i++) {
            uint16_t r = view->rec[i];
            if (!(r & (US_PV_VIEW | US_PV_BGRUN))) continue;
            const us_pod *pod = &st->pods[i];
            size_t pos = (size_t)view->at[i];
            us_res req = st->workloads[pod->workload].request;
            if (r & US_PV_VIEW)
                us_usesum_add(&ai, pos, &st->nodes[pod->node], req, pod->shared_dev);
            else  /* saturated: kept so, as every sum here */
                (void)us_bg_total_add(&p->bg_total[pos], req, 1);
        }
    }
    if (!kept) {
        us_usesum_flush_all(&ai);
        us_usesum_free(&ai);
    }
    if (updated == -2) {
        us_plan_free(p);
        p->broken = broken;
        return -2;
    }
    if (updated < 0) goto fail;
    if (o && o->profile) o->profile->pods_read += view->read;
#ifdef US_CHECK_INVARIANTS
    if (set && view->rebuilt) {
        int left = left_out(p, set, set->n + (st->npods - set->from));
        if (left < 0) goto fail;
        if (left > 0) {
            us_plan_free(p);
            p->broken = "invariant \"pool-pods\" broken: a pod of the pool's workloads or on its "
                        "nodes is not among the pods its snapshot read";
            return -2;
        }
    }
#endif
    _Static_assert((int)US_PV_HELD == (int)US_PF_HELD, "a pod's record gives its plan flag as it is");
    for (size_t i = 0; i < st->npods; i++) p->flags[i] = (uint8_t)(view->rec[i] & US_PV_HELD);
    if (st->nworkloads) {
        memcpy(p->held, view->held, st->nworkloads * sizeof *p->held);
        memcpy(p->wl_terminating, view->terminating, st->nworkloads * sizeof *p->wl_terminating);
    }
    p->terminating = us_pv_list_of(view, US_PVL_TERMINATING, &p->nterminating);
    p->bg_running = us_pv_list_of(view, US_PVL_BG_RUNNING, &p->nbg_running);
    p->bg_pending = us_pv_list_of(view, US_PVL_BG_PENDING, &p->nbg_pending);
    p->node_kind = view->node_kind;
#ifdef US_CHECK_INVARIANTS
    int same = same_as_counted(p);
    if (same < 0) goto fail;
    if (same == 0) {
        us_plan_free(p);
        p->broken = kept ? "invariant \"ai-view\" broken: the AI view or a background total "
                           "kept by the ledger is not what the pool's pods hold"
                         : "invariant \"ai-view\" broken: the AI view or a background total "
                           "the snapshot added up is not what the pool's pods hold";
        return -2;
    }
#endif
    queue_sums(p, view->wanted);
    return 0;
fail:
    free(wkind);
    us_plan_free(p);
    return -1;
}

void us_plan_free(us_plan *p) {
    free(p->nodes);
    free(p->pos);
    if (p->hints && p->ai && p->bg_total) {
        /* the next plan of the pool writes over them */
        free(p->hints->ai);
        free(p->hints->bg_total);
        free(p->hints->ai_held);
        p->hints->ai = p->ai;
        p->hints->bg_total = p->bg_total;
        p->hints->ncap = p->nai;
        p->hints->ai_held = p->ai_held;
        p->hints->ai_nodes_version = p->ai_nodes_version;
    } else {
        free(p->ai);
        free(p->bg_total);
        free(p->ai_held);
    }
    free(p->flags);
    free(p->pnode);
    free(p->pslot);
    free(p->pact);
    free(p->evictor);
    free(p->placed);
    free(p->held);
    free(p->wl_ai);
    free(p->wl_terminating);
    free(p->wl_placed);
    free(p->wl_bg);
    if (p->own_view) {
        us_podview_free(p->own_view);
        free(p->own_view);
    }
    free(p->alloc);
    free(p->alloc_np);
    free(p->demand);
    free(p->fair);
    free(p->undo);
    if (p->classes && p->opts && p->opts->profile)
        p->opts->profile->scores_kept += us_classes_scores_kept(p->classes);
    if (p->hints && p->classes) {
        /* the next plan of the pool starts from them */
        us_classes_hand_over(p->classes, p);
        us_classes_free(p->hints->classes);
        p->hints->classes = p->classes;
    } else {
        us_classes_free(p->classes);
    }
    us_nodelabels_free(p->labels);
    free(p->scratch.cls);
    free(p->scratch.rep);
    free(p->scratch.need);
    free(p->scratch.need_rep);
    free(p->scratch.score);
    free(p->scratch.fresh);
    free(p->scratch.views);
    free(p->failed_jobs);
    us_hashidx_free(&p->failed);
    free(p->victim_first);
    free(p->victim_pods);
    free(p->victim_cands);
    free(p->victim_units);
    free(p->victim_queues);
    free(p->victim_skip);
    free(p->victim_low);
    free(p->victim_sorted);
    free(p->victim_band);
    free(p->victim_done);
    free(p->victim_drop);
    free(p->victim_wl_first);
    free(p->victim_wl_pods);
    memset(p, 0, sizeof *p);
}

int us_plan_node_of(const us_plan *p, int pod) {
    if (p->flags[pod] & US_PF_VICTIM) return -1;
    if (p->flags[pod] & US_PF_NEW) return p->pnode[pod];
    if (p->flags[pod] & US_PF_HELD) return p->st->pods[pod].node;
    return -1;
}

static int push_undo(us_plan *p, int pod, int flag) {
    if (us_grow((void **)&p->undo, &p->cap_undo, p->nundo, sizeof *p->undo) < 0) return -1;
    p->undo[p->nundo++] = (us_undo){pod, flag};
    return 0;
}

static const us_workload *wl_of(const us_plan *p, int pod) {
    return &p->st->workloads[p->st->pods[pod].workload];
}

/* Does evicting the pod leave it terminating (running, with a grace)? */
static bool terminates(const us_plan *p, int pod) {
    return p->st->pods[pod].state == US_POD_RUNNING && us_cycle_evict_terminates(p->opts, wl_of(p, pod));
}

/* Put a pod's resources into, or out of, the AI view and its queue. */
static void account(us_plan *p, int pod, int node, int slot, int sign, int *slot_out) {
    const us_workload *w = wl_of(p, pod);
    us_use *u = &p->ai[p->pos[node]];
    if (p->ai_held) p->ai_held[p->pos[node]] = 0;  /* no longer the ledger's */
    if (sign > 0) {
        int s = us_use_add(u, &p->st->nodes[node], w->request, slot);
        if (slot_out) *slot_out = s;
    } else {
        us_use_remove(u, w->request, slot);
    }
    queue_add(p, w->queue, w->request, w->preemptibility != US_PREEMPTIBLE, sign);
    p->held[p->st->pods[pod].workload] += sign;
    if (p->classes && us_classes_node_changed(p->classes, p, p->pos[node]) < 0) p->oom = true;
}

int us_plan_place(us_plan *p, int pod, int node, us_action act) {
    if (push_undo(p, pod, US_PF_NEW) < 0) return -1;
    account(p, pod, node, -1, 1, &p->pslot[pod]);
    p->flags[pod] |= US_PF_NEW;
    p->wl_placed[p->st->pods[pod].workload]++;
    p->pnode[pod] = node;
    p->pact[pod] = (uint8_t)act;
    p->placed[p->nplaced++] = pod;
    return p->oom ? -1 : 0;
}

int us_plan_evict(us_plan *p, int pod, us_action act, int evictor) {
    if (push_undo(p, pod, US_PF_VICTIM) < 0) return -1;
    const us_pod *sp = &p->st->pods[pod];
    account(p, pod, sp->node, sp->shared_dev, -1, NULL);
    p->flags[pod] |= US_PF_VICTIM;
    if (terminates(p, pod)) p->wl_terminating[sp->workload]++;
    p->pact[pod] = (uint8_t)act;
    p->evictor[pod] = evictor;
    return p->oom ? -1 : 0;
}

size_t us_plan_mark(const us_plan *p) { return p->nundo; }

void us_plan_rollback(us_plan *p, size_t mark) {
    while (p->nundo > mark) {
        us_undo u = p->undo[--p->nundo];
        if (u.flag == US_PF_NEW) {
            account(p, u.pod, p->pnode[u.pod], p->pslot[u.pod], -1, NULL);
            p->flags[u.pod] &= (uint8_t)~US_PF_NEW;
            p->wl_placed[p->st->pods[u.pod].workload]--;
            p->pnode[u.pod] = -1;
            p->pslot[u.pod] = -1;
            p->nplaced--; /* placements are undone in reverse order */
        } else {
            const us_pod *sp = &p->st->pods[u.pod];
            account(p, u.pod, sp->node, sp->shared_dev, 1, NULL);
            p->flags[u.pod] &= (uint8_t)~US_PF_VICTIM;
            if (terminates(p, u.pod)) p->wl_terminating[sp->workload]--;
            p->evictor[u.pod] = -1;
        }
    }
}

us_why us_plan_queue_admits(const us_plan *p, int q, us_res req, bool nonpreemptible, int *blocker) {
    for (; q >= 0; q = p->st->queues[q].parent) {
        for (int r = 0; r < US_NRES; r++) {
            if (req.v[r] <= 0) continue;
            us_qres x = us_queue_res(&p->st->queues[q], p->pool, r);
            us_why why = US_WHY_NONE;
            if (x.limit != US_UNLIMITED && us_sat_add(p->alloc[q].v[r], req.v[r]) > x.limit) why = US_WHY_LIMIT;
            else if (nonpreemptible && x.quota != US_UNLIMITED && us_sat_add(p->alloc_np[q].v[r], req.v[r]) > x.quota)
                why = US_WHY_QUOTA;
            if (why != US_WHY_NONE) {
                if (blocker) *blocker = q;
                return why;
            }
        }
    }
    return US_WHY_NONE;
}

static bool budget_spent(const us_plan *p) {
    return p->budget && p->budget->seconds > 0 &&
           (p->budget->spent || us_cycle_clock() >= p->budget->deadline);
}

int us_plan_policy_may_run(us_plan *p, us_policy *pol, const char *file) {
    if (!p->budget || p->budget->seconds <= 0) {
        us_policy_set_cycle_deadline(pol, 0, 0);
        return 1;
    }
    if (p->budget->spent) return 0;
    if (!budget_spent(p)) {
        us_policy_set_cycle_deadline(pol, p->budget->deadline, p->budget->seconds);
        return 1;
    }
    p->budget->spent = true;
    char secs[32];
    snprintf(secs, sizeof secs, "%g", p->budget->seconds);
    const char *ann[] = {"policy", file, "policy-id", us_policy_id(pol), "pool", p->pool,
                         "cycle-budget", secs, NULL};
    if (us_log_event(p->log, "Warning", "PolicyFailed", file, ann,
                     "%s: cycle budget exceeded (%s s) before version %s was asked; the rest of "
                     "this cycle uses the built-in policies", file, secs, us_policy_id(pol)) < 0)
        return -1;
    return 0;
}

int us_plan_policy_event(us_plan *p, us_policy *pol, const char *reason, const char *file,
                         const char *what) {
    const char *ann[] = {"policy", file, "policy-id", us_policy_id(pol), "pool", p->pool, NULL};
    us_policy *prev = us_policy_previous(pol);
    if (budget_spent(p) && !p->budget->spent) {
        /* the cycle's budget ran out: no version is asked again this cycle */
        char secs[32];
        snprintf(secs, sizeof secs, "%g", p->budget->seconds);
        const char *bann[] = {"policy", file, "policy-id", us_policy_id(pol), "pool", p->pool,
                              "cycle-budget", secs, NULL};
        p->budget->spent = true;
        return us_log_event(p->log, "Warning", reason, file, bann,
                            "%s; the cycle budget (%s s) is spent, so the rest of this cycle uses "
                            "the built-in policies", what, secs);
    }
    if (prev)
        return us_log_event(p->log, "Warning", reason, file, ann,
                            "%s; this cycle uses the previous version (%s) instead", what,
                            us_policy_id(prev));
    return us_log_event(p->log, "Warning", reason, file, ann,
                        "%s; this cycle uses the built-in policy instead", what);
}

double us_plan_policy_start(const us_plan *p) { return p->opts->profile ? us_cycle_cpu_clock() : 0; }

void us_plan_policy_done(const us_plan *p, double t0, size_t lua_calls) {
    us_cycle_profile *prof = p->opts->profile;
    if (!prof) return;
    prof->policy_seconds += us_cycle_cpu_clock() - t0;
    prof->policy_calls += lua_calls;
}
