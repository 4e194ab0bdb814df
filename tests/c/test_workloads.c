/*
 * test_workloads.c — serve's mapping of the cluster's pods to the engine's
 * workloads (serve/workloads.c) with a real engine: objects as the
 * informers deliver them (JSON of the API), syncs, and what the engine
 * then holds and decides.  A workload that does not map is left out alone;
 * a sync maps only the workloads an event touched; a DaemonSet's pending
 * pod binds on the node its affinity names; a pod being deleted is
 * releasing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "check.h"
#include "objects.h"
#include "understory.h"
#include "workloads.h"
#include "writes.h"

static cJSON *J(const char *text) {
    char buf[4096];
    size_t n = strlen(text);
    if (n >= sizeof buf) return NULL;
    for (size_t i = 0; i <= n; i++) buf[i] = text[i] == '\'' ? '"' : text[i];
    return cJSON_Parse(buf);
}

/* The event of object text (in ' form) fed to w, and to the engine for a
 * node (as serve's node informer does). */
static void feed(us_engine *e, sv_workloads *w, sv_kind kind, sv_event ev, const char *text) {
    cJSON *o = J(text);
    CHECK(o != NULL);
    if (!o) return;
    if (kind == SV_NODES) {
        cJSON *n = NULL;
        us_err kerr = {0};
        us_error err;
        CHECK(kube_node(o, "node", &n, &kerr) == 0);
        char *s = cJSON_PrintUnformatted(n);
        CHECK(s && us_engine_upsert_node_json(e, s, &err) == US_OK);
        free(s);
        cJSON_Delete(n);
    }
    CHECK(sv_workloads_event(w, kind, ev, o) == 0);
    cJSON_Delete(o);
}

#define NODE(name, pool)                                                                             \
    "{'metadata':{'name':'" name "','labels':{'kai.scheduler/node-pool':'" pool "'}},"              \
    "'status':{'allocatable':{'cpu':'8','memory':'64Gi','nvidia.com/gpu':'8'},"                     \
    "'conditions':[{'type':'Ready','status':'True'}]}}"
#define POD(name, extra_meta, extra_spec)                                                            \
    "{'metadata':{'name':'" name "','namespace':'t','creationTimestamp':'2026-12-01T00:00:00Z'" extra_meta "}," \
    "'spec':{'schedulerName':'understory'" extra_spec ",'containers':[{'name':'c','resources':{'requests':" \
    "{'nvidia.com/gpu':'1'}}}]}}"

static us_engine *setup_with(sv_workloads **w, const us_engine_options *o) {
    us_engine *e = NULL;
    us_error err;
    if (us_engine_create(o, &e, &err) != US_OK) return NULL;
    us_queue_spec q;
    us_queue_spec_init(&q);
    q.name = "q";
    q.quota.gpu = 16;
    CHECK(us_engine_upsert_queue(e, &q, &err) == US_OK);
    *w = sv_workloads_new(e, "understory", 1);
    CHECK(*w != NULL);
    feed(e, *w, SV_NODES, SV_ADDED, NODE("n1", "default"));
    feed(e, *w, SV_NODES, SV_ADDED, NODE("n2", "default"));
    feed(e, *w, SV_NAMESPACES, SV_ADDED, "{'metadata':{'name':'t','labels':{'kai.scheduler/queue':'q'}}}");
    return e;
}

static us_engine *setup(sv_workloads **w) { return setup_with(w, NULL); }

static int count_workloads(const us_engine *e, const char *name) {
    int n = 0;
    for (size_t i = 0; i < us_engine_workload_count(e); i++) {
        us_workload_info x;
        if (us_engine_workload(e, i, &x) == US_OK && !strcmp(x.name, name) && x.phase == US_WORKLOAD_ACTIVE) n++;
    }
    return n;
}

static const us_pod_info *pod_named(const us_engine *e, const char *name, us_pod_info *out) {
    for (size_t i = 0; i < us_engine_pod_count(e); i++)
        if (us_engine_pod(e, i, out) == US_OK && !strcmp(out->name, name)) return out;
    return NULL;
}

