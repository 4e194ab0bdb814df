/*
 * placement.c — where an AI pod goes.  Feasibility is decided here in C
 * (node present and not cordoned, node selector, taints tolerated, daemonset pin, resources
 * and GPU devices in the AI view); the placement policy only scores the
 * feasible nodes.  Highest score wins, ties go to the node name, so the
 * same input always gives the same choice.  Scores are cached per (pod
 * class, node class) for the cycle (nodeclass.h); us_cycle_opts.score_cache
 * false scores every feasible node afresh, to check the cache against.
 *
 * A failing placement policy is reported once per cycle and replaced, for
 * the rest of that cycle, by its previous version or the built-in score.
 */
#include "placement.h"

#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "cyclecache.h"
#include "nodeclass.h"
#include "nodelabels.h"

/* Grow the plan's scratch to hold n candidates; 0 or -1 (out of memory). */
static int scratch_reserve(us_plan *p, size_t n) {
    struct us_place_scratch *s = &p->scratch;
    if (n <= s->cap) return 0;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n) cap *= 2;
#define GROW(f)                                              \
    do {                                                     \
        void *x = realloc(s->f, cap * sizeof *s->f);         \
        if (!x) return -1;                                   \
        s->f = x;                                            \
    } while (0)
    GROW(cls);
    GROW(rep);
    GROW(need);
    GROW(need_rep);
    GROW(score);
    GROW(fresh);
    GROW(views);
#undef GROW
    s->cap = cap;
    return 0;
}

bool us_place_allowed(const us_plan *p, int pod, int node) {
    const us_state *st = p->st;
    const us_node *n = &st->nodes[node];
    const us_pod *pd = &st->pods[pod];
    const us_workload *w = &st->workloads[pd->workload];
    if (n->removed || n->unschedulable || p->pos[node] < 0) return false;
    if (pd->pin >= 0 && pd->pin != node) return false;
    return us_labels_match(&n->labels, &w->node_selector) && us_tolerates(&w->tolerations, &n->taints, false);
}

/* Score the nodes at positions rep[0..n) for pod with the placement
 * version in force, falling back version by version to the built-in
 * score.  *pure (may be NULL): the scores are the policy's and a function
 * of the views alone (us_policy_last_call_pure). */
static int score_nodes(us_plan *p, int pod, const int *rep, size_t n, double *scores, bool *pure,
                       us_err *err) {
    us_state *st = p->st;
    const us_pod *pd = &st->pods[pod];
    const us_workload *w = &st->workloads[pd->workload];
    us_pod_view pv = {pd, w, st->queues[w->queue].name};
    us_node_view *views = p->scratch.views;  /* reserved by us_place_choose */
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        const us_node *node = &st->nodes[p->nodes[rep[i]]];
        views[i] = (us_node_view){node, p->ai[rep[i]].used, us_use_free_gpus(&p->ai[rep[i]], node),
                                  us_nodelabels_of(p->labels, (size_t)rep[i])};
    }
    bool scored = false;
    if (pure) *pure = false;
    /* a version that fails is not asked again this cycle */
    while (p->score_pol && !scored) {
        us_err perr = {0};
        int may = us_plan_policy_may_run(p, p->score_pol, "placement.lua");
        if (may < 0) {
            rc = us_err_nomem(err);
            goto done;
        }
        if (may == 0) {  /* the cycle's budget is spent: built-in scores from here on */
            p->score_pol = NULL;
            if (p->classes) us_classes_clear_scores(p->classes);
            break;
        }
        double t0 = us_plan_policy_start(p);
        int prc = us_policy_score(p->score_pol, &pv, views, n, scores, &perr);
        us_plan_policy_done(p, t0, n);
        if (prc == 0) {
            scored = true;
            if (pure) *pure = us_policy_last_call_pure(p->score_pol);
            break;
        }
        if (us_plan_policy_event(p, p->score_pol, "PolicyFailed", "placement.lua", perr.msg) < 0) {
            rc = us_err_nomem(err);
            goto done;
        }
        p->score_pol = us_policy_previous(p->score_pol);
        /* scores cached from the failed version go with it */
        if (p->classes) us_classes_clear_scores(p->classes);
    }
    if (!scored)
        for (size_t i = 0; i < n; i++) scores[i] = us_builtin_score(&pv, &views[i]);
done:
    return rc;
}

