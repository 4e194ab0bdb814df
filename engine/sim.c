/*
 * sim.c — the simulator: virtual time, the scenario's timeline, workload
 * durations, and one cycle every cycle_interval seconds.  It records what
 * changed in the cluster before each cycle (the changes list) and what the
 * cycle decided; rendering is output.c's job.
 */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cyclecache.h"
#include "lifecycle.h"
#include "reload.h"

#define US_SIM_MAX_CYCLES 1000

void us_sim_opts_default(us_sim_opts *o) {
    memset(o, 0, sizeof *o);
    us_cycle_opts_default(&o->cycle);
}

static void free_changes(us_sim_cycle *c) {
    for (size_t i = 0; i < c->nchanges; i++) {
        for (size_t k = 0; k < c->changes[i].npods; k++) free(c->changes[i].pods[k]);
        free(c->changes[i].pods);
        free(c->changes[i].object);
    }
    free(c->changes);
    c->changes = NULL;
    c->nchanges = c->cap_changes = 0;
}

void us_sim_result_free(us_sim_result *res) {
    for (size_t i = 0; i < res->ncycles; i++) {
        us_cycle_log_free(&res->cycles[i].log);
        free(res->cycles[i].queues);
        free_changes(&res->cycles[i]);
    }
    free(res->cycles);
    free(res->scenario);
    us_hv_free(&res->harvest);
    memset(res, 0, sizeof *res);
}

typedef struct sim {
    us_scenario *sc;
    us_policy *caller;     /* the caller's policy: lent, never freed here */
    us_policy *pol;        /* the policy in force: caller, or one a reload loaded */
    const us_sim_opts *o;
    size_t next_tl;        /* next timeline entry to apply */
} sim;

static const char *policy_id(const us_policy *p) { return p ? us_policy_id(p) : "builtin"; }

/* Give the caller's policy back if the policy in force holds it as its
 * previous version: it is about to be replaced (set_previous would free it)
 * or freed. */
static void return_caller(sim *s) {
    if (s->pol && s->pol != s->caller && us_policy_previous(s->pol) == s->caller)
        (void)us_policy_take_previous(s->pol);
}

/* Free what the simulator owns: the policy in force unless it is the
 * caller's (its previous version goes with it). */
static void release_policies(sim *s) {
    return_caller(s);
    if (s->pol != s->caller) us_policy_free(s->pol);
    s->pol = s->caller;
}

/* A timeline reload: the directory must pass us_reload_check on the state
 * as it is now; then it goes live, with the policy it replaces as its last
 * good version.  A refusal leaves the policy in force untouched. */
static int reload(sim *s, const us_tl_entry *e, double t, us_cycle_log *log) {
    us_err rerr = {0};
    us_policy *fresh = NULL;
    const char *old_id = policy_id(s->pol);
    if (us_reload_check(&s->sc->state, t, e->dir, &s->o->limits, &s->o->cycle, &fresh, &rerr) < 0) {
        if (rerr.code == US_ENOMEM) return -1;
        const char *ann[] = {"policy-dir", e->dir, "policy-id", old_id, NULL};
        return us_log_event(log, "Warning", "PolicyReloadRefused", "policies", ann,
                            "reload of %s refused, the running policy (%s) stays: %s", e->dir,
                            old_id, rerr.msg);
    }
    return_caller(s);
    us_policy_set_previous(fresh, s->pol);
    s->pol = fresh;
    const char *ann[] = {"policy-dir", e->dir, "policy-id", us_policy_id(fresh), "previous-policy-id",
                         old_id, NULL};
    return us_log_event(log, "Normal", "PolicyReloaded", "policies", ann,
                        "policies reloaded from %s: %s replaces %s", e->dir, us_policy_id(fresh),
                        old_id);
}

/* ---- changes ------------------------------------------------------------- */

/* Append a change of object (copied) with no pods yet; NULL when out of
 * memory. */
const char *const us_change_names[] = {"submit", "delete",   "complete", "add_node",
                                       "remove_node", "cordon", "uncordon", "leave"};

/* The change a timeline action makes (reload_policies makes none: its
 * event says what happened). */
