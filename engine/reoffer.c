/*
 * reoffer.c — background re-offer.  The AI plan is final; background pods
 * get what it left: a running background pod that still fits on its node
 * stays undisturbed, the rest are evicted, and pending ones are placed in
 * idle room.  background.lua decides; this file builds its view, checks
 * the answer against the invariants (no node over capacity, a kept pod stays
 * on its own node, a placed pod only where it may go) and falls back to the
 * built-in policy when the answer breaks one.
 *
 * Idle room excludes resources that terminating pods still hold: a
 * background pod never waits in line (it is never pipelined).
 */
#include "reoffer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "placement.h"

us_use us_reoffer_held(const us_plan *p, int pos) {
    const us_state *st = p->st;
    int node = p->nodes[pos];
    us_use u = p->ai[pos];
    for (int k = p->node_first[pos]; k < p->node_first[pos + 1]; k++) {
        int i = p->node_pods[k];
        const us_pod *pd = &st->pods[i];
        const us_workload *w = &st->workloads[pd->workload];
        bool releasing = pd->state == US_POD_RELEASING;
        /* an AI victim that was running terminates for its grace period */
        bool victim = (p->flags[i] & US_PF_VICTIM) && pd->state == US_POD_RUNNING &&
                      w->termination_grace > 0;
        if (releasing || victim) us_use_add(&u, &st->nodes[node], w->request, pd->shared_dev);
    }
    return u;
}

static const us_state *cmp_st;
static int by_pod_name(const void *a, const void *b) {
    const us_pod *x = &cmp_st->pods[*(const int *)a], *y = &cmp_st->pods[*(const int *)b];
    int c = strcmp(x->name, y->name);
    return c ? c : (x->seq < y->seq ? -1 : x->seq > y->seq);
}

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

/* NULL when keep/place respect capacity, else what broke. */
static const char *check(const us_plan *p, const us_bg_input *in, const bool *keep,
                         const int *place, us_use *held, char *buf, size_t len) {
    (void)p;
    for (size_t i = 0; i < in->nrunning; i++) {
        if (!keep[i]) continue;
        int pos = in->running[i].node;
        us_res req = in->running[i].wl->request;
        if (!us_use_fits(&held[pos], in->nodes[pos].node, req, -1)) {
            snprintf(buf, len, "keeping pod \"%s\" would put node \"%s\" over capacity",
                     in->running[i].pod->name, in->nodes[pos].node->name);
            return buf;
        }
        us_use_add(&held[pos], in->nodes[pos].node, req, -1);
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
        if (!us_use_fits(&held[place[i]], in->nodes[place[i]].node, bp->wl->request, -1)) {
            snprintf(buf, len, "placing pod \"%s\" would put node \"%s\" over capacity",
                     bp->pod->name, in->nodes[place[i]].node->name);
            return buf;
        }
        us_use_add(&held[place[i]], in->nodes[place[i]].node, bp->wl->request, -1);
    }
    return NULL;
}

