/*
 * commit.c — the last step of a cycle: the diff between plan and reality
 * becomes decisions and events, and the state follows.
 *
 * Order matters and is fixed: AI evictions (reclaim, preempt), background
 * evictions, then AI placements (bind where the room is idle, pipeline
 * where terminating pods still hold it), then background placements.
 * Evict events are grouped per evicted workload, action and evictor.
 *
 * Before planning, the same decisions carry the cycle's own bookkeeping:
 * the pods of gangs that broke are stopped, pipelined pods whose room is
 * free bind.  Every pod the engine stops is an evict decision here.
 */
#include "commit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cyclecache.h"
#include "ledger.h"
#include "lifecycle.h"
#include "sort.h"

/* Does the pod hold room on its node physically (running or terminating)? */
static bool holds_physically(const us_pod *pd) {
    return us_ledger_holds_room(pd->gone, pd->node, pd->state);
}

int us_phys_take(const us_state *st, us_phys *ph) {
    us_ledger l = {0};
    memset(ph, 0, sizeof *ph);
    if (us_ledger_take(&l, st) < 0) return -1;
    us_ledger_lend(&l, &ph->use, &ph->waiting);
    ph->nnodes = st->nnodes;
    us_ledger_free(&l);
    return 0;
}

void us_phys_free(us_phys *ph) {
    free(ph->use);
    free(ph->waiting);
    memset(ph, 0, sizeof *ph);
}

/* The pipelined pods, in pod order: from the pods passing through
 * (us_state.passing) when they are known, else a pass over the pods when
 * some are pipelined, only as far as the last of them.  0, or -1 when
 * memory runs out. */
static int list_pipelined(us_state *st, size_t npipelined, int **out, size_t *n) {
    size_t npassing;
    const int *passing = npipelined ? us_state_passing(st, &npassing) : NULL;
    *n = 0;
    if (!(*out = malloc((npipelined ? npipelined : 1) * sizeof **out))) return -1;
    if (passing) {
        for (size_t k = 0; k < npassing && *n < npipelined; k++)
            if (st->pods[passing[k]].state == US_POD_PIPELINED) (*out)[(*n)++] = passing[k];
        us_sort_ints(*out, *n);
    } else {
        for (size_t i = 0; i < st->npods && *n < npipelined; i++)
            if (!st->pods[i].gone && st->pods[i].state == US_POD_PIPELINED) (*out)[(*n)++] = (int)i;
    }
#ifdef US_CHECK_INVARIANTS
    /* checking builds: the ones a pass finds (the ledger's count says how many) */
    size_t k = 0;
    for (size_t i = 0; i < st->npods; i++)
        if (!st->pods[i].gone && st->pods[i].state == US_POD_PIPELINED && (k >= *n || (*out)[k++] != (int)i))
            return -2;
    if (k != *n) return -2;
#endif
    return 0;
}

/* Evict pod i (us_life_evict) and have the ledger follow: a pod stopped at
 * once no longer holds its room, one that terminates keeps it, a pipelined
 * one no longer waits.  A fractional pod with no device recorded cannot be
 * taken off its device exactly: the ledger is read again (rare).  What
 * us_life_evict returns, -1 when memory runs out. */
static int evict_pod(us_state *st, us_phys *ph, int i, double now, bool reported) {
    us_pod was = st->pods[i];  /* a copy: us_life_evict may move the pods */
    int rc = us_life_evict(st, i, now, reported);
    if (rc == -1) return -1;
    const us_pod *is = &st->pods[i];
    us_res req = st->workloads[was.workload].request;
    bool kept = holds_physically(is) && is->node == was.node && is->shared_dev == was.shared_dev;
    if (holds_physically(&was) && !kept) {
        if (us_req_is_fractional(req) && was.shared_dev < 0) {
            us_phys_free(ph);
            return us_phys_take(st, ph) < 0 ? -1 : rc;
        }
        us_use_remove(&ph->use[was.node], req, was.shared_dev);
    }
    if (!was.gone && was.state == US_POD_PIPELINED && was.node >= 0) ph->waiting[was.node]--;
    if (!is->gone && is->state == US_POD_PIPELINED && is->node >= 0) ph->waiting[is->node]++;
    return rc;
}

