/*
 * test_ledger.c — the ledger kept across cycles (ledger.h) follows the
 * journal of changed pods to what counting every pod gives, and does
 * follow it (it does not simply count afresh each time).
 *
 * Each example scenario runs cycles with a cycle cache; between cycles,
 * random changes of every kind the lifecycle makes (evictions with and
 * without a grace, pods lost, workloads completed, deleted and scaled,
 * nodes cordoned and removed, terminations ending).  After the changes, and after each
 * cycle, the ledger is synced and compared field by field with a fresh
 * count, in every build (checking builds also compare inside each cycle).
 * The views the snapshot copies (the AI view and background totals) follow
 * workloads whose kind changes, and the journal's entries since a sync.
 * Each node's views carry a stamp, new whenever they change: the re-offer
 * asks whether a node's background pods fit only where the stamp moved, and
 * a snapshot vouches for no stamp of a node the journal touched since.
 *
 * Deterministic: the generator is a fixed xorshift.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "commit.h"
#include "cycle.h"
#include "cyclecache.h"
#include "ledger.h"
#include "lifecycle.h"
#include "plan.h"
#include "scenario.h"

static uint64_t rng = 88172645463325252ULL;
static unsigned roll(unsigned n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static long n_syncs, n_followed, n_applied, n_changes;
static unsigned long long n_views_kept, n_nodes_planned;

/* Is the kept ledger what counting every pod of st gives?  Says where not. */
static bool same_as_counted(const us_ledger *l, const us_state *st, const char *where) {
    char broken[512] = "";
    int rc = us_ledger_check(l, st, broken, sizeof broken);
    if (rc != 0) printf("  %s: %s\n", where, rc == -1 ? "out of memory" : broken);
    return rc == 0;
}

/* A live pod, or -1 (a few tries). */
static int some_pod(const us_state *st, us_pod_state want) {
    for (int k = 0; k < 20 && st->npods; k++) {
        int i = (int)roll((unsigned)st->npods);
        if (!st->pods[i].gone && st->pods[i].state == want) return i;
    }
    return -1;
}

static void change(us_state *st, double now) {
    int i, w = st->nworkloads ? (int)roll((unsigned)st->nworkloads) : -1;
    switch (roll(8)) {
    case 0:
    case 1:
        if ((i = some_pod(st, US_POD_RUNNING)) >= 0) CHECK(us_life_evict(st, i, now, roll(2)) != -1);
        break;
    case 2:
        if ((i = some_pod(st, roll(2) ? US_POD_RUNNING : US_POD_PIPELINED)) >= 0)
            CHECK(us_life_pod_lost(st, i, roll(2), now) == 0);
        break;
    case 3:
        if (w >= 0 && st->workloads[w].state == US_WL_ACTIVE) CHECK(us_life_complete(st, w, now) == 0);
        break;
    case 4:
        if (w >= 0 && st->workloads[w].state == US_WL_ACTIVE) CHECK(us_life_delete(st, w, now) == 0);
        break;
    case 5:
        if (w >= 0 && st->workloads[w].state == US_WL_ACTIVE &&
            st->workloads[w].controller != US_CTRL_DAEMONSET)
            CHECK(us_life_scale(st, w, (int)roll(6), now) == 0);
        break;
    case 6:
        if (st->nnodes) {
            int n = (int)roll((unsigned)st->nnodes);
            if (st->nodes[n].removed) break;
            if (roll(6) == 0) {  /* the nodes change: the ledger counts afresh */
                CHECK(us_life_remove_node(st, n, now) == 0);
            } else {
                st->nodes[n].unschedulable = !st->nodes[n].unschedulable;
                CHECK(us_life_node_changed(st, n, now) == 0);
            }
        }
        break;
    default:
        CHECK(us_life_expire(st, now) == 0);
        break;
    }
    n_changes++;
}

static void sync_and_compare(us_cycle_cache *cache, us_state *st, const char *where) {
    char broken[256] = "";
    CHECK(us_ledger_sync(&cache->ledger, st, broken, sizeof broken) == 0);
    n_syncs++;
    if (!cache->ledger.recounted) n_followed++;
    n_applied += (long)cache->ledger.applied;
    CHECK(st->njournal == 0);
    CHECK(same_as_counted(&cache->ledger, st, where));
}

