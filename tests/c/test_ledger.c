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
 *
 * Deterministic: the generator is a fixed xorshift.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cycle.h"
#include "cyclecache.h"
#include "ledger.h"
#include "lifecycle.h"
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
    CHECK(us_ledger_views(&l, st, nodes, listed, pos, ai, bg) == 0);
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
        CHECK(us_ledger_views(&l, st, nodes, listed, pos, ai, bg) == 1);
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

int main(void) {
    RUN(journal_starts_with_the_first_count_and_keeps_one_entry_per_pod);
    RUN(ledger_follows_the_journal_to_a_fresh_count);
    RUN(views_follow_workloads_whose_kind_changes);
    RUN(views_copied_with_the_journal_are_what_counting_gives);
    return check_report();
}