int us_reoffer_run(us_plan *p, us_reoffer *out, us_err *err) {
    us_state *st = p->st;
    memset(out, 0, sizeof *out);
    size_t np = p->npods ? p->npods : 1, nn = p->nnodes ? p->nnodes : 1;
    us_bg_node *nodes = calloc(nn, sizeof *nodes);
    us_use *held = calloc(nn, sizeof *held), *scratch = calloc(nn, sizeof *scratch);
    us_bg_pod *running = calloc(np, sizeof *running), *pending = calloc(np, sizeof *pending);
    int *cands = NULL;
    int *pos_place = calloc(np, sizeof *pos_place);
    bool *keep = calloc(np, sizeof *keep), *touched = NULL;
    size_t *offered = NULL;
    out->running = calloc(np, sizeof *out->running);
    out->keep = calloc(np, sizeof *out->keep);
    out->pending = calloc(np, sizeof *out->pending);
    out->place = calloc(np, sizeof *out->place);
    int rc = 0;
    if (!nodes || !held || !scratch || !running || !pending || !pos_place || !keep ||
        !out->running || !out->keep || !out->pending || !out->place)
        goto nomem;

    /* Nodes the AI plan changed this cycle: a placement or an eviction. */
    if (!(touched = calloc(nn, sizeof *touched)) || !(offered = malloc(np * sizeof *offered)))
        goto nomem;
    for (size_t k = 0; k < p->nplaced; k++) touched[p->pos[p->pnode[p->placed[k]]]] = true;
    for (size_t i = 0; i < p->npods; i++)
        if (p->flags[i] & US_PF_VICTIM) touched[p->pos[st->pods[i].node]] = true;
    for (size_t i = 0; i < p->nnodes; i++) held[i] = us_reoffer_held(p, (int)i);
    /* a node whose background pods no longer fit for another reason (its
     * capacity was lowered, say) is offered too: nothing stays over capacity */
    memcpy(scratch, held, nn * sizeof *held);
    for (size_t i = 0; i < p->npods; i++) {
        const us_pod *pd = &st->pods[i];
        const us_workload *w = &st->workloads[pd->workload];
        if (!w->background || pd->state != US_POD_RUNNING || pd->node < 0 || p->pos[pd->node] < 0)
            continue;
        int pos = p->pos[pd->node];
        if (touched[pos]) continue;
        if (!us_use_fits(&scratch[pos], &st->nodes[pd->node], w->request, -1)) touched[pos] = true;
        else us_use_add(&scratch[pos], &st->nodes[pd->node], w->request, -1);
    }
    for (size_t i = 0; i < p->npods; i++) {
        const us_pod *pd = &st->pods[i];
        const us_workload *w = &st->workloads[pd->workload];
        if (!w->background || w->state != US_WL_ACTIVE || strcmp(w->pool, p->pool) != 0) continue;
        if (pd->state == US_POD_RUNNING && pd->node >= 0 && p->pos[pd->node] >= 0)
            out->running[out->nrunning++] = (int)i;
        else if (pd->state == US_POD_PENDING && !w->blocked)
            out->pending[out->npending++] = (int)i;
    }
    cmp_st = st;
    qsort(out->running, out->nrunning, sizeof *out->running, by_pod_name);
    qsort(out->pending, out->npending, sizeof *out->pending, by_pod_name);

    /* Running pods are offered only where the AI plan changed something:
     * elsewhere nothing they fitted in has changed, so they stay, and what
     * they hold is not free.  The view stays small on a large, quiet
     * cluster. */
    size_t noffered = 0;
    for (size_t i = 0; i < out->nrunning; i++) {
        int pod = out->running[i], pos = p->pos[st->pods[pod].node];
        const us_workload *w = &st->workloads[st->pods[pod].workload];
        if (touched[pos]) {
            running[noffered] = (us_bg_pod){&st->pods[pod], w, pos, NULL, 0};
            offered[noffered++] = i;
        } else {
            out->keep[i] = true;
            us_use_add(&held[pos], &st->nodes[p->nodes[pos]], w->request, -1);
        }
    }
    for (size_t i = 0; i < p->nnodes; i++) {
        const us_node *n = &st->nodes[p->nodes[i]];
        nodes[i] = (us_bg_node){n, us_res_sub(n->cap, held[i].used), us_use_free_gpus(&held[i], n)};
    }
    /* Candidate lists, in one flat array.  A pinned pod (a DaemonSet's) has
     * at most its own node; pods free to go anywhere share one list per node
     * selector, so the view stays linear in pods plus nodes. */
    size_t ngroups = 0, npinned = 0;
    const us_labels **groups = calloc(out->npending + 1, sizeof *groups);
    const int **group_list = calloc(out->npending + 1, sizeof *group_list);
    size_t *group_len = calloc(out->npending + 1, sizeof *group_len);
    if (!groups || !group_list || !group_len) goto nomem_groups;
    for (size_t i = 0; i < out->npending; i++) {
        const us_pod *pd = &st->pods[out->pending[i]];
        const us_labels *sel = &st->workloads[pd->workload].node_selector;
        if (pd->pin >= 0) {
            npinned++;
            continue;
        }
        size_t g = 0;
        while (g < ngroups && !us_labels_equal(groups[g], sel)) g++;
        if (g == ngroups) groups[ngroups++] = sel;
    }
    size_t ncand = 0;
    cands = malloc((ngroups * p->nnodes + npinned + 1) * sizeof *cands);
    if (!cands) goto nomem_groups;
    for (size_t g = 0; g < ngroups; g++) {
        group_list[g] = cands + ncand;
        int pod = -1;  /* any pod of the group: only its selector matters */
        for (size_t i = 0; i < out->npending && pod < 0; i++) {
            const us_pod *pd = &st->pods[out->pending[i]];
            if (pd->pin < 0 && us_labels_equal(&st->workloads[pd->workload].node_selector, groups[g]))
                pod = out->pending[i];
        }
        for (size_t k = 0; k < p->nnodes; k++)
            if (us_place_allowed(p, pod, p->nodes[k])) cands[ncand++] = (int)k;
        group_len[g] = (size_t)(cands + ncand - group_list[g]);
    }
    for (size_t i = 0; i < out->npending; i++) {
        int pod = out->pending[i];
        const us_pod *pd = &st->pods[pod];
        const int *list = NULL;
        size_t n = 0;
        if (pd->pin >= 0) {
            if (p->pos[pd->pin] >= 0 && us_place_allowed(p, pod, pd->pin)) {
                cands[ncand] = p->pos[pd->pin];
                list = cands + ncand++;
                n = 1;
            }
        } else {
            size_t g = 0;
            while (!us_labels_equal(groups[g], &st->workloads[pd->workload].node_selector)) g++;
            list = group_len[g] ? group_list[g] : NULL;  /* an empty list has no address */
            n = group_len[g];
        }
        pending[i] = (us_bg_pod){pd, &st->workloads[pd->workload], -1, list, n};
    }
    free(groups);
    free(group_list);
    free(group_len);

    us_bg_input in = {nodes, p->nnodes, running, noffered, pending, out->npending};
    /* the version in force, then the last good one, then the built-in */
    bool decided = false;
    for (us_policy *v = p->pol; v && !decided; v = us_policy_previous(v)) {
        us_err perr = {0};
        char why[512], what[700];
        memset(keep, 0, np * sizeof *keep);
        double t0 = us_plan_policy_start(p);
        int prc = us_policy_reoffer(v, &in, keep, pos_place, &perr);
        us_plan_policy_done(p, t0, 1);
        if (prc < 0) {
            if (us_plan_policy_event(p, v, "PolicyFailed", "background.lua", perr.msg) < 0) goto nomem;
            continue;
        }
        memcpy(scratch, held, nn * sizeof *held);
        const char *bad = check(p, &in, keep, pos_place, scratch, why, sizeof why);
        if (!bad) {
            decided = true;
            continue;
        }
        snprintf(what, sizeof what, "background.lua: result rejected: %s", bad);
        if (us_plan_policy_event(p, v, "PolicyRejected", "background.lua", what) < 0) goto nomem;
    }
    if (!decided) {
        memset(keep, 0, np * sizeof *keep);
        if (us_builtin_reoffer(&in, keep, pos_place, err) < 0) goto fail;
    }
    for (size_t j = 0; j < noffered; j++) out->keep[offered[j]] = keep[j];
    for (size_t i = 0; i < out->npending; i++)
        out->place[i] = pos_place[i] >= 0 ? p->nodes[pos_place[i]] : -1;
    goto done;
nomem_groups:
    free(groups);
    free(group_list);
    free(group_len);
nomem:
    us_err_nomem(err);
fail:
    rc = -1;
    us_reoffer_free(out);
done:
    free(keep);
    free(touched);
    free(offered);
    free(nodes);
    free(held);
    free(scratch);
    free(running);
    free(pending);
    free(cands);
    free(pos_place);
    return rc;
}