static void one_scenario(const char *path) {
    us_scenario sc;
    us_err err = {0};
    us_cycle_cache *cache = us_cycle_cache_new();
    CHECK(cache != NULL);
    if (!cache || us_scenario_load_file(&sc, path, &err) < 0) {
        printf("  %s: %s\n", path, err.msg);
        CHECK(0);
        us_cycle_cache_free(cache);
        return;
    }
    us_state *st = &sc.state;
    us_cycle_opts o;
    us_cycle_profile prof = {0};
    us_cycle_opts_default(&o);
    o.cache = cache;
    o.check_invariants = true;
    o.profile = &prof;
    /* every workload of the timeline at once: more pods to change */
    bool any = false;
    CHECK(us_life_submit_due(st, 1e9, &any) == 0);
    for (int cycle = 0; cycle < 12; cycle++) {
        double now = 10.0 * cycle;
        us_cycle_log log;
        us_cycle_log_init(&log);
        /* now and then a cycle without the cache: it reads the journal
         * too, and the cache's ledger must not miss what it read */
        o.cache = cycle % 4 == 3 ? NULL : cache;
        prof.nodes_view_kept = 0;
        int rc = us_cycle_run(st, NULL, now, &o, &log, NULL, NULL, &err);
        us_cycle_log_free(&log);
        n_views_kept += prof.nodes_view_kept;
        for (size_t n = 0; n < st->nnodes; n++) n_nodes_planned += !st->nodes[n].removed;
        if (rc < 0) printf("  %s cycle %d: %s\n", path, cycle, err.msg);
        CHECK(rc == 0);
        if (rc < 0) break;
        /* after a cycle: its own changes are in the node counts already */
        sync_and_compare(cache, st, path);
        for (unsigned k = 2 + roll(8); k > 0; k--) change(st, now + 5);
        sync_and_compare(cache, st, path);
    }
    us_scenario_free(&sc);
    us_cycle_cache_free(cache);
}

TEST(ledger_follows_the_journal_to_a_fresh_count) {
    DIR *d = opendir("examples");
    CHECK(d != NULL);
    if (!d) return;
    struct dirent *e;
    char path[512];
    int n = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        snprintf(path, sizeof path, "examples/%s", e->d_name);
        one_scenario(path);
        n++;
    }
    closedir(d);
    printf("ledger: %d scenarios, %ld syncs, %ld followed the journal (%ld entries), %ld changes; "
           "snapshots copied the views of %llu of %llu nodes\n",
           n, n_syncs, n_followed, n_applied, n_changes, n_views_kept, n_nodes_planned);
    CHECK(n >= 10);
    /* the ledger must follow, not count afresh every time: only the first
     * sync of each scenario, and those after a change it cannot follow
     * (a node removed or renumbered), count afresh */
    CHECK(n_followed > n_syncs / 2);
    CHECK(n_followed < n_syncs);  /* and the nodes changed now and then */
    CHECK(n_applied > 100);
    /* the snapshots take the kept views (checking builds compare them
     * with the pods inside each cycle), except after changes the ledger
     * counts afresh for, and in the cycles run without the cache */
    CHECK(n_views_kept > n_nodes_planned / 3 && n_views_kept < n_nodes_planned);
}

/* ---- the views (AI view, background totals) ---------------------------- */

/* seed-story with every workload submitted, after a cycle (pods run), and
 * l synced with it */
static bool story_after_a_cycle(us_scenario *sc, us_ledger *l) {
    us_err err = {0};
    char broken[256];
    bool any;
    if (us_scenario_load_file(sc, "examples/seed-story.json", &err) < 0) return false;
    us_state *st = &sc->state;
    us_cycle_opts o;
    us_cycle_opts_default(&o);
    us_cycle_log log;
    us_cycle_log_init(&log);
    bool ok = us_life_submit_due(st, 1e9, &any) == 0 &&
              us_cycle_run(st, NULL, 0, &o, &log, NULL, NULL, &err) == 0 &&
              us_ledger_sync(l, st, broken, sizeof broken) == 0;
    us_cycle_log_free(&log);
    return ok;
}

