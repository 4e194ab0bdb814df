/*
 * serve.c — `understory serve`: the engine as the scheduler of a real
 * Kubernetes cluster (../shared/KUBERNETES.md).  This stage connects
 * (kubeconfig or in-cluster), keeps the cluster's nodes, KAI's queues,
 * pods and what they refer to in view with informers, and feeds them to an
 * engine through the public API only (bindings/understory.h, the scenario
 * format's objects; pods through workloads.c).  Once every informer has
 * listed, a timer runs a cycle every --cycle-interval and writes.c turns
 * its decisions into API calls (none under --dry-run).  One libuv loop
 * runs everything; SIGINT/SIGTERM stop it.  Owns the command line and
 * the wiring; it decides nothing itself.
 */
#include "serve.h"

#include <cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "admin.h"
#include "cache.h"
#include "http.h"
#include "informer.h"
#include "kubeconfig.h"
#include "leader.h"
#include "objects.h"
#include "queues.h"
#include "monitor.h"
#include "nodes.h"
#include "policydir.h"
#include "understory.h"
#include "workloads.h"
#include "writes.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* The informers of the objects pods refer to, by sv_kind (nodes apart:
 * they feed the engine themselves and the caches too). */
static const char *const kind_paths[SV_NKINDS] = {
    [SV_PODS] = "/api/v1/pods",
    [SV_NAMESPACES] = "/api/v1/namespaces",
    [SV_PODGROUPS] = "/apis/scheduling.run.ai/v2alpha2/podgroups",
    [SV_PRIORITYCLASSES] = "/apis/scheduling.k8s.io/v1/priorityclasses",
};

typedef struct serve serve;

typedef struct kind_feed {
    serve *s;
    sv_kind kind;
} kind_feed;

struct serve {
    us_engine *engine;
    sv_http *http;
    sv_http *lease_http;       /* the lease's own client (serve/http.h: patience) */
    sv_informer *nodes, *queues, *kinds[SV_NKINDS];
    kind_feed feeds[SV_NKINDS];
    sv_queues *queue_map;
    sv_nodes *node_feed;       /* nodes into the engine */
    sv_workloads *workloads;
    sv_writes *writes;
    sv_monitor *monitor;       /* the admin endpoint: probes and metrics */
    sv_leader *leader;         /* NULL: no election (--leader-elect=false, --dry-run) */
    bool stopping;
    sv_policydir *reload;         /* --policies, hot; POST /reload */
    uv_signal_t sigint, sigterm;
    uv_timer_t cycle;
    double epoch, interval;
    double arrival_gap;  /* --arrival-cycle-gap; 0: cycles on the interval only */
    double last_cycle;   /* monotonic time the last cycle started */
    bool dry_run;
    int synced; /* informers whose first list is complete */
    int status;
};

/* Every informer has listed once: the engine sees the whole cluster. */
#define NINFORMERS (2 + SV_NKINDS - 1)

