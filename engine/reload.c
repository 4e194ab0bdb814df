/*
 * reload.c — the checked hot reload (reload.h): a policy directory goes
 * live only after it loaded, and a dry-run cycle on a copy of the current
 * state kept the result contract with every function called.
 *
 * It owns the order of the checks and the wording of a refusal.  It must
 * never change the state it is given (the dry run works on a deep copy),
 * never touch the policy in force (the caller swaps), and never hand back
 * the instance that ran the dry run: the policy returned is loaded afresh,
 * so its Lua state starts exactly as a policy loaded at start-up would,
 * whatever the dry run left in its module tables.
 */
#include "reload.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

/* The reason of a refusal from the first finding; how many others there
 * were, since one broken function often fails on every call. */
static int refuse(us_err *err, const char *where, const us_check_findings *f) {
    const us_check_finding *it = &f->items[0];
    size_t more = 0;
    for (size_t i = 0; i < f->n; i++) more += (size_t)f->items[i].count;
    more -= 1;
    if (more)
        return us_err_set(err, US_EPOLICY, "%s: %s: %s (and %zu more policy error%s)", where,
                          it->reason, it->message, more, more == 1 ? "" : "s");
    return us_err_set(err, US_EPOLICY, "%s: %s: %s", where, it->reason, it->message);
}

static bool every_function_called(const us_policy *p) {
    for (int m = 0; m < US_POLICY_NFN; m++)
        if (us_policy_calls(p, (us_policy_fn)m) == 0) return false;
    return true;
}

int us_reload_check(const us_state *st, double now, const char *dir,
                    const us_policy_limits *lim, const us_cycle_opts *o,
                    us_policy **out, us_err *err) {
    us_policy *trial = NULL, *fresh = NULL;
    us_state copy;
    us_scenario sc;
    us_cycle_log log;
    us_check_findings found = {0};
    us_cycle_opts defaults;
    us_err lerr = {0};
    bool cloned = false, have_sc = false, offers_background;
    char where[96];
    int rc = -1;

    *out = NULL;
    us_cycle_log_init(&log);
    memset(&sc, 0, sizeof sc);
    if (!o) {
        us_cycle_opts_default(&defaults);
        o = &defaults;
    }

    /* 1. compiles in a fresh state; each file returns its function */
    if (!(trial = us_policy_load(dir, lim, &lerr))) {
        us_err_set(err, lerr.code, "%s", lerr.msg);
        goto cleanup;
    }

    /* 2. a full cycle on a copy of the current state, with no previous
     *    version: any failure or rejected result is logged by the cycle */
    if (us_state_clone(&copy, st) < 0) {
        us_err_nomem(err);
        goto cleanup;
    }
    cloned = true;
    offers_background = us_check_offers_background(&copy);
    us_policy_seed(trial, 0);
    /* a trial on a copy: it leaves nothing for the real cycles */
    us_cycle_opts trial_opts = *o;
    trial_opts.cache = NULL;
    if (us_cycle_run(&copy, trial, now, &trial_opts, &log, NULL, NULL, err) < 0) goto cleanup;
    if (us_check_collect(&found, &log, 0, now) < 0) {
        us_err_nomem(err);
        goto cleanup;
    }
    if (found.n) {
        snprintf(where, sizeof where, "dry run on the current state (t=%gs)", now);
        refuse(err, where, &found);
        goto cleanup;
    }

    /* 3. a state with nothing to place or offer leaves functions unasked
     *    (or asked about nothing): the built-in check scenario asks each */
    if (!every_function_called(trial) || !offers_background) {
        if (us_check_load_builtin(&sc, err) < 0) goto cleanup;
        have_sc = true;
        if (us_check_run_scenario(&sc, trial, &trial_opts, &found, err) < 0) goto cleanup;
        if (found.n) {
            refuse(err, "dry run on the built-in check scenario", &found);
            goto cleanup;
        }
    }

    /* 4. the instance that goes live, loaded afresh from the same bytes */
    if (!(fresh = us_policy_load(dir, lim, &lerr))) {
        us_err_set(err, lerr.code, "the files changed during the check: %s", lerr.msg);
        goto cleanup;
    }
    if (strcmp(us_policy_id(fresh), us_policy_id(trial)) != 0) {
        us_err_set(err, US_EPOLICY, "the files changed during the check (id %s, then %s); "
                   "reload again once they are saved", us_policy_id(trial), us_policy_id(fresh));
        goto cleanup;
    }
    *out = fresh;
    fresh = NULL;
    rc = 0;
cleanup:
    us_policy_free(fresh);
    us_policy_free(trial);
    us_check_findings_free(&found);
    us_cycle_log_free(&log);
    if (cloned) us_state_free(&copy);
    if (have_sc) us_scenario_free(&sc);
    return rc;
}