static us_change_kind kind_of(us_tl_action a) {
    switch (a) {
    case US_TL_SUBMIT: return US_CH_SUBMIT;
    case US_TL_DELETE: return US_CH_DELETE;
    case US_TL_COMPLETE: return US_CH_COMPLETE;
    case US_TL_ADD_NODE: return US_CH_ADD_NODE;
    case US_TL_REMOVE_NODE: return US_CH_REMOVE_NODE;
    case US_TL_CORDON: return US_CH_CORDON;
    default: return US_CH_UNCORDON;
    }
}

static us_change *change(us_sim_cycle *c, us_change_kind a, const char *object) {
    if (us_grow((void **)&c->changes, &c->cap_changes, c->nchanges, sizeof *c->changes) < 0)
        return NULL;
    us_change *ch = &c->changes[c->nchanges];
    memset(ch, 0, sizeof *ch);
    ch->action = a;
    if (!(ch->object = strdup(object))) return NULL;
    c->nchanges++;
    return ch;
}

/* Add every pod of st that pick selects to ch's list (names copied).  The
 * pods are counted first so the list is allocated once. */
static int add_pods(us_change *ch, const us_state *st, bool (*pick)(const us_pod *, const void *),
                    const void *arg) {
    size_t n = 0;
    for (size_t i = 0; i < st->npods; i++) n += pick(&st->pods[i], arg);
    if (!n) return 0;
    char **pods = realloc(ch->pods, (ch->npods + n) * sizeof *pods);
    if (!pods) return -1;
    ch->pods = pods;
    for (size_t i = 0; i < st->npods; i++) {
        if (!pick(&st->pods[i], arg)) continue;
        if (!(ch->pods[ch->npods] = strdup(st->pods[i].name))) return -1;
        ch->npods++;
    }
    return 0;
}

static bool live(const us_pod *p) {
    return !p->gone && (p->state == US_POD_PENDING || p->state == US_POD_PIPELINED ||
                        p->state == US_POD_RUNNING);
}

typedef struct since {
    uint64_t seq;  /* pods created at or after this creation number */
    int workload;  /* of this workload, or any when -1 */
} since;

static bool created(const us_pod *p, const void *arg) {
    const since *s = arg;
    return !p->gone && p->seq >= s->seq && (s->workload < 0 || p->workload == s->workload);
}

static bool live_of_workload(const us_pod *p, const void *arg) {
    return live(p) && p->workload == *(const int *)arg;
}

static bool on_node(const us_pod *p, const void *arg) {
    int n = *(const int *)arg;
    return live(p) && (p->node == n || p->pin == n);
}

/* The live pods of each workload w with slot[w] > 0 named in the list of
 * changes[slot[w] - 1] (of n): one pass counts, one fills, so many changes
 * at once stay linear in pods.  -1 when out of memory. */
static int list_pods(const us_state *st, const int *slot, us_change *changes, size_t n) {
    for (size_t i = 0; i < st->npods; i++)
        if (live(&st->pods[i]) && slot[st->pods[i].workload]) changes[slot[st->pods[i].workload] - 1].npods++;
    for (size_t k = 0; k < n; k++) {
        size_t cnt = changes[k].npods;
        changes[k].npods = 0; /* counts what the list holds, from here on */
        if (cnt && !(changes[k].pods = calloc(cnt, sizeof *changes[k].pods))) return -1;
    }
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        if (!live(p) || !slot[p->workload]) continue;
        us_change *ch = &changes[slot[p->workload] - 1];
        if (!(ch->pods[ch->npods] = strdup(p->name))) return -1;
        ch->npods++;
    }
    return 0;
}

/* Submit what is due, with a change per workload submitted naming its pods:
 * the ones its controller created, and the pre-existing ones a workload at
 * t=0 may come with. */