/* Names of the pods terminating on the node at plan position pos, sorted:
 * what a pipelined pod waits for.  Only pods that were on the node at the
 * snapshot can be terminating there now. */
static int waiting_list(const us_plan *p, int pos, const char ***out, size_t *n) {
    const us_state *st = p->st;
    int node = p->nodes[pos];
    size_t cnt;
    const int *pods = us_plan_node_pods(p, (size_t)pos, &cnt);
    const char **names = malloc((cnt ? cnt : 1) * sizeof *names);
    if (!names) return -1;
    *n = 0;
    for (size_t k = 0; k < cnt; k++) {
        const us_pod *pd = &st->pods[pods[k]];
        if (!pd->gone && pd->node == node && pd->state == US_POD_RELEASING) names[(*n)++] = pd->name;
    }
    /* insertion sort: the list is short */
    for (size_t i = 1; i < *n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    *out = names;
    return 0;
}

/* Pipelined pods in the order they were pipelined (release_at holds when),
 * ties in pod order. */
static int by_pipelined_at(const void *a, const void *b, void *ctx) {
    const us_state *st = ctx;
    int i = *(const int *)a, j = *(const int *)b;
    double x = st->pods[i].release_at, y = st->pods[j].release_at;
    if (x != y) return x < y ? -1 : 1;
    return (i > j) - (i < j);
}

/* Bind pipelined pods whose resources are now free, first come first
 * served on each node: once one does not fit, those pipelined after it
 * there wait too, or a stream of smaller pods could keep taking the room
 * that freed for it. */
static int promote(us_state *st, us_phys *ph, int *pipelined, size_t npipelined, us_cycle_log *log,
                   us_err *err) {
    us_use *phys = ph->use;
    int rc = 0;
    bool *blocked = calloc(st->nnodes ? st->nnodes : 1, sizeof *blocked);
    if (!blocked) return us_err_nomem(err);
    us_sort(pipelined, npipelined, sizeof *pipelined, by_pipelined_at, st);
    for (size_t k = 0; k < npipelined && rc == 0; k++) {
        us_pod *pd = &st->pods[pipelined[k]];
        us_res req = st->workloads[pd->workload].request;
        if (blocked[pd->node]) continue;
        if (!us_use_fits(&phys[pd->node], &st->nodes[pd->node], req, pd->shared_dev)) {
            blocked[pd->node] = true;
            continue;
        }
        us_pod_touch(st, pd);
        pd->shared_dev = us_use_add(&phys[pd->node], &st->nodes[pd->node], req, pd->shared_dev);
        pd->state = US_POD_RUNNING;
        ph->waiting[pd->node]--;
        if (us_log_decision(log, US_OP_BIND, US_ACT_NONE, pd->name, pd->workload, st->nodes[pd->node].name,
                            NULL, 0, NULL) < 0)
            rc = us_err_nomem(err);
    }
    free(blocked);
    return rc;
}

/* Stop the gangs that broke; *broke tells whether one did (the state
 * changed). */
static int broken_gangs(us_state *st, const int *holding, double now, const us_cycle_opts *o,
                        us_cycle_log *log, bool *broke) {
    size_t nw = st->nworkloads;
    int rc = 0;
    *broke = false;
    for (size_t w = 0; w < nw && rc == 0; w++) {
        us_workload *wl = &st->workloads[w];
        /* an external workload's gang is its own scheduler's business */
        if (wl->state != US_WL_ACTIVE || wl->external || holding[w] == 0 || us_wl_gang_whole(wl, holding[w]))
            continue;
        size_t npods = st->npods;  /* recreated pods are appended past this */
        int count = 0;
        for (size_t i = 0; i < npods && rc == 0; i++) {
            us_pod *pd = &st->pods[i];
            if (pd->workload != (int)w || pd->gone ||
                (pd->state != US_POD_RUNNING && pd->state != US_POD_PIPELINED))
                continue;
            if (us_log_decision(log, US_OP_EVICT, US_ACT_STALE_GANG, pd->name, pd->workload,
                                st->nodes[pd->node].name, NULL, 0, wl->name) < 0 ||
                us_life_evict(st, (int)i, now, o && o->reported_pods) == -1)
                rc = -1;
            count++;
        }
        wl->started_at = -1;
        *broke = true;
        if (rc == 0) {
            char n[32];
            snprintf(n, sizeof n, "%d", count);
            const char *ann[] = {"evictor-action-type", us_action_names[US_ACT_STALE_GANG],
                                 "num-evicted-pods", n, "evictor-pod-group-name", wl->name, NULL};
            rc = us_log_event(log, "Normal", "Evict", wl->name, ann,
                              "Evicted %d pod(s) of %s: the gang holds fewer than min_member %d "
                              "pods, so it goes back to pending whole", count, wl->name,
                              wl->min_member);
        }
    }
    return rc;
}

/* The ledger brought up to date: 0, or -1 with err.  A ledger kept across
 * cycles that counted every pod again says so in the profile. */
static int sync_ledger(us_ledger *l, us_state *st, const us_cycle_opts *o, us_err *err) {
    char broken[512];
    int rc = us_ledger_sync(l, st, broken, sizeof broken);
    if (rc == 0 && l->recounted && !l->counts_only && o && o->profile) o->profile->pods_counted += st->npods;
    if (rc == -2) return us_err_set(err, US_EINVARIANT, "%s", broken);
    return rc < 0 ? us_err_nomem(err) : 0;
}

int us_commit_cycle_start(us_state *st, double now, const us_cycle_opts *o, us_cycle_log *log,
                          us_phys *ph, us_err *err) {
    /* kept across cycles in the cache; a cycle without one counts afresh */
    us_ledger own = {.counts_only = true}, *l = o && o->cache ? &o->cache->ledger : &own;
    int *pipelined = NULL;
    size_t npipelined = 0;
    bool broke;
    memset(ph, 0, sizeof *ph);
    int rc = sync_ledger(l, st, o, err);
    if (rc == 0) rc = broken_gangs(st, l->holding, now, o, log, &broke) < 0 ? us_err_nomem(err) : 0;
    if (rc == 0 && broke) rc = sync_ledger(l, st, o, err);  /* rare: the gangs' pods changed */
    if (rc == 0 && (rc = list_pipelined(st, l->npipelined, &pipelined, &npipelined)) < 0)
        rc = rc == -2 ? us_err_set(err, US_EINVARIANT, "invariant \"release-times\" broken: the "
                                   "pipelined pods listed are not the ones a pass over the pods "
                                   "finds (a write to a pod that skipped us_pod_touch?)")
                      : us_err_nomem(err);
    if (rc == 0) {
        /* the cycle keeps the ledger's node counts up to date (us_ledger_settle) */
        us_ledger_lend(l, &ph->use, &ph->waiting);
        ph->nnodes = st->nnodes;
        rc = promote(st, ph, pipelined, npipelined, log, err);
    }
    free(pipelined);
    if (l == &own) {
        /* the journal this read is gone: a ledger kept elsewhere for this
         * state (a cache used by other cycles) must count afresh */
        us_ledger_free(&own);
        us_state_pods_renumbered(st);
    }
    return rc;
}

/* One Evict event per (evicted workload, action, evictor). */
typedef struct evict_group {
    int workload;
    us_action act;
    int evictor;     /* workload index or -1 */
    int count;
} evict_group;

/* The groups in the order first met, and a hash of them: a cycle that
 * evicts thousands of pods for thousands of AI workloads finds each group
 * at once instead of scanning them all. */
typedef struct evict_groups {
    evict_group *g;
    size_t n, cap;
    int *slot;       /* [nslot] index into g, or -1 */
    size_t nslot;    /* a power of two, at least twice n */
} evict_groups;

static size_t group_hash(int w, us_action act, int evictor) {
    uint64_t k = ((uint64_t)(uint32_t)w << 32 | (uint32_t)evictor) * 0x9E3779B97F4A7C15ULL;
    return (size_t)((k ^ (k >> 29)) + (uint64_t)act * 0xBF58476D1CE4E5B9ULL);
}

static void group_insert(evict_groups *gs, size_t i) {
    size_t mask = gs->nslot - 1;
    size_t h = group_hash(gs->g[i].workload, gs->g[i].act, gs->g[i].evictor) & mask;
    while (gs->slot[h] >= 0) h = (h + 1) & mask;
    gs->slot[h] = (int)i;
}

static int note_group(evict_groups *gs, int w, us_action act, int evictor) {
    if (gs->nslot) {
        size_t mask = gs->nslot - 1;
        for (size_t h = group_hash(w, act, evictor) & mask; gs->slot[h] >= 0; h = (h + 1) & mask) {
            evict_group *x = &gs->g[gs->slot[h]];
            if (x->workload == w && x->act == act && x->evictor == evictor) {
                x->count++;
                return 0;
            }
        }
    }
    if (us_grow((void **)&gs->g, &gs->cap, gs->n, sizeof *gs->g) < 0) return -1;
    gs->g[gs->n++] = (evict_group){w, act, evictor, 1};
    if (2 * gs->n > gs->nslot) {
        size_t want = gs->nslot ? 2 * gs->nslot : 64;
        int *slot = malloc(want * sizeof *slot);
        if (!slot) return -1;
        free(gs->slot);
        gs->slot = slot;
        gs->nslot = want;
        memset(slot, 0xff, want * sizeof *slot);
        for (size_t i = 0; i < gs->n; i++) group_insert(gs, i);
    } else {
        group_insert(gs, gs->n - 1);
    }
    return 0;
}

static int emit_groups(const us_state *st, us_cycle_log *log, const evict_group *g, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char count[32];
        snprintf(count, sizeof count, "%d", g[i].count);
        const char *evictor = g[i].evictor >= 0 ? st->workloads[g[i].evictor].name : NULL;
        const char *ann[] = {"evictor-action-type", us_action_names[g[i].act],
                             "num-evicted-pods", count,
                             evictor ? "evictor-pod-group-name" : NULL, evictor, NULL};
        const char *why = g[i].act == US_ACT_BACKGROUND ? "its room is needed by AI workload"
                          : g[i].act == US_ACT_RECLAIM  ? "reclaimed for AI workload"
                                                        : "preempted by higher-priority AI workload";
        if (us_log_event(log, "Normal", "Evict", st->workloads[g[i].workload].name, ann,
                         "Evicted %d pod(s) of %s: %s %s", g[i].count,
                         st->workloads[g[i].workload].name, why, evictor ? evictor : "(none)") < 0)
            return -1;
    }
    return 0;
}