static void usage(FILE *f) {
    fputs("usage: understory serve [--kubeconfig FILE] [--context NAME] [--admin-address HOST:PORT]\n"
          "                        [--dry-run] [--cycle-interval SECONDS] [--scheduler-name NAME]\n"
          "                        [--leader-elect[=false]] [--lease-namespace NS] [--lease-name NAME]\n"
          "                        [--lease-duration D] [--renew-deadline D] [--retry-period D]\n"
          "                        [--kube-api-qps QPS] [--kube-api-burst N] [--kube-api-retries N]\n"
          "                        [--policies DIR]\n"
          "                        [--full-cycles] [--arrival-cycle-gap SECONDS]\n"
          "\n"
          "Connect to a Kubernetes API server, keep its nodes, KAI queues, pods,\n"
          "PodGroups, namespaces and priority classes in an engine's view, and once\n"
          "every list is complete run a scheduling cycle every interval, writing its\n"
          "decisions to the cluster (binds, nominations, evictions, conditions, events).\n"
          "\n"
          "options:\n"
          "  --kubeconfig FILE  the kubeconfig to use (default: $KUBECONFIG, else the\n"
          "                     in-cluster service account)\n"
          "  --context NAME     a context of the kubeconfig (default: its current one)\n"
          "  --admin-address HOST:PORT\n"
          "                     serve /healthz, /readyz, /metrics, /debug/state and\n"
          "                     POST /reload there (default\n"
          "                     " SV_ADMIN_DEFAULT_ADDRESS "; port 0: a free one, logged)\n"
          "  --dry-run          compute and log the decisions, write nothing\n"
          "  --cycle-interval SECONDS\n"
          "                     time between cycles (default 1)\n"
          "  --arrival-cycle-gap SECONDS\n"
          "                     a new pod waiting to be bound brings the next cycle\n"
          "                     forward, to SECONDS after the last one began, as\n"
          "                     kube-scheduler schedules as pods come (default 0: off,\n"
          "                     a cycle every --cycle-interval only)\n"
          "  --scheduler-name NAME\n"
          "                     the spec.schedulerName of the pods to schedule (default\n"
          "                     understory); other pods hold their room as external\n"
          "  --leader-elect[=false]\n"
          "                     elect one writing replica on a coordination.k8s.io Lease\n"
          "                     (default on; a standby keeps its caches warm and writes\n"
          "                     nothing; --dry-run never takes part)\n"
          "  --lease-namespace NS, --lease-name NAME\n"
          "                     the Lease (default understory-system/understory)\n"
          "  --lease-duration D how long a standby waits for a silent leader (default 15s;\n"
          "                     whole seconds)\n"
          "  --renew-deadline D a leader that has not renewed for D stops writing (default\n"
          "                     10s; shorter than the lease duration)\n"
          "  --retry-period D   time between two tries to acquire or renew (default 2s;\n"
          "                     shorter than the renew deadline)\n"
          "  --kube-api-qps QPS requests a second to the API server, watches apart\n"
          "                     (default 50; above 0, at most 100000)\n"
          "  --kube-api-burst N requests allowed at once above that rate (default 100;\n"
          "                     a whole number, 1 to 100000)\n"
          "  --kube-api-retries N\n"
          "                     times a request that got no answer, a 429 or a 5xx is\n"
          "                     tried again (default 5; 0 to 10)\n"
          "  --policies DIR     the policy directory (fairshare.lua, placement.lua,\n"
          "                     background.lua; default: the built-in policies),\n"
          "                     watched: a change (a ConfigMap update) is checked and\n"
          "                     swapped in between cycles, or refused\n"
          "  --full-cycles      every cycle recomputes everything instead of reusing what\n"
          "                     the last one left (the same decisions; for comparison)\n"
          "  -h, --help         show this help\n"
          "\n"
          "exit status: 0 stopped by SIGINT or SIGTERM; 2 bad usage, no usable\n"
          "configuration, an admin address it cannot listen on, or policies that do\n"
          "not load.\n",
          f);
}

static const cJSON *at(const cJSON *o, const char *a, const char *b) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    return b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

static const char *str(const cJSON *v) { return cJSON_IsString(v) ? v->valuestring : NULL; }

static void on_node(void *ud, sv_event ev, const cJSON *n) {
    serve *s = ud;
    sv_workloads_event(s->workloads, SV_NODES, ev, n);
    sv_nodes_event(s->node_feed, ev, n);
}

static void on_synced(void *ud) {
    serve *s = ud;
    s->synced++;
    printf("nodes synced: %zu in the engine\n", us_engine_node_count(s->engine));
    fflush(stdout);
}

static double mono(void);
static void on_cycle(uv_timer_t *t);

/* --arrival-cycle-gap: a pod that arrives unbound brings the next cycle
 * forward to the gap after the last (at once when that has passed); the
 * interval goes on from there.  Pods arriving together share the cycle:
 * a cycle already due sooner is left alone. */
static void cycle_soon(serve *s) {
    if (s->arrival_gap <= 0 || s->stopping || s->synced < NINFORMERS) return;
    double wait = s->last_cycle + s->arrival_gap - mono();
    uint64_t ms = wait > 0 ? (uint64_t)(wait * 1000) : 0;
    if (uv_timer_get_due_in(&s->cycle) <= ms) return;
    uint64_t every = (uint64_t)(s->interval * 1000);
    uv_timer_start(&s->cycle, on_cycle, ms, every ? every : 1);
}

