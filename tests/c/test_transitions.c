/*
 * test_transitions.c — properties of a cycle over random clusters in
 * motion (submissions, deletions, nodes leaving and joining), checked
 * after every cycle with the built-in policies:
 *
 *   - keep-if-fits: a background pod evicted for room did not fit beside
 *     the AI plan's end state (AI pods running or pipelined on its node)
 *     and the background pods still running there;
 *   - every placement the re-offer returns is applied by commit (run step
 *     by step on a copy of the state, as cycle.c runs a pool);
 *   - gangs: every AI workload holds 0 or at least min_member pods (or
 *     some, when pods of it ran to completion: never stopped then), no
 *     pipelined pod waits for a pod of its own workload, and every pod the
 *     engine stops is an evict decision;
 *   - the evictor: every background eviction names the AI workload whose
 *     placement, in the order the cycle made them, left the pod no room;
 *     every Evict event names an evictor.
 *
 * Bounded and seeded: the same runs every time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocate.h"
#include "check.h"
#include "commit.h"
#include "cycle.h"
#include "fairshare.h"
#include "lifecycle.h"
#include "plan.h"
#include "reoffer.h"
#include "scenario.h"
#include "use.h"
#include "victims.h"

static uint64_t rng;
static unsigned rnd(unsigned n) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)((rng >> 33) % n);
}

/* A random cluster as a scenario document (no timeline: the test moves it). */
static void random_scenario(char *buf, size_t len, int *nnodes) {
    size_t at = 0;
#define PUT(...) at += (size_t)snprintf(buf + at, at < len ? len - at : 0, __VA_ARGS__)
    static const char *prio[] = {"train", "build-preemptible", "build", "inference"};
    int nn = 2 + (int)rnd(3);
    *nnodes = nn;
    PUT("{\"name\":\"random\",\"nodes\":[");
    for (int i = 0; i < nn; i++)
        PUT("%s{\"name\":\"n%d\",\"gpu\":%d,\"cpu\":\"%d\",\"memory\":\"256Gi\"}", i ? "," : "", i,
            rnd(2) ? 8 : 4, rnd(2) ? 64 : 32);
    PUT("],\"queues\":[{\"name\":\"a\",\"resources\":{\"gpu\":{\"quota\":%u}}},"
        "{\"name\":\"b\",\"resources\":{\"gpu\":{\"quota\":%u}}},"
        "{\"name\":\"bg\",\"resources\":{\"gpu\":{\"quota\":0,\"over_quota_weight\":0},"
        "\"cpu\":{\"quota\":0,\"over_quota_weight\":0},\"memory\":{\"quota\":0,\"over_quota_weight\":0}}}],"
        "\"workloads\":[",
        rnd(12), rnd(12));
    int nai = 4 + (int)rnd(5);
    for (int w = 0; w < nai; w++) {
        int replicas = 1 + (int)rnd(3);
        /* a third of the gangs had pods run to completion (a job's first
         * workers finished): not among replicas, and they leave min_member
         * room above replicas */
        int done = rnd(3) == 0 ? 1 + (int)rnd(2) : 0;
        if (done) PUT("{\"succeeded\":%d,", done);
        else PUT("{");
        PUT("\"name\":\"ai%d\",\"queue\":\"%s\",\"priority\":\"%s\",\"replicas\":%d,\"min_member\":%d,"
            "\"requests\":{\"gpu\":%s,\"cpu\":\"%u\"},\"submit_at\":%u,\"termination_grace\":%u},",
            w, rnd(2) ? "a" : "b", prio[rnd(4)], replicas, 1 + (int)rnd((unsigned)(replicas + done)),
            rnd(5) == 0 ? "0.5" : (const char *[]){"1", "2", "4", "8"}[rnd(4)], 1 + rnd(40),
            10 * rnd(5), (const unsigned[]){0, 5, 20, 20}[rnd(4)]);
    }
    PUT("{\"name\":\"agent\",\"queue\":\"bg\",\"controller\":\"daemonset\","
        "\"labels\":{\"kai.scheduler/background\":\"true\"},\"requests\":{\"cpu\":\"%u\"},"
        "\"termination_grace\":%u},",
        1 + rnd(12), rnd(2) ? 5 : 0);
    PUT("{\"name\":\"burn\",\"queue\":\"bg\",\"controller\":\"deployment\",\"replicas\":%u,"
        "\"labels\":{\"kai.scheduler/background\":\"true\"},\"requests\":{\"gpu\":%u,\"cpu\":\"%u\"},"
        "\"termination_grace\":%u},",
        1 + rnd(6), 1 + rnd(4), rnd(8), rnd(2) ? 5 : 0);
    /* late background work: pending while the AI plan moves */
    PUT("{\"name\":\"late\",\"queue\":\"bg\",\"controller\":\"deployment\",\"replicas\":%u,"
        "\"labels\":{\"kai.scheduler/background\":\"true\"},\"requests\":{\"gpu\":%u,\"cpu\":\"%u\"},"
        "\"submit_at\":%u,\"termination_grace\":5}]}",
        1 + rnd(4), rnd(3), 1 + rnd(8), 10 * rnd(10));
#undef PUT
}