/* The evictor of each background pod the re-offer evicts (evictor[k] for
 * bg->running[k]): the AI workload whose placement needed its room.  On
 * the pod's node, start from the AI pods held before this cycle and the
 * background pods kept, add the cycle's AI placements there in the order
 * they were made; the one after which the pod no longer fits is the
 * evictor.  A pod that no AI placement pushed out (the node shrank, or the
 * policy let it go though it fitted) names the last AI workload placed on
 * the node, or none when the cycle placed nothing there.  0 or -1. */
static int bg_evictors(const us_plan *p, const us_reoffer *bg, int *evictor) {
    const us_state *st = p->st;
    size_t nn = p->nnodes;
    int *first = calloc(nn + 1, sizeof *first), *fill = calloc(nn + 1, sizeof *fill);
    int *bynode = malloc((p->nplaced + 1) * sizeof *bynode);
    us_use *base = malloc((nn + 1) * sizeof *base);  /* [pos] held AI + kept background */
    bool *need = calloc(nn + 1, sizeof *need);       /* [pos] a background pod is evicted there */
    int rc = -1;
    if (!first || !fill || !bynode || !base || !need) goto out;
    /* only the nodes of evicted pods are read: a quiet cycle evicts few.
     * Only offered pods are evicted, and only they share a node with one
     * evicted (those that stay are on nodes the AI plan left alone): the
     * pods that stay are never read */
    size_t evicted = 0;
    for (size_t k = 0; k < bg->nrunning; k++) {
        evictor[k] = -1;
        if (!bg->keep[k]) {
            need[p->pos[st->pods[bg->running[k]].node]] = true;
            evicted++;
        }
    }
    if (evicted == 0) {
        rc = 0;
        goto out;
    }
    /* the cycle's AI placements by node, in placement order */
    for (size_t k = 0; k < p->nplaced; k++) first[p->pos[p->pnode[p->placed[k]]] + 1]++;
    for (size_t i = 0; i < nn; i++) first[i + 1] += first[i];
    for (size_t k = 0; k < p->nplaced; k++) {
        int pos = p->pos[p->pnode[p->placed[k]]];
        bynode[first[pos] + fill[pos]++] = p->placed[k];
    }
    for (size_t pos = 0; pos < nn; pos++) {
        if (!need[pos]) continue;
        base[pos] = p->ai[pos];
        for (int j = first[pos]; j < first[pos + 1]; j++)
            us_use_remove(&base[pos], st->workloads[st->pods[bynode[j]].workload].request,
                          p->pslot[bynode[j]]);
    }
    for (size_t m = 0; m < bg->nrunning; m++) {
        const us_pod *pd = &st->pods[bg->running[m]];
        if (bg->keep[m] && need[p->pos[pd->node]])
            us_use_add(&base[p->pos[pd->node]], &st->nodes[pd->node],
                       st->workloads[pd->workload].request, -1);
    }
    for (size_t k = 0; k < bg->nrunning; k++) {
        if (bg->keep[k]) continue;  /* evictor[k] is -1 from the first pass */
        int node = st->pods[bg->running[k]].node, pos = p->pos[node];
        const us_node *n = &st->nodes[node];
        us_res req = st->workloads[st->pods[bg->running[k]].workload].request;
        us_use u = base[pos];
        if (!us_use_fits(&u, n, req, -1)) {
            /* no room even before this cycle's placements */
            if (first[pos + 1] > first[pos])
                evictor[k] = st->pods[bynode[first[pos + 1] - 1]].workload;
            continue;
        }
        for (int j = first[pos]; j < first[pos + 1] && evictor[k] < 0; j++) {
            int ai = bynode[j];
            us_use_add(&u, n, st->workloads[st->pods[ai].workload].request, p->pslot[ai]);
            if (!us_use_fits(&u, n, req, -1)) evictor[k] = st->pods[ai].workload;
        }
        if (evictor[k] < 0 && first[pos + 1] > first[pos])
            evictor[k] = st->pods[bynode[first[pos + 1] - 1]].workload;
    }
    rc = 0;
out:
    free(first);
    free(fill);
    free(bynode);
    free(base);
    free(need);
    return rc;
}

