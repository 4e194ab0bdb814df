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

int us_place_choose(us_plan *p, int pod, int *out, us_err *err) {
    us_state *st = p->st;
    const us_pod *pd = &st->pods[pod];
    const us_workload *w = &st->workloads[pd->workload];
    *out = -1;
    us_node_view *views = malloc((p->nnodes ? p->nnodes : 1) * sizeof *views);
    double *scores = malloc((p->nnodes ? p->nnodes : 1) * sizeof *scores);
    int *cand = malloc((p->nnodes ? p->nnodes : 1) * sizeof *cand);
    int rc = 0;
    if (!views || !scores || !cand) {
        rc = us_err_nomem(err);
        goto done;
    }
    size_t n = 0;
    for (size_t i = 0; i < p->nnodes; i++) {
        int node = p->nodes[i];
        if (!us_place_allowed(p, pod, node) || !us_use_fits(&p->ai[i], &st->nodes[node], w->request, -1))
            continue;
        cand[n] = node;
        views[n] = (us_node_view){&st->nodes[node], p->ai[i].used,
                                  us_use_free_gpus(&p->ai[i], &st->nodes[node])};
        n++;
    }
    if (n == 0) goto done;

    us_pod_view pv = {pd, w, st->queues[w->queue].name};
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
    }
    if (!scored)
        for (size_t i = 0; i < n; i++) scores[i] = us_builtin_score(&pv, &views[i]);

    /* candidates are in name order, so the first best is the name tie-break;
     * displacement counts only what this pod would add on the node */
    size_t best = 0;
    int best_disp = -1;
    for (size_t i = 1; i < n; i++) {
        if (scores[i] > scores[best]) {
            best = i;
            best_disp = -1;
        } else if (scores[i] == scores[best] && p->opts->background_aware_ties) {
            us_res none = {{0}};
            if (best_disp < 0)
                best_disp = us_place_displaced(p, cand[best], w->request) -
                            us_place_displaced(p, cand[best], none);
            int d = us_place_displaced(p, cand[i], w->request) - us_place_displaced(p, cand[i], none);
            if (d < best_disp) {
                best = i;
                best_disp = d;
            }
        }
    }
    *out = cand[best];
done:
    free(views);
    free(scores);
    free(cand);
    return rc;
}
