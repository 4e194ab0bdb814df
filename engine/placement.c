/*
 * placement.c — where an AI pod goes.  Feasibility is decided here in C
 * (node present and not cordoned, node selector, daemonset pin, resources
 * and GPU devices in the AI view); the placement policy only scores the
 * feasible nodes.  Highest score wins; ties go to the node whose use
 * displaces the least background work (when enabled), then to the node
 * name, so the same input always gives the same choice.
 *
 * A failing placement policy is reported once per cycle and replaced, for
 * the rest of that cycle, by its previous version or the built-in score.
 */
#include "placement.h"

#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "nodeclass.h"

bool us_place_allowed(const us_plan *p, int pod, int node) {
    const us_state *st = p->st;
    const us_node *n = &st->nodes[node];
    const us_pod *pd = &st->pods[pod];
    const us_workload *w = &st->workloads[pd->workload];
    if (n->removed || n->unschedulable || p->pos[node] < 0) return false;
    if (pd->pin >= 0 && pd->pin != node) return false;
    return us_labels_match(&n->labels, &w->node_selector);
}

/* Resources physically held on a node by pods that are terminating. */
static us_use releasing_use(const us_plan *p, int pos) {
    us_use u;
    memset(&u, 0, sizeof u);
    const us_state *st = p->st;
    int node = p->nodes[pos];
    for (int k = p->node_first[pos]; k < p->node_first[pos + 1]; k++) {
        const us_pod *pd = &st->pods[p->node_pods[k]];
        if (pd->state == US_POD_RELEASING)
            us_use_add(&u, &st->nodes[node], st->workloads[pd->workload].request, pd->shared_dev);
    }
    return u;
}

int us_place_displaced(const us_plan *p, int node, us_res extra) {
    const us_state *st = p->st;
    int pos = p->pos[node];
    const us_node *n = &st->nodes[node];
    us_use u = releasing_use(p, pos);
    u.used = us_res_add(us_res_add(u.used, p->ai[pos].used), extra);
    u.whole += p->ai[pos].whole + (int)(extra.v[US_GPU] / US_GPU_UNIT);
    for (int i = 0; i < US_MAX_GPUS; i++) u.shared[i] = (uint16_t)(u.shared[i] + p->ai[pos].shared[i]);
    /* background pods on the node, in name order (node_pods is in pod order) */
    int displaced = 0;
    int cnt = p->node_first[pos + 1] - p->node_first[pos];
    const int *list = p->node_pods + p->node_first[pos];
    bool *seen = calloc((size_t)cnt + 1, sizeof *seen);
    if (!seen) return 0;
    for (;;) {
        int best = -1;
        for (int k = 0; k < cnt; k++) {
            const us_pod *pd = &st->pods[list[k]];
            if (seen[k] || pd->state != US_POD_RUNNING || !st->workloads[pd->workload].background)
                continue;
            if (best < 0 || strcmp(pd->name, st->pods[list[best]].name) < 0) best = k;
        }
        if (best < 0) break;
        seen[best] = true;
        us_res req = st->workloads[st->pods[list[best]].workload].request;
        if (us_use_fits(&u, n, req, -1)) us_use_add(&u, n, req, -1);
        else displaced++;
    }
    free(seen);
    return displaced;
}

/* Score the node classes in need[0..n) (represented by their first
 * member) for pod class pc with the placement version in force, falling
 * back version by version to the built-in score; store in the cache. */
static int score_classes(us_plan *p, int pod, int pc, const int *need, const int *rep, size_t n,
                         us_err *err) {
    us_state *st = p->st;
    const us_pod *pd = &st->pods[pod];
    const us_workload *w = &st->workloads[pd->workload];
    us_pod_view pv = {pd, w, st->queues[w->queue].name};
    us_node_view *views = malloc(n * sizeof *views);
    double *scores = malloc(n * sizeof *scores);
    int rc = 0;
    if (!views || !scores) {
        rc = us_err_nomem(err);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const us_node *node = &st->nodes[p->nodes[rep[i]]];
        views[i] = (us_node_view){node, p->ai[rep[i]].used, us_use_free_gpus(&p->ai[rep[i]], node)};
    }
    bool scored = false;
    /* a version that fails is not asked again this cycle */
    while (p->score_pol && !scored) {
        us_err perr = {0};
        double t0 = us_plan_policy_start(p);
        int prc = us_policy_score(p->score_pol, &pv, views, n, scores, &perr);
        us_plan_policy_done(p, t0, n);
        if (prc == 0) {
            scored = true;
            break;
        }
        if (us_plan_policy_event(p, p->score_pol, "PolicyFailed", "placement.lua", perr.msg) < 0) {
            rc = us_err_nomem(err);
            goto done;
        }
        p->score_pol = us_policy_previous(p->score_pol);
        /* scores cached from the failed version go with it */
        us_classes_clear_scores(p->classes);
    }
    if (!scored)
        for (size_t i = 0; i < n; i++) scores[i] = us_builtin_score(&pv, &views[i]);
    for (size_t i = 0; i < n && rc == 0; i++)
        if (us_classes_set_score(p->classes, pc, need[i], scores[i]) < 0) rc = us_err_nomem(err);
done:
    free(views);
    free(scores);
    return rc;
}