static bool is_ai(const us_state *st, int w) {
    return !st->workloads[w].background && !st->workloads[w].blocked;
}

/* Use of node n by AI pods running or pipelined (the end state) and the
 * background pods running there; skip is left out (-1: none). */
static us_use end_use(const us_state *st, int n, int skip) {
    us_use u = {0};
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *pd = &st->pods[i];
        if ((int)i == skip || pd->gone || pd->node != n) continue;
        bool ai = is_ai(st, pd->workload);
        if ((ai && (pd->state == US_POD_RUNNING || pd->state == US_POD_PIPELINED)) ||
            (!ai && pd->state == US_POD_RUNNING))
            us_use_add(&u, &st->nodes[n], st->workloads[pd->workload].request,
                       ai ? pd->shared_dev : -1);
    }
    return u;
}

static int pod_index(const us_state *st, const char *name, bool releasing) {
    for (size_t i = 0; i < st->npods; i++)
        if (!st->pods[i].gone && strcmp(st->pods[i].name, name) == 0 &&
            (st->pods[i].state == US_POD_RELEASING) == releasing)
            return (int)i;
    return -1;
}

static int wl_of_pod_name(const us_state *st, const char *pod) {
    int i = pod_index(st, pod, false);
    if (i < 0) i = pod_index(st, pod, true);
    return i < 0 ? -1 : st->pods[i].workload;
}

/* One pool's cycle on a copy, step by step as cycle.c runs it: every
 * placement the re-offer returned must be a running pod on that node. */
static void check_reoffer_applied(const us_state *st, double now, int *checked) {
    us_state c;
    us_plan p;
    us_reoffer bg = {0};
    us_cycle_log log;
    us_cycle_opts o;
    us_err err = {0};
    us_phys ph;
    us_cycle_opts_default(&o);
    us_cycle_log_init(&log);
    if (us_state_clone(&c, st) < 0) {
        CHECK(0);
        return;
    }
    CHECK(us_life_expire(&c, now) == 0);
    CHECK(us_commit_cycle_start(&c, now, NULL, &log, &ph, &err) == 0);
    CHECK(us_plan_snapshot(&p, &c, "default", now, NULL, &o, &log, NULL) == 0);
    CHECK(us_fairshare_compute(&p, &err) == 0);
    CHECK(us_allocate(&p, &err) == 0);
    CHECK(us_reclaim(&p, &err) == 0);
    CHECK(us_preempt(&p, &err) == 0);
    CHECK(us_reoffer_run(&p, &bg, &err) == 0);
    size_t npending = bg.npending;
    int *pods = malloc((npending + 1) * sizeof *pods), *nodes = malloc((npending + 1) * sizeof *nodes);
    for (size_t k = 0; k < npending; k++) {
        pods[k] = bg.pending[k];
        nodes[k] = bg.place[k];
    }
    CHECK(us_commit(&p, &bg, &ph, NULL, &err) == 0);
    us_phys_free(&ph);
    /* placements only append pods: the indices of those placed hold */
    for (size_t k = 0; k < npending; k++) {
        if (nodes[k] < 0) continue;
        (*checked)++;
        const us_pod *pd = &c.pods[pods[k]];
        if (pd->state != US_POD_RUNNING || pd->node != nodes[k])
            fprintf(stderr, "  t=%g: re-offer placed %s on %s; commit left it %s\n", now, pd->name,
                    c.nodes[nodes[k]].name, us_pod_state_names[pd->state]);
        CHECK(pd->state == US_POD_RUNNING && pd->node == nodes[k]);
    }
    free(pods);
    free(nodes);
    us_reoffer_free(&bg);
    us_plan_free(&p);
    us_cycle_log_free(&log);
    us_state_free(&c);
}