static int submit_due(us_state *st, double t, us_sim_cycle *c, bool *changed) {
    size_t nw = st->nworkloads, ndue = 0;
    /* slot[w]: 1 + w's place among the due workloads, 0 when not due */
    int *slot = calloc(nw + 1, sizeof *slot);
    int rc = -1;
    if (!slot) return -1;
    for (size_t w = 0; w < nw; w++)
        if (st->workloads[w].state == US_WL_WAITING && st->workloads[w].submit_at <= t)
            slot[w] = (int)++ndue;
    if (us_life_submit_due(st, t, changed) < 0) goto out;
    if (!ndue) {
        rc = 0;
        goto out;
    }
    /* one change each, in workload order; then one pass over the pods
     * counts and one fills their lists, so a large submission stays linear */
    size_t first = c->nchanges;
    for (size_t w = 0; w < nw; w++)
        if (slot[w] && !change(c, US_CH_SUBMIT, st->workloads[w].name)) goto out;
    if (list_pods(st, slot, c->changes + first, c->nchanges - first) < 0) goto out;
    rc = 0;
out:
    free(slot);
    return rc;
}

/* Complete the workloads whose duration ran out by t, with a change each
 * naming its live pods, in workload order: one pass over the pods for them
 * all (us_life_complete_many), so that many ending at once stays linear. */
static int complete_due(us_state *st, double t, us_sim_cycle *c, bool *changed) {
    size_t nw = st->nworkloads, ndue = 0, first = c->nchanges;
    /* slot[w]: 1 + w's place among the due workloads, 0 when not due */
    int *slot = calloc(nw + 1, sizeof *slot), *due = malloc((nw + 1) * sizeof *due);
    us_change *ch;
    int rc = -1;
    if (!slot || !due) goto out;
    for (size_t w = 0; w < nw; w++) {
        const us_workload *wl = &st->workloads[w];
        if (wl->state == US_WL_ACTIVE && wl->duration >= 0 && wl->started_at >= 0 &&
            wl->started_at + wl->duration <= t) {
            due[ndue] = (int)w;
            slot[w] = (int)++ndue;
            if (!(ch = change(c, US_CH_COMPLETE, wl->name))) goto out;
            ch->by_duration = true;
        }
    }
    if (!ndue) {
        rc = 0;
        goto out;
    }
    *changed = true;
    if (list_pods(st, slot, c->changes + first, c->nchanges - first) < 0) goto out;
    rc = us_life_complete_many(st, due, ndue, t);
out:
    free(slot);
    free(due);
    return rc;
}

/* Apply what is due at time t; *changed tells whether anything was.
 * Reloads come last, so that their dry run sees the state the cycle at t
 * will start from (submissions and node changes of the same time
 * included). */
static int apply_due(sim *s, double t, us_sim_cycle *c, bool *changed) {
    us_state *st = &s->sc->state;
    size_t first = s->next_tl;
    int rc = 0;
    for (; s->next_tl < s->sc->ntimeline && s->sc->timeline[s->next_tl].at <= t && rc == 0;
         s->next_tl++) {
        const us_tl_entry *e = &s->sc->timeline[s->next_tl];
        us_change *ch = NULL;
        since new_pods = {st->next_seq, -1};
        *changed = true;
        /* the change names the pods it stops before they stop, and the pods
         * it creates after they exist; one that does nothing (deleting a
         * deleted workload) is not a change */
        if (e->action == US_TL_DELETE || e->action == US_TL_COMPLETE) {
            us_wl_state ws = st->workloads[e->workload].state;
            if (ws == US_WL_ACTIVE || (ws == US_WL_WAITING && e->action == US_TL_DELETE)) {
                if (!(ch = change(c, kind_of(e->action), st->workloads[e->workload].name)) ||
                    add_pods(ch, st, live_of_workload, &e->workload) < 0)
                    return -1;
            }
        } else if (e->action == US_TL_ADD_NODE || e->action == US_TL_REMOVE_NODE ||
                   e->action == US_TL_CORDON || e->action == US_TL_UNCORDON) {
            if (!(ch = change(c, kind_of(e->action), st->nodes[e->node].name))) return -1;
            if (e->action == US_TL_REMOVE_NODE && add_pods(ch, st, on_node, &e->node) < 0) return -1;
        }
        switch (e->action) {
        case US_TL_SUBMIT:
            /* the loader set submit_at; submission below handles it */
            break;
        case US_TL_DELETE:
            if (ch) rc = us_life_delete(st, e->workload, t);
            break;
        case US_TL_COMPLETE:
            if (ch) rc = us_life_complete(st, e->workload, t);
            break;
        case US_TL_ADD_NODE:
            rc = us_life_add_node(st, e->node, t);
            if (rc == 0 && add_pods(ch, st, created, &new_pods) < 0) return -1;
            break;
        case US_TL_REMOVE_NODE: rc = us_life_remove_node(st, e->node, t); break;
        case US_TL_CORDON: us_life_cordon(st, e->node, true); break;
        case US_TL_UNCORDON: us_life_cordon(st, e->node, false); break;
        case US_TL_RELOAD_POLICIES: break; /* below */
        }
    }
    if (rc == 0) rc = submit_due(st, t, c, changed);
    if (rc == 0) rc = complete_due(st, t, c, changed);
    for (size_t i = first; i < s->next_tl && rc == 0; i++)
        if (s->sc->timeline[i].action == US_TL_RELOAD_POLICIES)
            rc = reload(s, &s->sc->timeline[i], t, &c->log);
    return rc;
}

