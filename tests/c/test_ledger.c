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
    us_cycle_opts_default(&o);
    o.cache = cache;
    o.check_invariants = true;
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
        int rc = us_cycle_run(st, NULL, now, &o, &log, NULL, NULL, &err);
        us_cycle_log_free(&log);
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
    printf("ledger: %d scenarios, %ld syncs, %ld followed the journal (%ld entries), %ld changes\n",
           n, n_syncs, n_followed, n_applied, n_changes);
    CHECK(n >= 10);
    /* the ledger must follow, not count afresh every time: only the first
     * sync of each scenario, and those after a change it cannot follow
     * (a node removed or renumbered), count afresh */
    CHECK(n_followed > n_syncs / 2);
    CHECK(n_followed < n_syncs);  /* and the nodes changed now and then */
    CHECK(n_applied > 100);
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
    return check_report();
}