typedef struct tally {
    int cycles, bg_evictions, gang_stops, placed_checked;
    int kept_short;  /* cycles a gang ended below min_member, kept whole by
                        its pods that ran to completion */
} tally;

/* The checks on one cycle's log and the state it left. */
static void check_cycle(const us_state *st, const us_cycle_log *log, double now, tally *t) {
    for (size_t k = 0; k < log->nevents; k++) {
        const us_event *e = &log->events[k];
        if (strcmp(e->reason, "Evict") == 0) CHECK(us_labels_get(&e->annotations, "evictor-pod-group-name"));
        if (strcmp(e->reason, "PolicyResultDropped") == 0) fprintf(stderr, "  t=%g: %s\n", now, e->message);
        CHECK(strcmp(e->reason, "PolicyResultDropped") != 0);
    }
    for (size_t k = 0; k < log->ndecisions; k++) {
        const us_decision *d = &log->decisions[k];
        if (d->op == US_OP_PIPELINE) {
            int w = wl_of_pod_name(st, d->pod);
            for (size_t j = 0; j < d->nwaits; j++) {
                int other = wl_of_pod_name(st, d->waits_for[j]);
                if (other == w)
                    fprintf(stderr, "  t=%g: %s waits for %s of its own workload\n", now, d->pod,
                            d->waits_for[j]);
                CHECK(other != w);
            }
        }
        if (d->op != US_OP_EVICT) continue;
        CHECK(d->evictor != NULL);
        if (d->action == US_ACT_STALE_GANG) {
            /* a gang whose first pods ran to completion is not broken
             * (KAI's IsStale): only one that never had any is stopped */
            int w = wl_of_pod_name(st, d->pod);
            if (w >= 0 && st->workloads[w].succeeded > 0)
                fprintf(stderr, "  t=%g: %s stopped, but %d pod(s) of its gang succeeded\n", now, d->pod,
                        st->workloads[w].succeeded);
            CHECK(w >= 0 && st->workloads[w].succeeded == 0);
            t->gang_stops++;
        }
        if (d->action != US_ACT_BACKGROUND) continue;
        t->bg_evictions++;
        /* the evicted pod's old incarnation is releasing, or it left at once */
        int n = us_state_node_index(st, d->node);
        int w = wl_of_pod_name(st, d->pod);
        if (n < 0 || w < 0) {
            CHECK(0);
            continue;
        }
        us_res req = st->workloads[w].request;
        /* keep-if-fits: no room for it beside the end state */
        us_use end = end_use(st, n, -1);
        if (us_use_fits(&end, &st->nodes[n], req, -1))
            fprintf(stderr, "  t=%g: %s evicted from %s though it fits beside the AI end state\n",
                    now, d->pod, d->node);
        CHECK(!us_use_fits(&end, &st->nodes[n], req, -1));
        /* the evictor: start from what was on the node before the cycle's
         * placements (AI pods not placed this cycle, background pods kept),
         * add the cycle's AI placements on the node in order */
        us_use u = {0};
        for (size_t i = 0; i < st->npods; i++) {
            const us_pod *pd = &st->pods[i];
            if (pd->gone || pd->node != n) continue;
            bool placed_now = false;
            for (size_t j = 0; j < log->ndecisions && !placed_now; j++)
                placed_now = log->decisions[j].op != US_OP_EVICT &&
                             log->decisions[j].action != US_ACT_NONE &&
                             strcmp(log->decisions[j].pod, pd->name) == 0;
            if (placed_now) continue;
            bool ai = is_ai(st, pd->workload);
            if ((ai && (pd->state == US_POD_RUNNING || pd->state == US_POD_PIPELINED)) ||
                (!ai && pd->state == US_POD_RUNNING))
                us_use_add(&u, &st->nodes[n], st->workloads[pd->workload].request, ai ? pd->shared_dev : -1);
        }
        const char *expect = NULL, *last = NULL;
        bool fitted = us_use_fits(&u, &st->nodes[n], req, -1);
        for (size_t j = 0; j < log->ndecisions && fitted; j++) {
            const us_decision *x = &log->decisions[j];
            if (x->op == US_OP_EVICT || x->action == US_ACT_NONE || x->action == US_ACT_BACKGROUND ||
                strcmp(x->node, d->node) != 0)
                continue;
            int xi = pod_index(st, x->pod, false);
            if (xi < 0) continue;
            const us_workload *xw = &st->workloads[st->pods[xi].workload];
            us_use_add(&u, &st->nodes[n], xw->request, st->pods[xi].shared_dev);
            last = xw->name;
            if (!us_use_fits(&u, &st->nodes[n], req, -1)) {
                expect = xw->name;
                fitted = false;
            }
        }
        if (!expect) expect = last;
        if (expect && d->evictor) CHECK_STR(d->evictor, expect);
    }
    /* gang floor */
    int *held = calloc(st->nworkloads + 1, sizeof *held);
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *pd = &st->pods[i];
        if (!pd->gone && (pd->state == US_POD_RUNNING || pd->state == US_POD_PIPELINED))
            held[pd->workload]++;
    }
    for (size_t w = 0; w < st->nworkloads; w++) {
        const us_workload *wl = &st->workloads[w];
        if (wl->state != US_WL_ACTIVE || wl->background) continue;
        bool short_of = held[w] > 0 && held[w] < wl->min_member;
        if (short_of && wl->succeeded == 0)
            fprintf(stderr, "  t=%g: gang %s holds %d of min_member %d\n", now, wl->name, held[w],
                    wl->min_member);
        CHECK(!short_of || wl->succeeded > 0);
        t->kept_short += short_of;
    }
    free(held);
    t->cycles++;
}