/* A workload of that kind holding pods, or -1. */
static int holding_workload(const us_state *st, const us_ledger *l, uint8_t kind) {
    for (size_t w = 0; w < st->nworkloads; w++)
        if (us_view_kind(&st->workloads[w]) == kind && l->holding[w] > 0) return (int)w;
    return -1;
}

/* Pods move from one view to the other when their workload's kind
 * changes, which no pod's journal entry says: a background workload found
 * to break a rule holds its room in the AI view from then on.  Its pods
 * are not in the journal, so the sync counts afresh; when they are all in
 * it (a workload completed), it follows. */
TEST(views_follow_workloads_whose_kind_changes) {
    us_scenario sc;
    us_ledger l = {0};
    char broken[256];
    CHECK(story_after_a_cycle(&sc, &l));
    us_state *st = &sc.state;
    int bg = holding_workload(st, &l, US_VIEW_BG);
    CHECK(bg >= 0);
    if (bg >= 0) {
        us_res before = {{0}};
        for (size_t n = 0; n < st->nnodes; n++) before = us_res_add(before, l.bg[n].whole);
        CHECK(before.v[US_CPU] > 0);
        st->workloads[bg].blocked = "broken for the test";  /* as us_state_check_rules sets it */
        CHECK(us_ledger_sync(&l, st, broken, sizeof broken) == 0);
        CHECK(l.recounted);
        CHECK(same_as_counted(&l, st, "background workload blocked"));
        us_res after = {{0}};
        for (size_t n = 0; n < st->nnodes; n++) after = us_res_add(after, l.bg[n].whole);
        CHECK(after.v[US_CPU] < before.v[US_CPU]);  /* its pods left the totals */
        st->workloads[bg].blocked = NULL;
        CHECK(us_ledger_sync(&l, st, broken, sizeof broken) == 0);
        CHECK(l.recounted && same_as_counted(&l, st, "unblocked"));
    }
    int ai = holding_workload(st, &l, US_VIEW_AI);
    CHECK(ai >= 0);
    if (ai >= 0) {
        CHECK(us_life_complete(st, ai, 1) == 0);  /* every pod of it changes */
        CHECK(us_ledger_sync(&l, st, broken, sizeof broken) == 0);
        CHECK(!l.recounted && l.applied > 0);
        CHECK(same_as_counted(&l, st, "AI workload completed"));
    }
    us_ledger_free(&l);
    us_scenario_free(&sc);
}

/* The snapshot's copy of the views is brought up to date with the
 * journal's entries since the last sync (a cycle's own bindings and
 * evictions, for its later pools): it is what counting every pod gives,
 * and says it cannot tell once a kind changed since the sync. */
TEST(views_copied_with_the_journal_are_what_counting_gives) {
    us_scenario sc;
    us_ledger l = {0}, fresh = {0};
    CHECK(story_after_a_cycle(&sc, &l));
    us_state *st = &sc.state;
    size_t n = st->nnodes;
    int *nodes = calloc(n, sizeof *nodes), *pos = calloc(n, sizeof *pos);
    us_use *ai = calloc(n, sizeof *ai);
    us_bg_total *bg = calloc(n, sizeof *bg);
    CHECK(nodes && pos && ai && bg);
    /* the nodes backwards, and the first not listed */
    size_t listed = 0;
    for (size_t k = n; k-- > 1;) {
        pos[k] = (int)listed;
        nodes[listed++] = (int)k;
    }
    pos[0] = -1;
    int moved = 0;
    for (int k = 0; k < 6; k++) {
        int i = some_pod(st, US_POD_RUNNING);
        if (i >= 0 && us_life_evict(st, i, 2, k % 2) != -1) moved++;
    }
    CHECK(moved > 0 && st->njournal > 0);
    CHECK(us_ledger_views(&l, st, nodes, listed, pos, ai, bg, NULL, NULL) == 0);
    CHECK(us_ledger_take(&fresh, st) == 0);
    bool same = true, differs_from_kept = false;
    for (size_t k = 0; k < listed; k++) {
        same = same && us_use_equal(&ai[k], &fresh.ai[nodes[k]]) &&
               memcmp(&bg[k], &fresh.bg[nodes[k]], sizeof bg[k]) == 0;
        differs_from_kept = differs_from_kept || !us_use_equal(&l.ai[nodes[k]], &fresh.ai[nodes[k]]) ||
                            memcmp(&l.bg[nodes[k]], &fresh.bg[nodes[k]], sizeof bg[k]) != 0;
    }
    CHECK(same);
    CHECK(differs_from_kept);  /* the evictions changed something to patch */
    int w = holding_workload(st, &l, US_VIEW_BG);
    CHECK(w >= 0);
    if (w >= 0) {
        st->workloads[w].blocked = "broken for the test";
        CHECK(us_ledger_views(&l, st, nodes, listed, pos, ai, bg, NULL, NULL) == 1);
    }
    free(nodes);
    free(pos);
    free(ai);
    free(bg);
    us_ledger_free(&fresh);
    us_ledger_free(&l);
    us_scenario_free(&sc);
}