/* Scores of the node classes cls[0..n) (represented by rep) for pod class
 * pc, from the cache, scoring the ones not cached yet in one call. */
static int class_scores(us_plan *p, int pod, int pc, const int *cls, const int *rep, size_t n,
                        double *score, us_err *err) {
    us_classes *c = p->classes;
    int *need = p->scratch.need, *need_rep = p->scratch.need_rep;
    double *fresh = p->scratch.fresh;
    size_t nneed = 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if (!us_classes_score(c, pc, cls[i], &score[i])) {
            need[nneed] = cls[i];
            need_rep[nneed++] = rep[i];
        }
    bool pure = false;
    if (nneed && (rc = score_nodes(p, pod, need_rep, nneed, fresh, &pure, err)) < 0) goto done;
    for (size_t i = 0; i < nneed; i++)
        if (us_classes_set_score(c, pc, need[i], fresh[i], pure) < 0) {
            rc = us_err_nomem(err);
            goto done;
        }
    for (size_t i = 0; i < n; i++)
        if (!us_classes_score(c, pc, cls[i], &score[i])) {
            /* the policy changed mid-way and dropped the cache: score again */
            if ((rc = score_nodes(p, pod, &rep[i], 1, &score[i], &pure, err)) < 0) goto done;
            if (us_classes_set_score(c, pc, cls[i], score[i], pure) < 0) {
                rc = us_err_nomem(err);
                goto done;
            }
        }
done:
    return rc;
}

int us_place_choose(us_plan *p, int pod, int *out, us_err *err) {
    us_state *st = p->st;
    const us_pod *pd = &st->pods[pod];
    const us_workload *w = &st->workloads[pd->workload];
    *out = -1;
    if (pd->pin >= 0) {  /* one possible node: nothing to score */
        if (p->pos[pd->pin] >= 0 && us_place_allowed(p, pod, pd->pin) &&
            us_use_fits(&p->ai[p->pos[pd->pin]], &st->nodes[pd->pin], w->request, -1))
            *out = pd->pin;
        return 0;
    }
    bool cached = p->opts->score_cache;
    if (cached && !p->classes) {
        /* from those the pool's last plan ended with, when the cycle cache
         * kept them (us_plan_free hands them back) */
        const char *broken;
        p->classes = p->hints ? p->hints->classes : NULL;
        if (p->hints) p->hints->classes = NULL;
        int rc = us_classes_renew(&p->classes, p, &broken);
        if (rc == -2) return us_err_set(err, US_EINVARIANT, "%s", broken);
        if (rc < 0) return us_err_nomem(err);
        if (p->opts->profile) {
            p->opts->profile->nodes_classed += p->nnodes;
            p->opts->profile->nodes_class_kept += us_classes_kept(p->classes);
        }
    }
    us_classes *c = p->classes;
    int pc = cached ? us_classes_pod_class(c, p, pod) : 0;
    if (pc < 0) return us_err_nomem(err);

    /* candidates: feasible live node classes, each represented by its
     * first member by name; or, without the cache, every feasible node */
    int nlive = 0;
    const int *live = cached ? us_classes_live(c, &nlive) : NULL;
    size_t ncand = cached ? (size_t)nlive : p->nnodes, nf = 0;
    if (scratch_reserve(p, ncand + 1) < 0) return us_err_nomem(err);
    int *cls = p->scratch.cls, *rep = p->scratch.rep;
    double *score = p->scratch.score;
    int rc = 0;
    for (size_t i = 0; i < ncand; i++) {
        int id = cached ? live[i] : (int)i;
        int first = cached ? us_classes_first(c, id) : id;
        if (first < 0) continue;
        int node = p->nodes[first];
        if (!us_place_allowed(p, pod, node) || !us_use_fits(&p->ai[first], &st->nodes[node], w->request, -1))
            continue;
        cls[nf] = id;
        rep[nf++] = first;
    }
    if (nf == 0) goto done;
    rc = cached ? class_scores(p, pod, pc, cls, rep, nf, score, err)
                : score_nodes(p, pod, rep, nf, score, NULL, err);
    if (rc < 0) goto done;

    /* highest score, then the node name (background work does not count
     * here: ties.c spares it afterwards without changing the AI plan) */
    size_t best = 0;
    for (size_t i = 1; i < nf; i++)
        if (score[i] > score[best] || (score[i] == score[best] && rep[i] < rep[best])) best = i;
    *out = p->nodes[rep[best]];
done:
    return rc;
}