/* What f wrote on stderr while it ran, into buf. */
static void stderr_of(void (*f)(void *), void *arg, char *buf, size_t len) {
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    buf[0] = 0;
    if (!tmp || saved < 0 || dup2(fileno(tmp), 2) < 0) {
        if (tmp) fclose(tmp);
        f(arg);
        return;
    }
    f(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, len - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
}

static double sync_at;
static void sync_now(void *w) { CHECK(sv_workloads_sync(w, sync_at) == 0); }

TEST(an_unmappable_workload_is_left_out_alone) {
    sv_workloads *w;
    us_engine *e = setup(&w);
    char log[4096];
    feed(e, w, SV_PODS, SV_ADDED, POD("good", "", ""));
    /* a required pod anti-affinity: the engine has no such filter */
    feed(e, w, SV_PODS, SV_ADDED,
         POD("bad", "", ",'affinity':{'podAntiAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':[]}}"));
    sync_at = 10;
    stderr_of(sync_now, w, log, sizeof log);
    CHECK_HAS(log, "workload t/bad left out: pod.spec.affinity.podAntiAffinity."
                   "requiredDuringSchedulingIgnoredDuringExecution (Pod \"t/bad\"): cannot be mapped");
    CHECK(count_workloads(e, "t/good") == 1);
    CHECK(count_workloads(e, "t/bad") == 0);
    us_error err;
    CHECK(us_engine_run_cycle(e, 10, &err) == US_OK);
    us_pod_info p;
    CHECK(pod_named(e, "t/good", &p) && p.phase == US_PHASE_RUNNING);
    CHECK(sv_workloads_is_pending(w, "t/good")); /* until the bind is assumed */
    /* fixed: it joins */
    feed(e, w, SV_PODS, SV_MODIFIED, POD("bad", "", ""));
    CHECK(sv_workloads_sync(w, 11) == 0);
    CHECK(count_workloads(e, "t/bad") == 1);
    /* broken again (a PodGroup it names is missing): out again, the rest stays */
    feed(e, w, SV_PODS, SV_MODIFIED, POD("bad", ",'annotations':{'pod-group-name':'pg'}", ""));
    sync_at = 11;
    stderr_of(sync_now, w, log, sizeof log);
    CHECK_HAS(log, "workload t/pg left out: pod.metadata.annotations.pod-group-name (Pod \"t/bad\"): "
                   "PodGroup \"t/pg\" is not in the input");
    CHECK(count_workloads(e, "t/bad") == 0);
    CHECK(count_workloads(e, "t/pg") == 0);
    CHECK(count_workloads(e, "t/good") == 1);
    feed(e, w, SV_PODGROUPS, SV_ADDED, "{'metadata':{'name':'pg','namespace':'t'},'spec':{'minMember':1}}");
    CHECK(sv_workloads_sync(w, 12) == 0);
    CHECK(count_workloads(e, "t/pg") == 1);
    sv_workloads_free(w);
    us_engine_destroy(e);
}

TEST(a_sync_maps_only_what_changed) {
    sv_workloads *w;
    us_engine *e = setup(&w);
    char name[32], text[1024];
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof name, "p%02d", i);
        snprintf(text, sizeof text, POD("%s", "", ""), name);
        feed(e, w, SV_PODS, SV_ADDED, text);
    }
    CHECK(sv_workloads_sync(w, 1) == 0);
    CHECK(sv_workloads_mapped(w) == 20);
    CHECK(us_engine_workload_count(e) == 20);
    CHECK(sv_workloads_sync(w, 2) == 0); /* nothing changed */
    CHECK(sv_workloads_mapped(w) == 20);
    /* one pod changes: one workload mapped */
    feed(e, w, SV_PODS, SV_MODIFIED, POD("p07", ",'labels':{'x':'y'}", ""));
    CHECK(sv_workloads_sync(w, 3) == 0);
    CHECK(sv_workloads_mapped(w) == 21);
    /* one goes: one mapped, and it is gone from the engine */
    feed(e, w, SV_PODS, SV_DELETED, POD("p08", "", ""));
    CHECK(sv_workloads_sync(w, 4) == 0);
    CHECK(sv_workloads_mapped(w) == 22);
    CHECK(count_workloads(e, "t/p08") == 0);
    CHECK(count_workloads(e, "t/p09") == 1);
    /* a node's status (same pool): nothing; a new node: everything */
    feed(e, w, SV_NODES, SV_MODIFIED, NODE("n1", "default"));
    CHECK(sv_workloads_sync(w, 5) == 0);
    CHECK(sv_workloads_mapped(w) == 22);
    feed(e, w, SV_NODES, SV_ADDED, NODE("n3", "default"));
    CHECK(sv_workloads_sync(w, 6) == 0);
    CHECK(sv_workloads_mapped(w) == 22 + 19);
    /* the namespace's queue label: the workloads of that namespace */
    feed(e, w, SV_NAMESPACES, SV_MODIFIED, "{'metadata':{'name':'t','labels':{'kai.scheduler/queue':'q'}}}");
    CHECK(sv_workloads_sync(w, 7) == 0);
    CHECK(sv_workloads_mapped(w) == 22 + 19 + 19);
    CHECK(us_engine_workload_count(e) == 19);
    sv_workloads_free(w);
    us_engine_destroy(e);
}