/* A state no ledger has counted keeps no journal (loading 1,000,000 pods
 * would otherwise journal each); once counted, every pod change is one
 * entry, however often the pod changes. */
TEST(journal_starts_with_the_first_count_and_keeps_one_entry_per_pod) {
    us_scenario sc;
    us_err err = {0};
    CHECK(us_scenario_load_file(&sc, "examples/seed-story.json", &err) == 0);
    us_state *st = &sc.state;
    CHECK(st->pods_version == 0 && st->njournal == 0);
    us_ledger l = {0};
    char broken[256];
    CHECK(us_ledger_sync(&l, st, broken, sizeof broken) == 0);
    CHECK(l.recounted && st->pods_version != 0);
    int i = some_pod(st, US_POD_RUNNING);
    CHECK(i >= 0);
    if (i >= 0) {
        us_pod_touch(st, &st->pods[i]);
        us_pod_touch(st, &st->pods[i]);
        CHECK(st->njournal == 1);
        CHECK(us_life_evict(st, i, 1, false) != -1);  /* touches it again, maybe adds a pod */
        CHECK(st->njournal <= 2);
        CHECK(us_ledger_sync(&l, st, broken, sizeof broken) == 0);
        CHECK(!l.recounted && l.applied >= 1 && st->njournal == 0);
        CHECK(same_as_counted(&l, st, "seed-story"));
    }
    us_ledger_free(&l);
    us_scenario_free(&sc);
}

/* n1 runs burn-0..3 once placed, n2 burn-4 and burn-5, n3 nothing (2 GPUs
 * each; a termination grace of 30 s) */
static const char verdicts_doc[] =
    "{\"name\": \"verdicts\", \"cycle_interval\": 10, \"horizon\": 100,"
    " \"nodes\": [{\"name\": \"n1\", \"cpu\": \"64\", \"memory\": \"512Gi\", \"gpu\": 8},"
    "             {\"name\": \"n2\", \"cpu\": \"64\", \"memory\": \"512Gi\", \"gpu\": 8},"
    "             {\"name\": \"n3\", \"cpu\": \"64\", \"memory\": \"512Gi\", \"gpu\": 8}],"
    " \"queues\": [{\"name\": \"bg\", \"resources\": {"
    "   \"gpu\": {\"quota\": 0, \"over_quota_weight\": 0, \"limit\": -1},"
    "   \"cpu\": {\"quota\": 0, \"over_quota_weight\": 0, \"limit\": -1},"
    "   \"memory\": {\"quota\": 0, \"over_quota_weight\": 0, \"limit\": -1}}}],"
    " \"workloads\": [{\"name\": \"burn\", \"queue\": \"bg\", \"controller\": \"deployment\","
    "   \"labels\": {\"kai.scheduler/background\": \"true\"}, \"replicas\": 6,"
    "   \"termination_grace\": 30, \"requests\": {\"gpu\": 2}}]}";

/* verdicts_doc loaded into *sc, its workload submitted, with a new cycle
 * cache in *cache; false (nothing to free) when either fails. */
