/*
 * test_policydir.c — serve/policydir.c without a cluster: a policy
 * directory laid out as the kubelet lays out a ConfigMap volume (files are
 * symlinks into ..data, a symlink to a timestamped directory; an update
 * renames a new ..data_tmp over ..data), watched on a libuv loop.  A
 * broken update is refused and counted, the policies in force stay; a
 * good one is swapped in, counted, and its id shown; sv_policydir_now says
 * why it refused, naming file and line.  The loop runs until the metric
 * moves (a 30 s bound guards against a hang, it is not a timing check).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "monitor.h"
#include "policydir.h"
#include "understory.h"

static char root[256];
static int n_pub;

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The atomic writer's update: placement.lua (and the default others) in a
 * new timestamped directory, ..data swapped to it by a rename. */
static void publish(const char *placement) {
    char ts[64], dir[512], path[600], tmp[600], data[600];
    snprintf(ts, sizeof ts, "..2026_12_01_00_00_%02d.%09d", n_pub, n_pub);
    n_pub++;
    snprintf(dir, sizeof dir, "%s/%s", root, ts);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/placement.lua", dir);
    write_file(path, placement);
    snprintf(tmp, sizeof tmp, "%s/..data_tmp", root);
    snprintf(data, sizeof data, "%s/..data", root);
    if (symlink(ts, tmp) != 0 || rename(tmp, data) != 0) perror("publish");
    snprintf(path, sizeof path, "%s/placement.lua", root);
    if (access(path, F_OK) != 0 && symlink("..data/placement.lua", path) != 0) perror("publish link");
}

static const char *GOOD_A = "local M = {}\nfunction M.score(pod, node) return node.free.gpu end\nreturn M\n";
static const char *GOOD_B = "local M = {}\nfunction M.score(pod, node) return -node.free.gpu end\nreturn M\n";
static const char *BROKEN = "local M = {}\nfunction M.score(pod, node)\n  return 1 +\nend\nreturn M\n";

typedef struct wait_for {
    sv_monitor *m;
    const char *want; /* a line /metrics must hold */
    int ticks;
} wait_for;

static void poll_metrics(uv_timer_t *t) {
    wait_for *w = t->data;
    size_t len;
    char *text = sv_monitor_render(w->m, &len);
    bool there = text && strstr(text, w->want);
    free(text);
    if (there || ++w->ticks > 600) uv_stop(t->loop); /* 600 x 50 ms: a hang guard */
}

/* Run the loop until /metrics holds want; false when it never does. */
static bool run_until(uv_loop_t *loop, sv_monitor *m, const char *want) {
    uv_timer_t t;
    wait_for w = {m, want, 0};
    uv_timer_init(loop, &t);
    t.data = &w;
    uv_timer_start(&t, poll_metrics, 50, 50);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    size_t len;
    char *text = sv_monitor_render(m, &len);
    bool there = text && strstr(text, want);
    if (!there) fprintf(stderr, "  /metrics never held %s:\n%s\n", want, text ? text : "(null)");
    free(text);
    return there;
}

TEST(configmap_swaps_are_reloaded_or_refused) {
    uv_loop_t loop;
    char err[256], want[256], msg[1100];
    us_engine *e;
    us_error ue;
    snprintf(root, sizeof root, "%s/understory-policydir.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECK(mkdtemp(root) != NULL);
    publish(GOOD_A);
    uv_loop_init(&loop);
    sv_monitor *m = sv_monitor_start(&loop, "127.0.0.1:0", err, sizeof err);
    CHECK(m != NULL && us_engine_create(NULL, &e, &ue) == US_OK);
    if (!m) return;
    CHECK(us_engine_load_policies(e, root, &ue) == US_OK);
    char id_a[64];
    snprintf(id_a, sizeof id_a, "%s", us_engine_policy_id(e));
    sv_policydir *r = sv_policydir_start(&loop, e, root, m, err, sizeof err);
    CHECK(r != NULL);
    if (!r) return;
    snprintf(want, sizeof want, "understory_policy_info{policy_id=\"%s\"} 1\n", id_a);
    CHECK(run_until(&loop, m, want));

    publish(BROKEN); /* refused: A stays */
    CHECK(run_until(&loop, m, "understory_policy_reloads_total{result=\"refused\"} 1\n"));
    CHECK_STR(us_engine_policy_id(e), id_a);
    CHECK(run_until(&loop, m, want));

    publish(GOOD_B); /* swapped in */
    CHECK(run_until(&loop, m, "understory_policy_reloads_total{result=\"ok\"} 1\n"));
    CHECK(strcmp(us_engine_policy_id(e), id_a) != 0);
    snprintf(want, sizeof want, "understory_policy_info{policy_id=\"%s\"} 1\n", us_engine_policy_id(e));
    CHECK(run_until(&loop, m, want));

    /* the same path by hand: the broken one names file and line */
    publish(BROKEN);
    CHECK(run_until(&loop, m, "understory_policy_reloads_total{result=\"refused\"} 2\n"));
    CHECK(sv_policydir_now(r, "test", msg, sizeof msg) == -1);
    CHECK_HAS(msg, "placement.lua:4:");
    CHECK(run_until(&loop, m, "understory_policy_reloads_total{result=\"refused\"} 3\n"));
    publish(GOOD_A);
    CHECK(run_until(&loop, m, "understory_policy_reloads_total{result=\"ok\"} 2\n"));
    CHECK(sv_policydir_now(r, "test", msg, sizeof msg) == 0);
    CHECK_STR(msg, id_a);

    sv_monitor_close(m);
    sv_policydir_close(r);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
    us_engine_destroy(e);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
}

/* Without a directory: nothing watched, and a reload says so. */
TEST(no_directory) {
    uv_loop_t loop;
    char err[256], msg[1100];
    us_engine *e;
    us_error ue;
    uv_loop_init(&loop);
    sv_monitor *m = sv_monitor_start(&loop, "127.0.0.1:0", err, sizeof err);
    CHECK(m != NULL && us_engine_create(NULL, &e, &ue) == US_OK);
    if (!m) return;
    sv_policydir *r = sv_policydir_start(&loop, e, NULL, m, err, sizeof err);
    CHECK(r != NULL);
    CHECK(sv_policydir_now(r, "test", msg, sizeof msg) == -1);
    CHECK_HAS(msg, "without --policies");
    size_t len;
    char *text = sv_monitor_render(m, &len);
    CHECK_HAS(text, "understory_policy_info{policy_id=\"builtin\"} 1\n");
    CHECK(text && !strstr(text, "understory_policy_reloads_total{"));
    free(text);
    /* a directory that cannot be watched is refused, naming it */
    CHECK(sv_policydir_start(&loop, e, "/nonexistent/policies", m, err, sizeof err) == NULL);
    CHECK_HAS(err, "--policies /nonexistent/policies: cannot watch it");
    sv_monitor_close(m);
    sv_policydir_close(r);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
    us_engine_destroy(e);
}

int main(void) {
    RUN(configmap_swaps_are_reloaded_or_refused);
    RUN(no_directory);
    return check_report();
}