typedef struct leaver {
    int workload, pod;
} leaver;

static int by_workload_then_pod(const void *a, const void *b) {
    const leaver *x = a, *y = b;
    if (x->workload != y->workload) return (x->workload > y->workload) - (x->workload < y->workload);
    return (x->pod > y->pod) - (x->pod < y->pod);
}

/* Releasing pods whose grace has ended leave, with a `leave` change per
 * workload (in workload order, its pods in pod order).  A consequence of an
 * earlier eviction or deletion, so it does not count as activity for the
 * quiet-run stop. */
static int expire(us_state *st, double t, us_sim_cycle *c) {
    if (!us_life_expiry_due(st, t)) return 0;  /* none leaves: no pass */
    size_t n = 0;
    leaver *leaving = malloc((st->npods + 1) * sizeof *leaving);
    int rc = 0;
    if (!leaving) return -1;
    /* from the pods passing through when they are known (state.h), else
     * by a pass over the pods */
    size_t npassing;
    const int *passing = us_state_passing(st, &npassing);
    for (size_t k = 0; k < (passing ? npassing : st->npods); k++) {
        size_t i = passing ? (size_t)passing[k] : k;
        if (!st->pods[i].gone && st->pods[i].state == US_POD_RELEASING && st->pods[i].release_at <= t)
            leaving[n++] = (leaver){st->pods[i].workload, (int)i};
    }
    qsort(leaving, n, sizeof *leaving, by_workload_then_pod);
    for (size_t k = 0; k < n && rc == 0;) {
        int w = leaving[k].workload;
        us_change *ch = change(c, US_CH_LEAVE, st->workloads[w].name);
        size_t from = k;
        while (k < n && leaving[k].workload == w) k++;
        if (!ch || !(ch->pods = malloc((k - from) * sizeof *ch->pods))) {
            rc = -1;
            break;
        }
        for (size_t j = from; j < k; j++) {
            if (!(ch->pods[ch->npods] = strdup(st->pods[leaving[j].pod].name))) {
                rc = -1;
                break;
            }
            ch->npods++;
        }
    }
    free(leaving);
    /* a broken invariant leaves the pod due: the cycle's own call says so */
    if (rc == 0) (void)us_life_expire(st, t);
    return rc;
}

/* Is anything still due later: timeline, submissions, durations, grace? */
static bool future_work(const sim *s) {
    const us_state *st = &s->sc->state;
    if (s->next_tl < s->sc->ntimeline) return true;
    for (size_t w = 0; w < st->nworkloads; w++) {
        const us_workload *wl = &st->workloads[w];
        if (wl->state == US_WL_WAITING) return true;
        if (wl->state == US_WL_ACTIVE && wl->duration >= 0 && wl->started_at >= 0) return true;
    }
    for (size_t i = 0; i < st->npods; i++)
        if (!st->pods[i].gone &&
            (st->pods[i].state == US_POD_RELEASING || st->pods[i].state == US_POD_PIPELINED))
            return true;
    return false;
}

static int push_cycle(us_sim_result *res, us_sim_cycle *c) {
    if (us_grow((void **)&res->cycles, &res->cap_cycles, res->ncycles, sizeof *res->cycles) < 0)
        return -1;
    res->cycles[res->ncycles++] = *c;
    return 0;
}