#define DS_POD(name, node)                                                                           \
    POD(name, ",'ownerReferences':[{'kind':'DaemonSet','name':'agent','controller':true}]",          \
        ",'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':{"           \
        "'nodeSelectorTerms':[{'matchFields':[{'key':'metadata.name','operator':'In','values':['" node "']}]}]}}}")

TEST(a_daemonset_pod_binds_on_the_node_it_names) {
    sv_workloads *w;
    us_engine *e = setup(&w);
    us_error err;
    /* n1's pod first: an unpinned pod would take the engine's newest
     * pending pod, n2's */
    feed(e, w, SV_PODS, SV_ADDED, DS_POD("agent-aaaaa", "n1"));
    CHECK(sv_workloads_sync(w, 1) == 0);
    CHECK(us_engine_run_cycle(e, 1, &err) == US_OK);
    bool bound = false;
    for (size_t i = 0; i < us_engine_decision_count(e); i++) {
        us_decision_info d;
        CHECK(us_engine_decision(e, i, &d) == US_OK);
        if (strcmp(d.pod, "t/agent-aaaaa") != 0) continue;
        CHECK(d.op == US_DECISION_BIND);
        CHECK_STR(d.node, "n1");
        bound = true;
    }
    CHECK(bound);
    sv_workloads_free(w);
    us_engine_destroy(e);
}

TEST(a_pod_being_deleted_is_releasing_until_gone) {
    sv_workloads *w;
    us_engine *e = setup(&w);
    us_pod_info p;
    feed(e, w, SV_PODS, SV_ADDED,
         POD("web-1", ",'ownerReferences':[{'kind':'ReplicaSet','name':'web-abc','controller':true}]"
                      ",'labels':{'pod-template-hash':'abc'}", ",'nodeName':'n1'"));
    CHECK(sv_workloads_sync(w, 1) == 0);
    CHECK(pod_named(e, "t/web-1", &p) && p.phase == US_PHASE_RUNNING);
    feed(e, w, SV_PODS, SV_MODIFIED,
         POD("web-1", ",'ownerReferences':[{'kind':'ReplicaSet','name':'web-abc','controller':true}]"
                      ",'labels':{'pod-template-hash':'abc'},'deletionTimestamp':'2026-12-01T00:01:00Z'",
             ",'nodeName':'n1'"));
    /* the Deployment's replacement, pending */
    feed(e, w, SV_PODS, SV_ADDED,
         POD("web-2", ",'ownerReferences':[{'kind':'ReplicaSet','name':'web-abc','controller':true}]"
                      ",'labels':{'pod-template-hash':'abc'}", ""));
    CHECK(sv_workloads_sync(w, 2) == 0);
    CHECK(pod_named(e, "t/web-1", &p) && p.phase == US_PHASE_RELEASING);
    CHECK_STR(p.node, "n1");
    CHECK(pod_named(e, "t/web-2", &p) && p.phase == US_PHASE_PENDING);
    CHECK(sv_workloads_is_pending(w, "t/web-2"));
    CHECK(!sv_workloads_is_pending(w, "t/web-1"));
    /* gone */
    feed(e, w, SV_PODS, SV_DELETED, POD("web-1", "", ""));
    CHECK(sv_workloads_sync(w, 3) == 0);
    CHECK(!pod_named(e, "t/web-1", &p));
    CHECK(pod_named(e, "t/web-2", &p) && p.phase == US_PHASE_PENDING);
    sv_workloads_free(w);
    us_engine_destroy(e);
}