static bool verdicts_loaded(us_scenario *sc, us_cycle_cache **cache) {
    us_err err = {0};
    bool any = false;
    *cache = us_cycle_cache_new();
    CHECK(*cache != NULL);
    if (!*cache) return false;
    if (us_scenario_load_string(sc, verdicts_doc, sizeof verdicts_doc - 1, "verdicts", &err) < 0) {
        printf("  %s\n", err.msg);
        CHECK(0);
        us_cycle_cache_free(*cache);
        return false;
    }
    CHECK(us_life_submit_due(&sc->state, 0, &any) == 0);
    return true;
}

/* A snapshot copies a node's views from the ledger, and the re-offer asks
 * whether its running background pods still fit beside its AI view, only
 * where the node's views changed since (the ledger's stamps): n1 runs burn-0..3, n2 burn-4 and burn-5
 * (2 GPUs each), n3 nothing.  The cycle after they were placed asks both
 * nodes; a quiet one asks none and keeps both verdicts; after burn-4 is
 * evicted (its room changes n2's total) it asks n2 alone, and again after
 * its new incarnation is placed there; after a node changes (n3 cordoned:
 * a verdict holds for the nodes' capacities as they were) it asks both
 * (and copies none: their views are the same), and after the ledger counted
 * every pod again (a journal entry lost) it copies all three and asks both.
 * Checking builds check each verdict kept (invariant "reoffer-verdicts"). */
TEST(views_copied_and_fits_asked_only_where_the_views_changed) {
    us_scenario sc;
    us_err err = {0};
    us_cycle_cache *cache = NULL;
    if (!verdicts_loaded(&sc, &cache)) return;
    us_state *st = &sc.state;
    us_cycle_opts o;
    us_cycle_profile prof = {0};
    us_cycle_opts_default(&o);
    o.cache = cache;
    o.check_invariants = true;
    o.profile = &prof;
    /* nodes the cycle at now asked, and nodes whose verdict it kept; nodes
     * whose views its snapshot copied from the ledger (the others' were in
     * the pool's kept arrays already, with the same stamp) */
    unsigned long long asked[2], copied = 0;
#define CYCLE(now)                                                                    \
    do {                                                                              \
        us_cycle_log log;                                                             \
        us_cycle_log_init(&log);                                                      \
        prof.nodes_fit_asked = prof.nodes_fit_kept = prof.nodes_view_copied = 0;      \
        int rc_ = us_cycle_run(st, NULL, (now), &o, &log, NULL, NULL, &err);          \
        if (rc_ < 0) printf("  cycle at %g: %s\n", (double)(now), err.msg);          \
        CHECK(rc_ == 0);                                                              \
        us_cycle_log_free(&log);                                                      \
        asked[0] = prof.nodes_fit_asked;                                              \
        asked[1] = prof.nodes_fit_kept;                                               \
        copied = prof.nodes_view_copied;                                              \
    } while (0)
    CYCLE(0);  /* places the six: no node had any yet */
    CHECK(asked[0] == 0 && asked[1] == 0 && copied == 3);
    int burn4 = -1;
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *pd = &st->pods[i];
        if (pd->gone || pd->state != US_POD_RUNNING) continue;
        CHECK(strcmp(st->nodes[pd->node].name, pd->name[5] < '4' ? "n1" : "n2") == 0);
        if (strcmp(pd->name, "burn-4") == 0) burn4 = (int)i;
    }
    CYCLE(10);
    CHECK(asked[0] == 2 && asked[1] == 0 && copied == 2);
    CYCLE(20);
    CHECK(asked[0] == 0 && asked[1] == 2 && copied == 0);
    CHECK(burn4 >= 0);
    if (burn4 >= 0) CHECK(us_life_evict(st, burn4, 25, true) != -1);
    CYCLE(30);  /* burn-4 again, in n2's idle room */
    CHECK(asked[0] == 1 && asked[1] == 1 && copied == 1);
    size_t on_n2 = 0;
    for (size_t i = 0; i < st->npods; i++)
        on_n2 += !st->pods[i].gone && st->pods[i].state == US_POD_RUNNING && st->pods[i].node == 1;
    CHECK(on_n2 == 2);
    CYCLE(40);  /* its placement changed n2's views */
    CHECK(asked[0] == 1 && asked[1] == 1 && copied == 1);
    CYCLE(45);
    CHECK(asked[0] == 0 && asked[1] == 2 && copied == 0);
    st->nodes[2].unschedulable = true;
    CHECK(us_life_node_changed(st, 2, 47) == 0);
    CYCLE(50);  /* the views are the same: none copied */
    CHECK(asked[0] == 2 && asked[1] == 0 && copied == 0);
    CYCLE(60);
    CHECK(asked[0] == 0 && asked[1] == 2 && copied == 0);
    /* a journal entry lost: the ledger counts every pod again and stamps
     * every node anew, so no verdict is kept */
    st->journal_lost = true;
    CYCLE(70);
    CHECK(asked[0] == 2 && asked[1] == 0 && copied == 3);
    CYCLE(80);
    CHECK(asked[0] == 0 && asked[1] == 2 && copied == 0);