/* Background work a pod of class pc (requesting req) would displace on node
 * class nc, first member at position first, beyond what is displaced there
 * already.  Cached: every member of a class has the same background work. */
static int class_displaced(us_plan *p, int pc, int nc, int first, us_res req, int *out,
                           us_err *err) {
    if (us_classes_displaced(p->classes, pc, nc, out)) return 0;
    us_res none = {{0}};
    int node = p->nodes[first];
    *out = us_place_displaced(p, node, req) - us_place_displaced(p, node, none);
    return us_classes_set_displaced(p->classes, pc, nc, *out) < 0 ? us_err_nomem(err) : 0;
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
    if (!p->classes && !(p->classes = us_classes_new(p))) return us_err_nomem(err);
    us_classes *c = p->classes;
    int pc = us_classes_pod_class(c, p, pod);
    if (pc < 0) return us_err_nomem(err);
    /* without the class cache, no pod reuses another's scores */
    if (p->opts->no_class_cache) us_classes_clear_scores(c);

    /* feasible node classes, each represented by its first member by name */
    size_t ncls = (size_t)us_classes_count(c), nf = 0, nneed = 0;
    int *cls = malloc((ncls + 1) * sizeof *cls), *rep = malloc((ncls + 1) * sizeof *rep);
    int *need = malloc((ncls + 1) * sizeof *need), *need_rep = malloc((ncls + 1) * sizeof *need_rep);
    double *score = malloc((ncls + 1) * sizeof *score);
    int rc = 0;
    if (!cls || !rep || !need || !need_rep || !score) {
        rc = us_err_nomem(err);
        goto done;
    }
    for (size_t id = 0; id < ncls; id++) {
        int first = us_classes_first(c, (int)id);
        if (first < 0) continue;
        int node = p->nodes[first];
        if (!us_place_allowed(p, pod, node) || !us_use_fits(&p->ai[first], &st->nodes[node], w->request, -1))
            continue;
        cls[nf] = (int)id;
        rep[nf++] = first;
        double s;
        if (!us_classes_score(c, pc, (int)id, &s)) {
            need[nneed] = (int)id;
            need_rep[nneed++] = first;
        }
    }
    if (nf == 0) goto done;
    if (nneed && (rc = score_classes(p, pod, pc, need, need_rep, nneed, err)) < 0) goto done;
    for (size_t i = 0; i < nf; i++)
        if (!us_classes_score(c, pc, cls[i], &score[i])) {
            /* the policy changed mid-way and dropped the cache: score again */
            if ((rc = score_classes(p, pod, pc, &cls[i], &rep[i], 1, err)) < 0) goto done;
            us_classes_score(c, pc, cls[i], &score[i]);
        }

    /* highest score; among equals the least background displaced (when
     * enabled: it counts only what this pod would add), then the name */
    size_t best = 0;
    int best_disp = -1;
    bool aware = p->opts->background_aware_ties;
    for (size_t i = 1; i < nf; i++) {
        bool better = score[i] > score[best];
        if (score[i] == score[best]) {
            int d = 0;
            if (aware) {
                if (best_disp < 0 && (rc = class_displaced(p, pc, cls[best], rep[best], w->request, &best_disp, err)) < 0)
                    goto done;
                if ((rc = class_displaced(p, pc, cls[i], rep[i], w->request, &d, err)) < 0) goto done;
            }
            better = (aware && d < best_disp) || ((!aware || d == best_disp) && rep[i] < rep[best]);
            if (better && aware) best_disp = d;
        } else if (better) {
            best_disp = -1;
        }
        if (better) best = i;
    }
    *out = p->nodes[rep[best]];
done:
    free(cls);
    free(rep);
    free(need);
    free(need_rep);
    free(score);
    return rc;
}