static void on_kind(void *ud, sv_event ev, const cJSON *obj) {
    kind_feed *f = ud;
    sv_workloads_event(f->s->workloads, f->kind, ev, obj);
    if (f->kind == SV_PODS && ev == SV_ADDED) {
        const char *node = str(at(obj, "spec", "nodeName"));
        if (!node || !*node) cycle_soon(f->s);
    }
}

static void on_kind_synced(void *ud) {
    kind_feed *f = ud;
    f->s->synced++;
    printf("%s synced\n", kind_paths[f->kind]);
    fflush(stdout);
}

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One cycle: the caches into the engine, us_engine_run_cycle, the
 * decisions out.  Nothing is decided before every informer has listed
 * once (a cache half full would look like free room). */
/* The caches into the engine at wall time now; the engine's time for it. */
static double sync_now(serve *s, double now) {
    double at = now - s->epoch;
    if (at < us_engine_time(s->engine)) at = us_engine_time(s->engine);
    /* binds not seen within a minute did not happen */
    sv_workloads_expire(s->workloads, now, 60);
    sv_workloads_sync(s->workloads, at);
    return at;
}

static void on_cycle(uv_timer_t *t) {
    serve *s = t->data;
    us_error err;
    if (s->synced < NINFORMERS) return;
    /* a standby keeps its caches warm and plans nothing: what it would
     * assume could only be the leader's intent, never the cluster's */
    if (s->leader && !sv_leader_leading(s->leader)) return;
    double now = wall(), t0 = mono();
    s->last_cycle = t0;
    double at = sync_now(s, now);
    /* nodes that report less than their pods hold: taken as reported
     * once the pods just synced left room */
    sv_nodes_retry(s->node_feed);
    sv_monitor_nodes_short(s->monitor, sv_nodes_short(s->node_feed));
    double t1 = mono();
    if (us_engine_run_cycle(s->engine, at, &err) != US_OK) {
        fprintf(stderr, "understory serve: cycle: %s\n", err.message);
        return;
    }
    double t2 = mono();
    sv_writes_apply(s->writes, now);
    sv_monitor_after_cycle(s->monitor, s->engine, t1 - t0, mono() - t2, now);
}

/* --cycle-interval's value: seconds, above 0 and at most a day. */
static bool parse_interval(const char *v, double *out) {
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !(d > 0) || d > 86400) return false;
    *out = d;
    return true;
}

/* --kube-api-qps: above 0, at most 100000; --kube-api-burst: a whole
 * number from 1 to 100000. */
static bool parse_limit(const char *v, bool whole, double *out) {
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !(d > 0) || d > 100000 || (whole && (d < 1 || d != (double)(long)d))) return false;
    *out = d;
    return true;
}

static void on_queues_synced(void *ud) {
    serve *s = ud;
    s->synced++;
    printf("queues synced: %zu in the engine, %zu waiting for a parent\n",
           us_engine_queue_count(s->engine), sv_queues_waiting(s->queue_map));
    fflush(stdout);
}

static void on_queue(void *ud, sv_event ev, const cJSON *obj) {
    serve *s = ud;
    sv_queues_event(s->queue_map, ev, obj);
}

/* The informers of pods and what they refer to; -1 when out of memory. */
static int start_kinds(serve *s, uv_loop_t *loop) {
    for (int k = 0; k < SV_NKINDS; k++) {
        if (!kind_paths[k]) continue;
        s->feeds[k] = (kind_feed){s, (sv_kind)k};
        if (!(s->kinds[k] = sv_informer_start(s->http, loop, kind_paths[k], on_kind, on_kind_synced, &s->feeds[k])))
            return -1;
    }
    return 0;
}

static void close_handle(uv_handle_t *h) { (void)h; }