#undef CYCLE
    us_scenario_free(&sc);
    us_cycle_cache_free(cache);
}

/* A snapshot's views carry the ledger's stamps only where they are the
 * ledger's as synced: a node a journal entry since the sync touched (a pod
 * evicted after the cycle started, as an earlier pool's commit does) has
 * none, so no verdict is kept for it by a stamp its views no longer match. */
TEST(snapshot_stamps_leave_out_nodes_the_journal_touched) {
    us_scenario sc;
    us_err err = {0};
    us_cycle_cache *cache = NULL;
    if (!verdicts_loaded(&sc, &cache)) return;
    us_state *st = &sc.state;
    us_cycle_opts o;
    us_cycle_opts_default(&o);
    o.cache = cache;
    for (int c = 0; c < 2; c++) {
        us_cycle_log log;
        us_cycle_log_init(&log);
        CHECK(us_cycle_run(st, NULL, 10.0 * c, &o, &log, NULL, NULL, &err) == 0);
        us_cycle_log_free(&log);
    }
    int burn4 = -1;
    for (size_t i = 0; i < st->npods; i++)
        if (!st->pods[i].gone && st->pods[i].state == US_POD_RUNNING && strcmp(st->pods[i].name, "burn-4") == 0)
            burn4 = (int)i;
    CHECK(burn4 >= 0 && st->pods[burn4].node == 1);
    if (burn4 < 0) goto out;
    us_cycle_log log;
    us_cycle_log_init(&log);
    us_phys ph;
    CHECK(us_commit_cycle_start(st, 20, &o, &log, &ph, &err) == 0);
    CHECK(us_life_evict(st, burn4, 20, true) != -1);  /* after the sync: in the journal */
    us_plan p;
    CHECK(us_plan_snapshot(&p, st, "default", 20, NULL, &o, &log, NULL) == 0);
    CHECK(p.ai_held != NULL && p.nnodes == 3);
    if (p.ai_held && p.nnodes == 3) {
        /* positions follow the names: n1, n2, n3 */
        CHECK(us_plan_view_stamp(&p, 0) == cache->ledger.stamp[0] && us_plan_view_stamp(&p, 0) != 0);
        CHECK(us_plan_view_stamp(&p, 1) == 0);
        CHECK(us_plan_view_stamp(&p, 2) == cache->ledger.stamp[2] && us_plan_view_stamp(&p, 2) != 0);
    }
    us_plan_free(&p);
    us_ledger_settle(&cache->ledger, st, ph.use, ph.waiting);
    us_cycle_log_free(&log);
out:
    us_scenario_free(&sc);
    us_cycle_cache_free(cache);
}

int main(void) {
    RUN(journal_starts_with_the_first_count_and_keeps_one_entry_per_pod);
    RUN(ledger_follows_the_journal_to_a_fresh_count);
    RUN(views_follow_workloads_whose_kind_changes);
    RUN(views_copied_with_the_journal_are_what_counting_gives);
    RUN(views_copied_and_fits_asked_only_where_the_views_changed);
    RUN(snapshot_stamps_leave_out_nodes_the_journal_touched);
    return check_report();
}