int us_sim_run(us_scenario *sc, us_policy *pol, const us_sim_opts *o, us_sim_result *res,
               us_err *err) {
    us_sim_opts defaults;
    if (!o) {
        us_sim_opts_default(&defaults);
        o = &defaults;
    }
    memset(res, 0, sizeof *res);
    sim s = {sc, pol, pol, o, 0};
    us_state *st = &sc->state;
    res->nqueues = st->nqueues;
    if (!(res->scenario = strdup(sc->name ? sc->name : ""))) return us_err_nomem(err);
    if (us_hv_init(&res->harvest, st, sc->cycle_interval) < 0) {
        us_sim_result_free(res);
        return us_err_nomem(err);
    }

    /* what each cycle leaves for the next, unless every cycle is a full one */
    us_cycle_opts copts = o->cycle;
    us_cycle_cache *cache = NULL;
    if (copts.full_cycles) copts.cache = NULL;
    else if (!copts.cache && !(copts.cache = cache = us_cycle_cache_new())) {
        us_sim_result_free(res);
        return us_err_nomem(err);
    }
    int quiet = 0, most = US_SIM_MAX_CYCLES;
    if (sc->horizon >= 0 && sc->cycle_interval > 0 && sc->horizon / sc->cycle_interval + 1 < most)
        most = (int)(sc->horizon / sc->cycle_interval) + 1;
    for (int i = 0; i < US_SIM_MAX_CYCLES; i++) {
        double t = i * sc->cycle_interval;
        if (sc->horizon >= 0 && t > sc->horizon) break;
        us_sim_cycle c = {.index = i + 1, .time = t};
        us_cycle_log_init(&c.log);
        c.queues = calloc(st->nqueues ? st->nqueues : 1, sizeof *c.queues);
        bool changed = false;
        if (!c.queues) goto nomem_cycle;
        if (apply_due(&s, t, &c, &changed) < 0 || expire(st, t, &c) < 0) goto nomem_cycle;
        snprintf(c.policy, sizeof c.policy, "%s", policy_id(s.pol));
        /* every version the cycle may ask starts from the cycle's seed, so
         * a cycle's randomness never depends on what earlier cycles drew */
        for (us_policy *v = s.pol; v; v = us_policy_previous(v)) us_policy_seed(v, (uint64_t)(i + 1));
        if (o->before_cycle) {
            o->before_cycle(o->hook_ctx, st, s.pol, t, i + 1);
            for (us_policy *v = s.pol; v; v = us_policy_previous(v)) us_policy_seed(v, (uint64_t)(i + 1));
        }
        if (us_hv_before(&res->harvest, st) < 0) goto nomem_cycle;
        if (us_cycle_run(st, s.pol, t, &copts, &c.log, c.queues, &res->totals, err) < 0) {
            if (err && err->code == US_EINVARIANT) us_err_prefix(err, "cycle %d: ", i + 1);
            goto fail_cycle;
        }
        if (us_hv_after(&res->harvest, st, t, &c.log) < 0) goto nomem_cycle;
        if (push_cycle(res, &c) < 0) goto nomem_cycle;
        res->final_time = t;
        if (o->progress) o->progress(o->progress_ctx, i + 1, t, most);
        changed = changed || c.log.ndecisions > 0;
        quiet = changed ? 0 : quiet + 1;
        if (sc->horizon < 0 && quiet >= 2 && !future_work(&s)) break;
        continue;
    nomem_cycle:
        us_err_nomem(err);
    fail_cycle:
        us_cycle_log_free(&c.log);
        free(c.queues);
        free_changes(&c);
        release_policies(&s);
        us_cycle_cache_free(cache);
        us_sim_result_free(res);
        return -1;
    }
    for (size_t i = 0; i < st->npods; i++) {
        const us_workload *w = &st->workloads[st->pods[i].workload];
        if (!st->pods[i].gone && st->pods[i].state == US_POD_PENDING && !w->background && !w->external &&
            w->state == US_WL_ACTIVE)
            res->ai_pods_pending++;
    }
    snprintf(res->policy, sizeof res->policy, "%s", policy_id(s.pol));
    release_policies(&s);
    us_cycle_cache_free(cache);
    return 0;
}