/* Everything stops: the loop then ends once the handles have closed. */
static void stop_all(void *ud) {
    serve *s = ud;
    sv_monitor_close(s->monitor); /* first: it reads the informers and the client */
    s->monitor = NULL;
    sv_policydir_close(s->reload);
    s->reload = NULL;
    sv_informer_stop(s->nodes);
    sv_informer_stop(s->queues);
    s->nodes = s->queues = NULL;
    for (int k = 0; k < SV_NKINDS; k++) {
        sv_informer_stop(s->kinds[k]);
        s->kinds[k] = NULL;
    }
    sv_leader_free(s->leader); /* in the same turn as the client: no lease answer comes in between */
    s->leader = NULL;
    sv_http_free(s->lease_http);
    s->lease_http = NULL;
    sv_http_free(s->http);
    s->http = NULL;
    uv_close((uv_handle_t *)&s->sigint, close_handle);
    uv_close((uv_handle_t *)&s->sigterm, close_handle);
}

/* SIGINT, SIGTERM: no more cycles; a leader gives its lease up first
 * (a standby takes over at its next try, not a lease duration later). */
static void on_signal(uv_signal_t *sig, int signum) {
    serve *s = sig->data;
    (void)signum;
    if (s->stopping) return;
    s->stopping = true;
    uv_timer_stop(&s->cycle);
    uv_close((uv_handle_t *)&s->cycle, close_handle);
    if (s->leader) sv_leader_release(s->leader, stop_all, s);
    else stop_all(s);
}

static bool may_write(void *ud) { return sv_leader_leading(((serve *)ud)->leader); }

static void on_leading(void *ud, bool leading) { sv_monitor_leader(((serve *)ud)->monitor, leading); }

/* The admin endpoint on the loop, before anything connects: an address it
 * cannot listen on is a configuration error.  0, or -1 with err. */
static int start_admin(serve *s, uv_loop_t *loop, const char *address, char *err, size_t errlen) {
    if (!(s->monitor = sv_monitor_start(loop, address, err, errlen))) return -1;
    char shown[300];
    const char *colon = strrchr(address, ':');
    snprintf(shown, sizeof shown, "%.*s:%d", (int)(colon - address), address, sv_monitor_port(s->monitor));
    fprintf(stderr, "understory serve: admin endpoint on http://%s\n", shown);
    return 0;
}

/* GET /debug/state: the caches brought into the engine (what the next
 * cycle starts from), its state as a scenario document; 503 until every
 * informer has listed. */
static void debug_state(void *ud, const sv_admin_request *rq, sv_admin_reply *rp) {
    serve *s = ud;
    char *text;
    size_t len;
    us_error err;
    (void)rq;
    if (s->synced < NINFORMERS) {
        static const char msg[] = "not ready: the caches have not all listed yet\n";
        sv_admin_respond(rp, 503, "text/plain; charset=utf-8", msg, sizeof msg - 1);
        return;
    }
    sync_now(s, wall());
    if (us_engine_state_json(s->engine, &text, &len, &err) != US_OK) return; /* out of memory: 500 */
    sv_admin_respond(rp, 200, "application/json", text, len);
    us_free(text);
}

/* What the admin endpoint reads: the client's requests and each informer
 * (a new informer is one more call here). */
static void watch_for_admin(serve *s) {
    sv_monitor_watch_http(s->monitor, s->http);
    if (s->lease_http) sv_monitor_watch_http(s->monitor, s->lease_http);
    sv_monitor_watch_informer(s->monitor, "nodes", s->nodes);
    sv_monitor_watch_informer(s->monitor, "queues", s->queues);
    static const char *const names[SV_NKINDS] = {[SV_PODS] = "pods", [SV_NAMESPACES] = "namespaces",
                                                 [SV_PODGROUPS] = "podgroups",
                                                 [SV_PRIORITYCLASSES] = "priorityclasses"};
    for (int k = 0; k < SV_NKINDS; k++)
        if (s->kinds[k]) sv_monitor_watch_informer(s->monitor, names[k], s->kinds[k]);
}