/* What f wrote on stdout while it ran, into buf. */
static void stdout_of(void (*f)(void *), void *arg, char *buf, size_t len) {
    fflush(stdout);
    FILE *tmp = tmpfile();
    int saved = dup(1);
    buf[0] = 0;
    if (!tmp || saved < 0 || dup2(fileno(tmp), 1) < 0) {
        if (tmp) fclose(tmp);
        f(arg);
        return;
    }
    f(arg);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, len - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
}

static void apply_now(void *x) { sv_writes_apply(x, 0); }

/* A pod bound by us that the watch has not shown bound yet runs: evicted,
 * it is deleted (a dry run says so), though the cache shows it without a
 * node, as it shows a pipelined pod that was never bound (whose eviction
 * only withdraws its nomination).  Taking the one for the other left a
 * burn-in pod running that the engine held as terminating for good, and
 * the AI pod pipelined behind it waited forever (make bench-kube). */
TEST(an_evicted_pod_bound_but_not_seen_bound_is_deleted) {
    sv_workloads *w;
    us_engine_options o;
    us_engine_options_init(&o);
    o.reported_pods = 1;
    us_engine *e = setup_with(&w, &o);
    sv_writes *x = sv_writes_new(NULL, e, w, true);
    CHECK(x != NULL);
    us_error err;
    char out[8192];
    feed(e, w, SV_PODGROUPS, SV_ADDED, "{'metadata':{'name':'pg','namespace':'t'},'spec':{'minMember':2}}");
    feed(e, w, SV_PODS, SV_ADDED, POD("a", ",'uid':'ua','annotations':{'pod-group-name':'pg'}", ""));
    feed(e, w, SV_PODS, SV_ADDED, POD("b", ",'uid':'ub','annotations':{'pod-group-name':'pg'}", ""));
    CHECK(sv_workloads_sync(w, 10) == 0);
    CHECK(us_engine_run_cycle(e, 10, &err) == US_OK);
    CHECK(us_engine_decision_count(e) == 2);
    stdout_of(apply_now, x, out, sizeof out);
    CHECK_HAS(out, "bind t/a -> ");
    CHECK_HAS(out, "bind t/b -> ");
    /* the binds are in flight: not pending any more, not yet seen bound */
    CHECK(sv_workloads_assume(w, "t/a", 10) == 0 && sv_workloads_assume(w, "t/b", 10) == 0);
    /* the gang grows past what runs: it is stopped whole */
    feed(e, w, SV_PODGROUPS, SV_MODIFIED, "{'metadata':{'name':'pg','namespace':'t'},'spec':{'minMember':3}}");
    CHECK(sv_workloads_sync(w, 11) == 0);
    CHECK(us_engine_run_cycle(e, 11, &err) == US_OK);
    stdout_of(apply_now, x, out, sizeof out);
    CHECK_HAS(out, "evict t/a from ");
    CHECK_HAS(out, "evict t/b from ");
    CHECK(strstr(out, "withdraw nomination") == NULL);
    sv_writes_free(x);
    sv_workloads_free(w);
    us_engine_destroy(e);
}