int us_commit(us_plan *p, const us_reoffer *bg, us_phys *ph, us_cycle_counts *counts, us_err *err) {
    us_state *st = p->st;
    evict_groups groups = {0};
    const char **waits = NULL;
    int rc = -1;
    int *evictor = malloc((bg->nrunning + 1) * sizeof *evictor);  /* [nrunning] */
    if (!evictor || bg_evictors(p, bg, evictor) < 0) {
        free(evictor);
        return us_err_nomem(err);
    }

    /* 1. AI victims (pod indices < p->npods stay valid: evict only appends) */
    for (size_t i = 0; i < p->npods; i++) {
        if (!(p->flags[i] & US_PF_VICTIM)) continue;
        us_action act = (us_action)p->pact[i];
        int ev = p->evictor[i];
        if (us_log_decision(p->log, US_OP_EVICT, act, st->pods[i].name, st->pods[i].workload,
                            st->nodes[st->pods[i].node].name, NULL, 0,
                            ev >= 0 ? st->workloads[ev].name : NULL) < 0 ||
            note_group(&groups, st->pods[i].workload, act, ev) < 0)
            goto nomem;
        if (counts) {
            if (act == US_ACT_RECLAIM) counts->reclaims++;
            else counts->preemptions++;
        }
        if (evict_pod(st, ph, (int)i, p->now, p->opts && p->opts->reported_pods) == -1) goto nomem;
    }
    /* 2. background pods whose room the AI plan took (offered ones) */
    for (size_t k = 0; k < bg->nrunning; k++) {
        if (bg->keep[k]) continue;
        int i = bg->running[k];
        int node = st->pods[i].node;
        int ev = evictor[k];
        if (us_log_decision(p->log, US_OP_EVICT, US_ACT_BACKGROUND, st->pods[i].name, st->pods[i].workload,
                            st->nodes[node].name, NULL, 0, ev >= 0 ? st->workloads[ev].name : NULL) < 0 ||
            note_group(&groups, st->pods[i].workload, US_ACT_BACKGROUND, ev) < 0)
            goto nomem;
        if (counts) counts->background_evictions++;
        if (evict_pod(st, ph, i, p->now, p->opts && p->opts->reported_pods) == -1) goto nomem;
    }
    if (emit_groups(st, p->log, groups.g, groups.n) < 0) goto nomem;

    /* 3. AI placements: bind on idle room, else pipeline behind terminating
     * pods.  Behind a pod pipelined on the node already too, even where
     * room is idle: that room freed for the pod waiting (it binds at the
     * next cycle's start), and one placed later must not take it first and
     * make it wait for the deletions its own placement started. */
    us_use *phys = ph->use;
    for (size_t k = 0; k < p->nplaced; k++) {
        int i = p->placed[k], node = p->pnode[i];
        us_pod *pd = &st->pods[i];
        us_res req = st->workloads[pd->workload].request;
        us_pod_touch(st, pd);
        pd->node = node;
        pd->shared_dev = p->pslot[i];
        us_action act = (us_action)p->pact[i];
        if (p->opts->profile) p->opts->profile->placed++;
        if (ph->waiting[node] == 0 && us_use_fits(&phys[node], &st->nodes[node], req, pd->shared_dev)) {
            us_use_add(&phys[node], &st->nodes[node], req, pd->shared_dev);
            pd->state = US_POD_RUNNING;
            if (us_log_decision(p->log, US_OP_BIND, act, pd->name, pd->workload, st->nodes[node].name, NULL, 0,
                                NULL) < 0)
                goto nomem;
        } else {
            size_t nw = 0;
            pd->state = US_POD_PIPELINED;
            pd->release_at = p->now; /* when: the order it binds in (promote) */
            ph->waiting[node]++;
            if (waiting_list(p, p->pos[node], &waits, &nw) < 0 ||
                us_log_decision(p->log, US_OP_PIPELINE, act, pd->name, pd->workload, st->nodes[node].name,
                                waits, nw, NULL) < 0)
                goto nomem;
            free(waits);
            waits = NULL;
        }
    }
    /* 4. background placements, in idle room only */
    for (size_t k = 0; k < bg->npending; k++) {
        int i = bg->pending[k], node = bg->place[k];
        if (node < 0) continue;
        us_pod *pd = &st->pods[i];
        us_res req = st->workloads[pd->workload].request;
        if (!us_use_fits(&phys[node], &st->nodes[node], req, -1)) {
            /* cannot happen: the re-offer offers idle room only; if it
             * ever does, the dropped result is said, never silent */
            const char *ann[] = {"policy", "background.lua", "pool", p->pool, NULL};
            if (us_log_event(p->log, "Warning", "PolicyResultDropped", "background.lua", ann,
                             "background.lua: placing pod \"%s\" on node \"%s\" was not applied: "
                             "the room is not idle", pd->name, st->nodes[node].name) < 0)
                goto nomem;
            continue;
        }
        us_use_add(&phys[node], &st->nodes[node], req, -1);
        us_pod_touch(st, pd);
        pd->node = node;
        pd->state = US_POD_RUNNING;
        if (p->opts->profile) p->opts->profile->placed++;
        if (us_log_decision(p->log, US_OP_BIND, US_ACT_BACKGROUND, pd->name, pd->workload, st->nodes[node].name,
                            NULL, 0, NULL) < 0)
            goto nomem;
    }
    rc = 0;
    goto out;
nomem:
    us_err_nomem(err);
out:
    free(groups.g);
    free(groups.slot);
    free(waits);
    free(evictor);
    return rc;
}
