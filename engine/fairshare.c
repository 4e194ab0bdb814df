/*
 * fairshare.c — the fair-share step of a cycle: builds the policy's input
 * from the plan (AI demand and allocation only: background work is
 * invisible), runs fairshare.lua, checks its result against the rules a
 * fair share must obey, and falls back to the built-in policy when it fails;
 * the built-in policy's result is checked by the same rules.
 *
 * The rules: every share is finite and >= 0; children never share out more
 * than their parent got, nor roots more than the pool holds, beyond what
 * their quotas guarantee them (quotas are not scaled down when they add up
 * to more: KAI's deserved quota); no queue gets more than its limit.
 */
#include "fairshare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "builtin.h"

/* Room for rounding in the policy's arithmetic. */
static double slack(double x) { return 1e-6 * fabs(x) + 1e-6; }

/* What quota guarantees queue x of resource r when its parent divides
 * amount (engine units): its quota (its demand, up to amount, when
 * unlimited), never more than its demand or its limit. */
static double guaranteed(const us_fs_queue *x, int r, double amount) {
    double demand = (double)x->demand.v[r], quota = (double)x->res[r].quota;
    double g = x->res[r].quota == US_UNLIMITED ? fmin(demand, amount) : fmin(quota, demand);
    if (x->res[r].limit != US_UNLIMITED && (double)x->res[r].limit < g) g = (double)x->res[r].limit;
    return g > 0 ? g : 0;
}

/* Returns NULL when fair obeys every rule, else a description. */
static const char *check(const us_fs_input *in, const double *fair, char *buf, size_t len) {
    size_t nq = in->nqueues;
    double *kids = calloc(nq * US_NRES * 2 + 1, sizeof *kids), *owed = kids + nq * US_NRES;
    double roots[US_NRES] = {0}, roots_owed[US_NRES] = {0};
    const char *bad = NULL;
    if (!kids) return "out of memory while checking";
    for (size_t q = 0; q < nq && !bad; q++) {
        for (int r = 0; r < US_NRES; r++) {
            double f = fair[q * US_NRES + r];
            const us_fs_queue *x = &in->queues[q];
            if (!isfinite(f) || f < -slack(0)) {
                /* in the policy's units: devices for gpu, as compute returned it */
                snprintf(buf, len, "fair share of queue \"%s\" for %s is %g: must be a finite number >= 0",
                         x->name, us_res_names[r], r == US_GPU ? f / US_GPU_UNIT : f);
                bad = buf;
                break;
            }
            if (x->res[r].limit != US_UNLIMITED && f > (double)x->res[r].limit + slack(f)) {
                snprintf(buf, len, "fair share of queue \"%s\" for %s exceeds its limit", x->name,
                         us_res_names[r]);
                bad = buf;
                break;
            }
            if (x->parent >= 0) {
                kids[x->parent * US_NRES + r] += f;
                owed[x->parent * US_NRES + r] += guaranteed(x, r, fair[x->parent * US_NRES + r]);
            } else {
                roots[r] += f;
                roots_owed[r] += guaranteed(x, r, (double)in->capacity.v[r]);
            }
        }
    }
    for (size_t q = 0; q < nq && !bad; q++)
        for (int r = 0; r < US_NRES; r++) {
            double f = fair[q * US_NRES + r], k = kids[q * US_NRES + r], o = owed[q * US_NRES + r];
            double most = f > o ? f : o;
            if (k > most + slack(most)) {
                snprintf(buf, len, "children of queue \"%s\" share out more %s than it has "
                         "(beyond what their quotas guarantee)", in->queues[q].name, us_res_names[r]);
                bad = buf;
                break;
            }
        }
    for (int r = 0; r < US_NRES && !bad; r++) {
        double cap = (double)in->capacity.v[r], most = cap > roots_owed[r] ? cap : roots_owed[r];
        if (roots[r] > most + slack(most)) {
            snprintf(buf, len, "top-level queues share out more %s than pool \"%s\" holds "
                     "(beyond what their quotas guarantee)", us_res_names[r], in->pool);
            bad = buf;
        }
    }
    free(kids);
    return bad;
}

/* The built-in policy is checked like any other.  It has no fallback of its
 * own: a rejected result becomes a fair share of 0 for every queue, which
 * obeys every rule (no reclaim this cycle; allocation goes on). */
static int check_builtin(us_plan *p, const us_fs_input *in, us_err *err) {
    char why[512];
    const char *bad = check(in, p->fair, why, sizeof why);
    if (!bad) return 0;
    for (size_t i = 0; i < in->nqueues * US_NRES; i++) p->fair[i] = 0;
    const char *ann[] = {"policy", "fairshare", "policy-id", "builtin", "pool", p->pool, NULL};
    if (us_log_event(p->log, "Warning", "PolicyRejected", "fairshare (built-in)", ann,
                     "built-in fair share: result rejected: %s; this cycle gives every queue "
                     "a fair share of 0 on pool \"%s\"", bad, p->pool) < 0)
        return us_err_nomem(err);
    return 0;
}

int us_fairshare_compute(us_plan *p, us_err *err) {
    us_state *st = p->st;
    us_fs_queue *qs = calloc(st->nqueues ? st->nqueues : 1, sizeof *qs);
    if (!qs) return us_err_nomem(err);
    us_fs_input in = {.pool = p->pool, .queues = qs, .nqueues = st->nqueues};
    for (size_t i = 0; i < p->nnodes; i++)
        in.capacity = us_res_add(in.capacity, st->nodes[p->nodes[i]].cap);
    for (size_t q = 0; q < st->nqueues; q++) {
        const us_queue *x = &st->queues[q];
        qs[q].name = x->name;
        qs[q].parent = x->parent;
        qs[q].priority = x->priority;
        qs[q].created_at = x->created_at;
        for (int r = 0; r < US_NRES; r++) qs[q].res[r] = us_queue_res(x, p->pool, r);
        qs[q].demand = p->demand[q];
        qs[q].allocated = p->alloc[q];
    }

    /* the version in force, then the last good one, then the built-in */
    int rc = 0;
    bool done = false;
    for (us_policy *v = p->pol; v && !done && rc == 0; v = us_policy_previous(v)) {
        us_err perr = {0};
        char why[512], what[700];
        double t0 = us_plan_policy_start(p);
        int prc = us_policy_fairshare(v, &in, p->fair, &perr);
        us_plan_policy_done(p, t0, 1);
        if (prc < 0) {
            rc = us_plan_policy_event(p, v, "PolicyFailed", "fairshare.lua", perr.msg);
            continue;
        }
        const char *bad = check(&in, p->fair, why, sizeof why);
        if (!bad) {
            done = true;
            continue;
        }
        snprintf(what, sizeof what, "fairshare.lua: result rejected: %s", bad);
        rc = us_plan_policy_event(p, v, "PolicyRejected", "fairshare.lua", what);
    }
    if (rc < 0) us_err_nomem(err);
    else if (!done && (rc = us_builtin_fairshare(&in, p->fair, err)) == 0)
        rc = check_builtin(p, &in, err);
    free(qs);
    return rc;
}