/* Pod "pod<i>" of Job "job<owner>" as the API shows it, bound to node
 * n<node+1> (node -1: unbound), being deleted when terminating; a tenth of
 * a core each, so any node has room for all of them (' for "). */
static void churn_pod(char *buf, size_t len, int i, int owner, int node, bool terminating) {
    char spec[32] = "";
    if (node >= 0) snprintf(spec, sizeof spec, ",'nodeName':'n%d'", node + 1);
    snprintf(buf, len,
             "{'metadata':{'name':'pod%02d','namespace':'t','creationTimestamp':'2026-12-01T00:00:00Z'%s,"
             "'ownerReferences':[{'kind':'Job','name':'job%d','controller':true}]},"
             "'spec':{'schedulerName':'understory'%s,'containers':[{'name':'c','resources':{"
             "'requests':{'cpu':'10m'}}}]},'status':{'phase':'%s'}}",
             i, terminating ? ",'deletionTimestamp':'2026-12-01T00:00:10Z'" : "", owner, spec,
             node >= 0 ? "Running" : "Pending");
}

/* The index behind a sync (each workload's pods, each pod's workload, and
 * the nodes a workload's pods name, each once) against a plain model,
 * under random churn: pods of three Jobs come, go (some through a
 * deletion that takes a while), bind to nodes and change owner (an
 * adoption), in any order.  After every sync the engine holds exactly the
 * model's pods, grouped into workloads as the model groups them, each
 * bound pod on its own node, and a bound pod being deleted terminating
 * there. */