/* The smallest case: big (8 GPUs) is evicted for train (4 GPUs) and
 * terminates for 5 s; small (4 GPUs), pending, must not be given the room
 * big still holds, or commit would refuse it. */
TEST(reoffer_never_offers_room_an_evicted_pod_holds) {
    static const char *doc =
        "{\"name\":\"idle\",\"nodes\":[{\"name\":\"n1\",\"gpu\":8}],"
        "\"queues\":[{\"name\":\"team\",\"resources\":{\"gpu\":{\"quota\":8}}},"
        "{\"name\":\"bg\",\"resources\":{\"gpu\":{\"quota\":0,\"over_quota_weight\":0},"
        "\"cpu\":{\"quota\":0,\"over_quota_weight\":0},\"memory\":{\"quota\":0,\"over_quota_weight\":0}}}],"
        "\"workloads\":[{\"name\":\"big\",\"queue\":\"bg\",\"labels\":{\"kai.scheduler/background\":\"true\"},"
        "\"requests\":{\"gpu\":8},\"termination_grace\":5},"
        "{\"name\":\"small\",\"queue\":\"bg\",\"labels\":{\"kai.scheduler/background\":\"true\"},"
        "\"requests\":{\"gpu\":4},\"termination_grace\":5,\"submit_at\":10},"
        "{\"name\":\"train\",\"queue\":\"team\",\"requests\":{\"gpu\":4},\"submit_at\":10}]}";
    us_scenario sc;
    us_err err = {0};
    if (us_scenario_load_string(&sc, doc, strlen(doc), NULL, &err) < 0) {
        fprintf(stderr, "  %s\n", err.msg);
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    us_cycle_opts o;
    us_cycle_opts_default(&o);
    int checked = 0;
    for (double now = 0; now <= 20; now += 10) {
        bool any;
        CHECK(us_life_submit_due(st, now, &any) == 0);
        check_reoffer_applied(st, now, &checked);
        us_cycle_log log;
        us_cycle_log_init(&log);
        CHECK(us_cycle_run(st, NULL, now, &o, &log, NULL, NULL, &err) == 0);
        us_cycle_log_free(&log);
    }
    CHECK(checked == 2);  /* big at 0, small at 20 once big is gone */
    int small = pod_index(st, "small-0", false);
    CHECK(small >= 0 && st->pods[small].state == US_POD_RUNNING);
    us_scenario_free(&sc);
}

TEST(random_clusters_in_motion_keep_the_rules) {
    tally t = {0};
    for (uint64_t seed = 1; seed <= 60; seed++) {
        rng = seed * 0x9e3779b97f4a7c15ULL;
        static char doc[16384];
        int nnodes;
        random_scenario(doc, sizeof doc, &nnodes);
        us_scenario sc;
        us_err err = {0};
        if (us_scenario_load_string(&sc, doc, strlen(doc), NULL, &err) < 0) {
            fprintf(stderr, "  seed %llu: %s\n", (unsigned long long)seed, err.msg);
            CHECK(0);
            continue;
        }
        us_state *st = &sc.state;
        us_cycle_opts o;
        us_cycle_opts_default(&o);
        for (double now = 0; now <= 150; now += 10) {
            bool any = false;
            CHECK(us_life_submit_due(st, now, &any) == 0);
            /* the cluster moves: a node leaves or comes back, a workload goes */
            unsigned move = rnd(10);
            int n = (int)rnd((unsigned)nnodes);
            if (move <= 1 && !st->nodes[n].removed) CHECK(us_life_remove_node(st, n, now) == 0);
            else if (move <= 3 && st->nodes[n].removed) CHECK(us_life_add_node(st, n, now) == 0);
            else if (move == 4) {
                int w = (int)rnd((unsigned)st->nworkloads);
                if (st->workloads[w].state == US_WL_ACTIVE && !st->workloads[w].background)
                    CHECK(us_life_delete(st, w, now) == 0);
            }
            check_reoffer_applied(st, now, &t.placed_checked);
            /* pods that hold a node before the cycle (grace periods ending
             * first): each one that does not after it was evicted, by a
             * decision */
            CHECK(us_life_expire(st, now) == 0);
            size_t nbefore = 0;
            char **before = malloc((st->npods + 1) * sizeof *before);
            for (size_t i = 0; i < st->npods; i++) {
                const us_pod *pd = &st->pods[i];
                if (!pd->gone && (pd->state == US_POD_RUNNING || pd->state == US_POD_PIPELINED))
                    before[nbefore++] = strdup(pd->name);
            }
            us_cycle_log log;
            us_cycle_log_init(&log);
            CHECK(us_cycle_run(st, NULL, now, &o, &log, NULL, NULL, &err) == 0);
            check_cycle(st, &log, now, &t);
            for (size_t k = 0; k < nbefore; k++) {
                int i = pod_index(st, before[k], false);
                bool holds = i >= 0 && (st->pods[i].state == US_POD_RUNNING ||
                                        st->pods[i].state == US_POD_PIPELINED);
                bool evicted = false;
                for (size_t j = 0; j < log.ndecisions && !evicted; j++)
                    evicted = log.decisions[j].op == US_OP_EVICT && strcmp(log.decisions[j].pod, before[k]) == 0;
                if (!holds && !evicted)
                    fprintf(stderr, "  t=%g: %s stopped without an evict decision\n", now, before[k]);
                CHECK(holds || evicted);
                free(before[k]);
            }
            free(before);
            us_cycle_log_free(&log);
        }
        us_scenario_free(&sc);
    }
    /* the runs exercised what they check */
    printf("  %d cycles, %d background evictions, %d gang stops, %d re-offer placements, "
           "%d gangs kept below min_member by pods that succeeded\n",
           t.cycles, t.bg_evictions, t.gang_stops, t.placed_checked, t.kept_short);
    CHECK(t.kept_short >= 5);
    CHECK(t.bg_evictions >= 20);
    CHECK(t.gang_stops >= 5);
    CHECK(t.placed_checked >= 50);
}

/* No two live pods share a name, whoever named them: a controller skips a
 * name another workload's pod holds (fuzz_scenario found "train-0" named
 * by hand in workload diag, then created again by train's controller). */
static bool names_unique(const us_state *st) {
    for (size_t i = 0; i < st->npods; i++)
        for (size_t j = i + 1; j < st->npods; j++)
            if (!st->pods[i].gone && !st->pods[j].gone && st->pods[i].state != US_POD_RELEASING &&
                st->pods[j].state != US_POD_RELEASING && strcmp(st->pods[i].name, st->pods[j].name) == 0)
                return false;
    return true;
}

TEST(controllers_never_take_a_live_pods_name) {
    static const char *doc =
        "{\"name\":\"names\",\"nodes\":[{\"name\":\"n1\",\"gpu\":8},{\"name\":\"b-0\",\"gpu\":8},"
        "{\"name\":\"c\",\"gpu\":8}],"
        "\"queues\":[{\"name\":\"team\",\"resources\":{\"gpu\":{\"quota\":24}}}],"
        "\"workloads\":[{\"name\":\"diag\",\"queue\":\"team\",\"replicas\":2,\"requests\":{\"gpu\":1},"
        "\"pods\":[{\"name\":\"train-0\",\"node\":\"n1\",\"state\":\"running\"},"
        "{\"name\":\"a-c\",\"node\":\"n1\",\"state\":\"running\"}]},"
        "{\"name\":\"train\",\"queue\":\"team\",\"replicas\":2,\"requests\":{\"gpu\":1},\"submit_at\":10},"
        "{\"name\":\"a\",\"queue\":\"team\",\"controller\":\"daemonset\",\"requests\":{\"gpu\":1}},"
        "{\"name\":\"a-b\",\"queue\":\"team\",\"replicas\":1,\"requests\":{\"gpu\":1}}]}";
    us_scenario sc;
    us_err err = {0};
    if (us_scenario_load_string(&sc, doc, strlen(doc), NULL, &err) < 0) {
        fprintf(stderr, "  %s\n", err.msg);
        CHECK(0);
        return;
    }
    us_state *st = &sc.state;
    bool any = false;
    CHECK(us_life_submit_due(st, 0, &any) == 0 && any);
    /* daemonset a: a-n1, a-b-0 and, a-c being diag's, a-c-1; then a-b's
     * first replica finds a-b-0 taken by a's pod on node b-0 */
    CHECK(pod_index(st, "a-n1", false) >= 0);
    CHECK(pod_index(st, "a-b-0", false) >= 0 && st->pods[pod_index(st, "a-b-0", false)].pin >= 0);
    CHECK(pod_index(st, "a-c-1", false) >= 0);
    CHECK(pod_index(st, "a-b-1", false) >= 0 && st->pods[pod_index(st, "a-b-1", false)].pin < 0);
    CHECK(us_life_submit_due(st, 10, &any) == 0);
    /* train's controller passes over train-0, diag's running pod */
    int t0 = pod_index(st, "train-0", false);
    CHECK(t0 >= 0 && st->pods[t0].state == US_POD_RUNNING &&
          strcmp(st->workloads[st->pods[t0].workload].name, "diag") == 0);
    CHECK(pod_index(st, "train-1", false) >= 0 && pod_index(st, "train-2", false) >= 0);
    CHECK(names_unique(st));
    us_scenario_free(&sc);
}

/* Completing workloads at once (one pass over the pods) leaves the state
 * that completing them one by one leaves: running pods completed, the rest
 * gone, the other workloads untouched. */
TEST(completing_many_is_completing_each) {
    const char *doc =
        "{\"nodes\":[{\"name\":\"n1\",\"gpu\":8,\"cpu\":64,\"memory\":\"512Gi\"}],"
        "\"queues\":[{\"name\":\"team\",\"resources\":{\"gpu\":{\"quota\":24}}}],"
        "\"workloads\":["
        "{\"name\":\"a\",\"queue\":\"team\",\"replicas\":3,\"requests\":{\"gpu\":1},"
        "\"pods\":[{\"node\":\"n1\",\"state\":\"running\"}]},"
        "{\"name\":\"b\",\"queue\":\"team\",\"replicas\":2,\"requests\":{\"gpu\":1},"
        "\"pods\":[{\"node\":\"n1\",\"state\":\"running\"},{\"node\":\"n1\",\"state\":\"running\"}]},"
        "{\"name\":\"c\",\"queue\":\"team\",\"replicas\":2,\"requests\":{\"gpu\":1},"
        "\"pods\":[{\"node\":\"n1\",\"state\":\"running\"}]}]}";
    us_scenario sc;
    us_err err = {0};
    if (us_scenario_load_string(&sc, doc, strlen(doc), NULL, &err) < 0) {
        fprintf(stderr, "  %s\n", err.msg);
        CHECK(0);
        return;
    }
    bool any = false;
    CHECK(us_life_submit_due(&sc.state, 0, &any) == 0 && any);
    us_state each, many;
    CHECK(us_state_clone(&each, &sc.state) == 0);
    CHECK(us_state_clone(&many, &sc.state) == 0);
    int wa = us_state_workload_index(&sc.state, "a"), wb = us_state_workload_index(&sc.state, "b");
    CHECK(us_life_complete(&each, wa, 5) == 0 && us_life_complete(&each, wb, 5) == 0);
    int ws[] = {wb, wa, wb};
    CHECK(us_life_complete_many(&many, ws, 3, 5) == 0);
    /* a: 1 running pod completed, 2 pending gone; b: 2 completed; c untouched */
    CHECK(sc.state.npods == 7 && many.npods == 5 && each.npods == 5);
    for (size_t i = 0; i < many.npods && i < each.npods; i++) {
        CHECK_STR(many.pods[i].name, each.pods[i].name);
        CHECK(many.pods[i].state == each.pods[i].state && many.pods[i].node == each.pods[i].node);
        const char *w = many.workloads[many.pods[i].workload].name;
        CHECK(many.pods[i].state == (strcmp(w, "c") == 0 ? (many.pods[i].node >= 0 ? US_POD_RUNNING
                                                                                   : US_POD_PENDING)
                                                         : US_POD_COMPLETED));
    }
    for (size_t w = 0; w < many.nworkloads; w++) CHECK(many.workloads[w].state == each.workloads[w].state);
    CHECK(many.workloads[wa].state == US_WL_COMPLETED && many.workloads[wb].state == US_WL_COMPLETED);
    CHECK(many.workloads[us_state_workload_index(&many, "c")].state == US_WL_ACTIVE);
    CHECK(us_life_complete_many(&many, ws, 0, 6) == 0 && many.npods == 5);
    us_state_free(&each);
    us_state_free(&many);
    us_scenario_free(&sc);
}

int main(void) {
    RUN(controllers_never_take_a_live_pods_name);
    RUN(reoffer_never_offers_room_an_evicted_pod_holds);
    RUN(random_clusters_in_motion_keep_the_rules);
    RUN(completing_many_is_completing_each);
    return check_report();
}