int sv_main(int argc, char **argv) {
    const char *kubeconfig = getenv("KUBECONFIG"), *context = NULL, *admin_address = SV_ADMIN_DEFAULT_ADDRESS;
    const char *scheduler = KUBE_DEFAULT_SCHEDULER, *policies = NULL;
    char err[1024], identity[300], agent[320];
    bool elect = true;
    sv_leader_opts lease = {"understory-system", "understory", identity, SV_LEADER_LEASE_DURATION,
                            SV_LEADER_RENEW_DEADLINE, SV_LEADER_RETRY_PERIOD};
    sv_config cfg;
    serve s;
    double qps = SV_HTTP_DEFAULT_QPS, burst = SV_HTTP_DEFAULT_BURST;
    unsigned retries = SV_HTTP_MAX_RETRIES;
    bool full_cycles = false;
    memset(&s, 0, sizeof s);
    s.interval = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--kubeconfig") && i + 1 < argc) {
            kubeconfig = argv[++i];
        } else if (!strcmp(argv[i], "--context") && i + 1 < argc) {
            context = argv[++i];
        } else if (!strcmp(argv[i], "--admin-address") && i + 1 < argc) {
            admin_address = argv[++i];
        } else if (!strcmp(argv[i], "--policies") && i + 1 < argc && *argv[i + 1]) {
            policies = argv[++i];
        } else if (!strcmp(argv[i], "--dry-run")) {
            s.dry_run = true;
        } else if (!strcmp(argv[i], "--full-cycles")) {
            full_cycles = true;
        } else if (!strcmp(argv[i], "--scheduler-name") && i + 1 < argc && *argv[i + 1]) {
            scheduler = argv[++i];
        } else if (!strcmp(argv[i], "--leader-elect") || !strcmp(argv[i], "--leader-elect=true")) {
            elect = true;
        } else if (!strcmp(argv[i], "--leader-elect=false")) {
            elect = false;
        } else if (!strcmp(argv[i], "--lease-namespace") && i + 1 < argc) {
            lease.namespace_ = argv[++i];
        } else if (!strcmp(argv[i], "--lease-name") && i + 1 < argc) {
            lease.name = argv[++i];
        } else if ((!strcmp(argv[i], "--lease-duration") || !strcmp(argv[i], "--renew-deadline") ||
                    !strcmp(argv[i], "--retry-period")) && i + 1 < argc) {
            double *d = !strcmp(argv[i], "--lease-duration")   ? &lease.lease_duration
                        : !strcmp(argv[i], "--renew-deadline") ? &lease.renew_deadline
                                                               : &lease.retry_period;
            if (!sv_leader_parse_duration(argv[i + 1], d)) {
                fprintf(stderr, "understory serve: %s: \"%s\" is not a duration (e.g. 15s, 500ms, 2m)\n", argv[i],
                        argv[i + 1]);
                return 2;
            }
            i++;
        } else if ((!strcmp(argv[i], "--kube-api-qps") || !strcmp(argv[i], "--kube-api-burst")) && i + 1 < argc) {
            bool is_qps = !strcmp(argv[i], "--kube-api-qps");
            if (!parse_limit(argv[i + 1], !is_qps, is_qps ? &qps : &burst)) {
                fprintf(stderr, "understory serve: %s: \"%s\" is not %s\n", argv[i], argv[i + 1],
                        is_qps ? "a number of requests a second (above 0, at most 100000)"
                               : "a whole number of requests (1 to 100000)");
                return 2;
            }
            i++;
        } else if (!strcmp(argv[i], "--kube-api-retries") && i + 1 < argc) {
            char *end;
            long n = strtol(argv[i + 1], &end, 10);
            if (end == argv[i + 1] || *end || n < 0 || n > 10) {
                fprintf(stderr, "understory serve: --kube-api-retries: \"%s\" is not a number of retries (0 to 10)\n",
                        argv[i + 1]);
                return 2;
            }
            retries = (unsigned)n;
            i++;
        } else if (!strcmp(argv[i], "--arrival-cycle-gap") && i + 1 < argc) {
            if (strcmp(argv[i + 1], "0") != 0 && !parse_interval(argv[i + 1], &s.arrival_gap)) {
                fprintf(stderr, "understory serve: --arrival-cycle-gap: \"%s\" is not a number of seconds "
                        "(0: off, else above 0, at most 86400)\n", argv[i + 1]);
                return 2;
            }
            i++;
        } else if (!strcmp(argv[i], "--cycle-interval") && i + 1 < argc) {
            if (!parse_interval(argv[++i], &s.interval)) {
                fprintf(stderr, "understory serve: --cycle-interval: \"%s\" is not a number of seconds "
                        "(above 0, at most 86400)\n", argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "understory serve: %s %s\n",
                    argv[i][0] == '-' && (!strcmp(argv[i], "--kubeconfig") || !strcmp(argv[i], "--context") ||
                                          !strcmp(argv[i], "--admin-address") || !strcmp(argv[i], "--scheduler-name") ||
                                          !strcmp(argv[i], "--cycle-interval") || !strncmp(argv[i], "--lease-", 8) ||
                                          !strcmp(argv[i], "--arrival-cycle-gap") ||
                                          !strcmp(argv[i], "--renew-deadline") || !strcmp(argv[i], "--retry-period") ||
                                          !strcmp(argv[i], "--kube-api-qps") || !strcmp(argv[i], "--kube-api-burst") ||
                                          !strcmp(argv[i], "--kube-api-retries") ||
                                          !strcmp(argv[i], "--policies"))
                        ? "missing the value of" : "unknown option",
                    argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (sv_leader_identity(identity, sizeof identity) < 0) {
        fprintf(stderr, "understory serve: the host name, this replica's identity, cannot be read\n");
        return 2;
    }
    if (elect && !s.dry_run && sv_leader_check_opts(&lease, err, sizeof err) < 0) {
        fprintf(stderr, "understory serve: %s\n", err);
        return 2;
    }
    /* where the kubelet mounts the token; elsewhere only in tests that play the kubelet */
    const char *sa_dir = getenv("UNDERSTORY_SERVICE_ACCOUNT_DIR");
    int rc = kubeconfig && *kubeconfig ? sv_kubeconfig_load(kubeconfig, context, &cfg, err, sizeof err)
                                       : sv_kubeconfig_in_cluster(sa_dir && *sa_dir ? sa_dir : SA_DIR, &cfg, err,
                                                                  sizeof err);
    if (rc < 0) {
        fprintf(stderr, "understory serve: %s\n", err);
        return 2;
    }
    us_error uerr;
    us_engine_options eo;
    us_engine_options_init(&eo);
    eo.full_cycles = full_cycles;
    eo.reported_pods = 1; /* the cluster names pods: only those it has are placed */
    if (us_engine_create(&eo, &s.engine, &uerr) != US_OK) {
        fprintf(stderr, "understory serve: %s\n", uerr.message);
        sv_config_free(&cfg);
        return 1;
    }
    if (policies && us_engine_load_policies(s.engine, policies, &uerr) != US_OK) {
        fprintf(stderr, "understory serve: --policies %s: %s\n", policies, uerr.message);
        sv_config_free(&cfg);
        us_engine_destroy(s.engine);
        return 2;
    }
    if (policies) fprintf(stderr, "understory serve: policies from %s: policy %s\n", policies, us_engine_policy_id(s.engine));
    uv_loop_t *loop = uv_default_loop();
    if (start_admin(&s, loop, admin_address, err, sizeof err) < 0 ||
        !(s.reload = sv_policydir_start(loop, s.engine, policies, s.monitor, err, sizeof err)) ||
        (sv_monitor_route(s.monitor, "GET", "/debug/state", debug_state, &s) < 0 &&
         snprintf(err, sizeof err, "out of memory") > 0)) {
        sv_monitor_close(s.monitor);
        sv_policydir_close(s.reload);
        fprintf(stderr, "understory serve: %s\n", err);
        sv_config_free(&cfg);
        uv_run(loop, UV_RUN_DEFAULT); /* what was opened closes */
        us_engine_destroy(s.engine);
        return 2;
    }
    s.http = sv_http_new(loop, &cfg, err, sizeof err);
    if (s.http) {
        sv_http_set_limit(s.http, qps, (unsigned)burst);
        sv_http_set_patience(s.http, retries, 0);
    }
    /* the lease has a client of its own, as kube-scheduler's: a queue of
     * binds never delays a renew, and a renew is never retried past its
     * deadline */
    bool lease_ok = !elect || s.dry_run || (s.lease_http = sv_http_new(loop, &cfg, err, sizeof err));
    if (s.lease_http) sv_http_set_patience(s.lease_http, 0, lease.renew_deadline);
    fprintf(stderr, "understory serve: %s (%s)\n", cfg.server, cfg.name);
    sv_config_free(&cfg);
    s.epoch = wall();
    if (!s.http || !lease_ok || !(s.queue_map = sv_queues_new(s.engine)) || !(s.node_feed = sv_nodes_new(s.engine)) ||
        !(s.workloads = sv_workloads_new(s.engine, scheduler, s.epoch)) ||
        !(s.writes = sv_writes_new(s.http, s.engine, s.workloads, s.dry_run)) || start_kinds(&s, loop) < 0 ||
        !(s.nodes = sv_informer_start(s.http, loop, "/api/v1/nodes", on_node, on_synced, &s)) ||
        !(s.queues = sv_informer_start(s.http, loop, "/apis/scheduling.run.ai/v2/queues", on_queue,
                                       on_queues_synced, &s))) {
        fprintf(stderr, "understory serve: %s\n", s.http && lease_ok ? "out of memory" : err);
        sv_informer_stop(s.nodes);
        sv_informer_stop(s.queues);
        for (int k = 0; k < SV_NKINDS; k++) sv_informer_stop(s.kinds[k]);
        sv_monitor_close(s.monitor);
        sv_policydir_close(s.reload);
        sv_http_free(s.http);
        sv_http_free(s.lease_http);
        sv_queues_free(s.queue_map);
        sv_nodes_free(s.node_feed);
        sv_writes_free(s.writes);
        sv_workloads_free(s.workloads);
        uv_run(loop, UV_RUN_DEFAULT);
        us_engine_destroy(s.engine);
        return 1;
    }
    watch_for_admin(&s);
    snprintf(agent, sizeof agent, "understory/%s", identity);
    /* a dry run writes nothing, the lease included: it never stands in the leader's way */
    if (sv_http_user_agent(s.http, agent) < 0 || (s.lease_http && sv_http_user_agent(s.lease_http, agent) < 0) ||
        sv_writes_identity(s.writes, identity) < 0)
        snprintf(err, sizeof err, "out of memory");
    else if (!elect || s.dry_run || (s.leader = sv_leader_start(s.lease_http, loop, &lease, on_leading, &s, err, sizeof err)))
        err[0] = '\0';
    if (err[0]) {
        fprintf(stderr, "understory serve: %s\n", err);
        s.status = 1;
        uv_signal_init(loop, &s.sigint); /* stop_all closes them */
        uv_signal_init(loop, &s.sigterm);
        stop_all(&s);
        uv_run(loop, UV_RUN_DEFAULT);
        sv_queues_free(s.queue_map);
        sv_nodes_free(s.node_feed);
        sv_writes_free(s.writes);
        sv_workloads_free(s.workloads);
        us_engine_destroy(s.engine);
        return 1;
    }
    if (s.leader) {
        sv_monitor_leader(s.monitor, false);
        sv_writes_gate(s.writes, may_write, &s);
        fprintf(stderr, "understory serve: leader election on lease %s/%s as %s\n", lease.namespace_, lease.name,
                identity);
    }
    uv_signal_init(loop, &s.sigint);
    uv_signal_init(loop, &s.sigterm);
    s.sigint.data = s.sigterm.data = &s;
    uv_signal_start(&s.sigint, on_signal, SIGINT);
    uv_signal_start(&s.sigterm, on_signal, SIGTERM);
    uv_timer_init(loop, &s.cycle);
    s.cycle.data = &s;
    uint64_t ms = (uint64_t)(s.interval * 1000);
    uv_timer_start(&s.cycle, on_cycle, ms ? ms : 1, ms ? ms : 1);
    if (s.dry_run) fprintf(stderr, "understory serve: dry run: decisions are logged, not written\n");
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    sv_queues_free(s.queue_map);
    sv_nodes_free(s.node_feed);
    sv_writes_free(s.writes);
    sv_workloads_free(s.workloads);
    us_engine_destroy(s.engine);
    fprintf(stderr, "understory serve: stopped\n");
    return s.status;
}