static bool churn(unsigned seed) {
    enum { PODS = 60, OWNERS = 3, NODES = 4, STEPS = 1500 };
    sv_workloads *w;
    us_engine *e = setup(&w);
    feed(e, w, SV_NODES, SV_ADDED, NODE("n3", "default"));
    feed(e, w, SV_NODES, SV_ADDED, NODE("n4", "default"));
    int owner[PODS], node[PODS]; /* owner -1: the pod is not in the cluster */
    bool term[PODS];             /* being deleted (deletionTimestamp) */
    for (int i = 0; i < PODS; i++) {
        owner[i] = node[i] = -1;
        term[i] = false;
    }
    unsigned x = seed;
    bool good = true, trace = getenv("CHURN_TRACE") && (unsigned)atoi(getenv("CHURN_TRACE")) == seed;
    char text[1024];
    for (int step = 0; step < STEPS && good; step++) {
        x = x * 1103515245u + 12345u;
        int i = (int)((x >> 8) % PODS), o = (int)((x >> 20) % OWNERS), n = (int)((x >> 24) % (NODES + 1)) - 1;
        unsigned what = (x >> 4) % 8;
        if (trace) /* CHURN_TRACE=<seed>: what each step finds and draws */
            fprintf(stderr, "step %d: pod%02d owner %d node %d deleting %d | draw %u owner %d node %d%s\n", step,
                    i, owner[i], node[i], term[i], what, o, n, (x >> 12) % 10 == 0 ? ", then a sync" : "");
        if (owner[i] >= 0 && (what < 2 || term[i])) { /* gone (a pod being deleted only goes) */
            churn_pod(text, sizeof text, i, owner[i], node[i], term[i]);
            feed(e, w, SV_PODS, SV_DELETED, text);
            owner[i] = node[i] = -1;
            term[i] = false;
        } else if (owner[i] >= 0 && what == 2) { /* being deleted */
            term[i] = true;
            churn_pod(text, sizeof text, i, owner[i], node[i], true);
            feed(e, w, SV_PODS, SV_MODIFIED, text);
        } else {
            /* new, or changed: adopted by another Job's controller, bound
             * (a pod bound stays on its node: Kubernetes never moves one) */
            if (owner[i] >= 0 && node[i] >= 0) n = node[i];
            churn_pod(text, sizeof text, i, o, n, false);
            feed(e, w, SV_PODS, owner[i] >= 0 ? SV_MODIFIED : SV_ADDED, text);
            owner[i] = o;
            node[i] = n;
        }
        if ((x >> 12) % 10 != 0) continue;
        CHECK(sv_workloads_sync(w, step) == 0);
        /* the engine's pods: the model's live ones, grouped as the model
         * groups them, each on its node; its terminating ones, the
         * model's bound pods being deleted, each on its node */
        const char *wl_of_owner[OWNERS] = {0};
        size_t want = 0, want_rel = 0, have = 0, have_rel = 0;
        int live_of[OWNERS] = {0}, dying_of[OWNERS] = {0};
        for (int k = 0; k < PODS; k++) {
            want += owner[k] >= 0 && !term[k];
            want_rel += owner[k] >= 0 && term[k] && node[k] >= 0;
            if (owner[k] >= 0) (term[k] ? dying_of : live_of)[owner[k]]++;
        }
        for (size_t k = 0; k < us_engine_pod_count(e); k++) {
            us_pod_info p;
            int j = -1, o2 = -1;
            if (us_engine_pod(e, k, &p) != US_OK) continue;
            bool rel = p.phase == US_PHASE_RELEASING;
            /* a Job whose pods are all being deleted keeps one replica,
             * pending under a name of the engine's, the replacement its
             * controller makes (kube/objects.c) */
            if (p.phase == US_PHASE_PENDING && sscanf(p.name, "t/pod%d", &j) != 1 &&
                sscanf(p.workload, "t/job%d", &o2) == 1 && o2 >= 0 && o2 < OWNERS && !live_of[o2] &&
                dying_of[o2])
                continue;
            have += !rel;
            have_rel += rel;
            bool known = sscanf(p.name, "t/pod%d", &j) == 1 && j >= 0 && j < PODS && owner[j] >= 0 &&
                         term[j] == rel;
            char on[16];
            snprintf(on, sizeof on, "n%d", known ? node[j] + 1 : 0);
            bool placed = known && (node[j] < 0 ? p.node == NULL : p.node && !strcmp(p.node, on));
            if (known && !rel && !wl_of_owner[owner[j]]) wl_of_owner[owner[j]] = p.workload;
            bool grouped = !known || rel || !strcmp(wl_of_owner[owner[j]], p.workload);
            if (!known || !placed || !grouped) {
                fprintf(stderr, "  the engine's pod %s (%s, %s on %s) is not the cluster's\n", p.name, p.workload,
                        p.phase_name, p.node ? p.node : "no node");
                good = false;
            }
        }
        if (have != want || have_rel != want_rel) {
            fprintf(stderr, "  the engine has %zu pods and %zu terminating, the cluster %zu and %zu\n", have,
                    have_rel, want, want_rel);
            good = false;
        }
        for (int a = 0; a < OWNERS; a++)
            for (int b = a + 1; b < OWNERS; b++)
                good = good && !(wl_of_owner[a] && wl_of_owner[b] && !strcmp(wl_of_owner[a], wl_of_owner[b]));
        if (!good) fprintf(stderr, "  seed %u, step %d: the engine's pods differ from the cluster's\n", seed, step);
    }
    sv_workloads_free(w);
    us_engine_destroy(e);
    return good;
}

TEST(random_churn_leaves_the_engine_the_pods_the_cluster_has) {
    for (unsigned seed = 1; seed <= 16; seed++) CHECK(churn(seed * 7919));
}

int main(void) {
    RUN(an_unmappable_workload_is_left_out_alone);
    RUN(a_sync_maps_only_what_changed);
    RUN(a_daemonset_pod_binds_on_the_node_it_names);
    RUN(a_pod_being_deleted_is_releasing_until_gone);
    RUN(an_evicted_pod_bound_but_not_seen_bound_is_deleted);
    RUN(random_churn_leaves_the_engine_the_pods_the_cluster_has);
    return check_report();
}
