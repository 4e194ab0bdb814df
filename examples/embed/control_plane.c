/*
 * control_plane.c — a small control plane that embeds understory.
 *
 * It keeps its own picture of the cluster (the "world": which pod runs on
 * which node, which pods are terminating), feeds the engine what changes,
 * runs a scheduling cycle every 10 seconds of its clock, applies the
 * decisions it gets back to its world, and prints them with the events.
 *
 *   t=0   nodes n1 and n2 join; a background DaemonSet (node-agent) and a
 *         background GPU burn-in Deployment (gpu-burn, 20 pods) arrive
 *   t=10  node n3 joins: the DaemonSet and the burn-in spread onto it
 *   t=20  a training gang arrives: burn-in pods step aside (evicted), the
 *         gang is pipelined onto their GPUs
 *   t=30  the evicted pods have terminated: the world reports them gone,
 *         and the engine binds the gang
 *   t=60  the training finishes: the burn-in takes its GPUs back
 *
 * At the end it checks that its world and the engine's state agree pod for
 * pod, and exits non-zero if they do not (or on any error).
 *
 * Build against an installed understory:
 *   cc control_plane.c $(pkg-config --cflags --libs understory) -o control_plane
 *   ./control_plane [POLICIES_DIR]      (default: the built-in policies)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <understory.h>

/* ---- the world: what this control plane believes runs where ------------------ */

typedef enum { RUNNING, TERMINATING, WAITING } pod_state;

typedef struct pod {
    char name[64];
    char node[32];
    pod_state state;
    double since;          /* TERMINATING: when it was told to stop */
} pod;

typedef struct world {
    pod pods[256];
    size_t n;
} world;

static pod *find(world *w, const char *name, pod_state state) {
    for (size_t i = 0; i < w->n; i++)
        if (w->pods[i].state == state && strcmp(w->pods[i].name, name) == 0) return &w->pods[i];
    return NULL;
}

static void put(world *w, const char *name, const char *node, pod_state state, double t) {
    if (w->n == sizeof w->pods / sizeof w->pods[0]) return;
    pod *p = &w->pods[w->n++];
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->node, sizeof p->node, "%s", node);
    p->state = state;
    p->since = t;
}

static void drop(world *w, pod *p) { *p = w->pods[--w->n]; }

/* ---- talking to the engine ------------------------------------------------------ */

static us_engine *engine;
static us_error err;

/* Any failure ends the program: this is an example, not a daemon. */
static void must(int rc, const char *what) {
    if (rc == US_OK) return;
    fprintf(stderr, "control_plane: %s: %s (%s)\n", what, err.message, us_strerror(rc));
    us_engine_destroy(engine);
    exit(1);
}

static void add_node(const char *name) {
    static const us_label zone[] = {{"zone", "a"}};
    us_node_spec n = {0};
    n.name = name;
    n.capacity = (us_resources){8, 64000, 512LL << 30}; /* 8 GPUs, 64 cores, 512 GiB */
    n.labels = zone;
    n.nlabels = 1;
    must(us_engine_upsert_node(engine, &n, &err), name);
}

/* Printed by the engine at the end of each cycle, once per event. */
static void on_event(us_engine *e, const us_event_info *ev, void *data) {
    (void)data;
    printf("t=%-3g event %-7s %-24s %s: %s\n", us_engine_time(e), ev->type, ev->reason,
           ev->object, ev->message);
    for (size_t i = 0; i < ev->nannotations; i++)
        printf("        %s: %s\n", ev->annotations[i].key, ev->annotations[i].value);
}

/* Run a cycle at t and apply its decisions to the world. */
static void cycle(world *w, double t) {
    must(us_engine_run_cycle(engine, t, &err), "cycle");
    for (size_t i = 0; i < us_engine_decision_count(engine); i++) {
        us_decision_info d;
        pod *p;
        us_engine_decision(engine, i, &d);
        switch (d.op) {
        case US_DECISION_BIND:
            /* a bind: the pod starts on the node (a pipelined one stops waiting) */
            if ((p = find(w, d.pod, WAITING))) drop(w, p);
            put(w, d.pod, d.node, RUNNING, t);
            printf("t=%-3g bind     %-16s -> %s%s%s\n", t, d.pod, d.node, d.action ? "  " : "",
                   d.action ? d.action : "  (its room is free now)");
            break;
        case US_DECISION_PIPELINE:
            /* bound as soon as the pods it waits for have terminated */
            put(w, d.pod, d.node, WAITING, t);
            printf("t=%-3g pipeline %-16s -> %s  waiting for %zu pod(s)\n", t, d.pod, d.node,
                   d.nwaits_for);
            break;
        case US_DECISION_EVICT:
            /* ask the pod to stop; it terminates within its grace period */
            if ((p = find(w, d.pod, RUNNING))) {
                p->state = TERMINATING;
                p->since = t;
            }
            printf("t=%-3g evict    %-16s <- %s  (%s, for %s)\n", t, d.pod, d.node, d.action,
                   d.evictor ? d.evictor : "-");
            break;
        }
    }
}

/* Pods that finished terminating leave the world; the engine hears it. */
static void reap(world *w, double t, double grace) {
    for (size_t i = 0; i < w->n;) {
        pod *p = &w->pods[i];
        if (p->state == TERMINATING && p->since + grace <= t) {
            must(us_engine_remove_pod(engine, p->name, &err), p->name);
            drop(w, p);
        } else {
            i++;
        }
    }
}

/* Does the engine see what the world sees?  Every running pod in both,
 * on the same node. */
static int agree(world *w) {
    size_t running = 0, bad = 0;
    for (size_t i = 0; i < us_engine_pod_count(engine); i++) {
        us_pod_info p;
        us_engine_pod(engine, i, &p);
        if (p.phase != US_PHASE_RUNNING) continue;
        running++;
        pod *mine = find(w, p.name, RUNNING);
        if (!mine || strcmp(mine->node, p.node) != 0) {
            printf("disagree: %s runs on %s for the engine\n", p.name, p.node);
            bad++;
        }
    }
    size_t world_running = 0;
    for (size_t i = 0; i < w->n; i++) world_running += w->pods[i].state == RUNNING;
    if (world_running != running) {
        printf("disagree: %zu pods run in the world, %zu for the engine\n", world_running, running);
        bad++;
    }
    return bad == 0;
}

static void summary(void) {
    for (size_t i = 0; i < us_engine_node_count(engine); i++) {
        us_node_info n;
        us_engine_node(engine, i, &n);
        printf("node %s: %g/%g GPUs used\n", n.name, n.used.gpu, n.capacity.gpu);
    }
    for (size_t i = 0; i < us_engine_queue_count(engine); i++) {
        us_queue_info q;
        us_engine_queue(engine, i, &q);
        printf("queue %s: %g GPUs allocated, fair share %g\n", q.name, q.allocated.gpu,
               q.fair_share.gpu);
    }
}

int main(int argc, char **argv) {
    static world w; /* static: zeroed, and off the stack */
    us_engine_options o;
    us_engine_options_init(&o);
    o.policies = argc > 1 ? argv[1] : NULL;
    must(us_engine_create(&o, &engine, &err), "create");
    us_engine_on_event(engine, on_event, NULL);
    printf("understory %s, policies %s\n", us_version(), us_engine_policy_id(engine));

    /* t=0: the cluster as the control plane first sees it */
    add_node("n1");
    add_node("n2");
    must(us_engine_upsert_queue_json(engine,
                                     "{\"name\": \"team\", \"resources\": {\"gpu\": "
                                     "{\"quota\": 16, \"over_quota_weight\": 1}}}", &err), "team");
    /* background work lives in a queue with no quota and no weight */
    must(us_engine_upsert_queue_json(engine,
                                     "{\"name\": \"infra-bg\", \"resources\": {"
                                     "\"gpu\": {\"quota\": 0, \"over_quota_weight\": 0},"
                                     "\"cpu\": {\"quota\": 0, \"over_quota_weight\": 0},"
                                     "\"memory\": {\"quota\": 0, \"over_quota_weight\": 0}}}", &err),
         "infra-bg");
    must(us_engine_upsert_workload_json(engine,
                                        "{\"name\": \"node-agent\", \"queue\": \"infra-bg\","
                                        " \"controller\": \"daemonset\","
                                        " \"labels\": {\"kai.scheduler/background\": \"true\"},"
                                        " \"requests\": {\"cpu\": \"100m\", \"memory\": \"64Mi\"},"
                                        " \"termination_grace\": 5}", 0, &err), "node-agent");
    {
        static const us_label bg[] = {{"kai.scheduler/background", "true"}};
        us_workload_spec burn;
        us_workload_spec_init(&burn);
        burn.name = "gpu-burn";
        burn.queue = "infra-bg";
        burn.controller = US_CONTROLLER_DEPLOYMENT;
        burn.replicas = 20;
        burn.labels = bg;
        burn.nlabels = 1;
        burn.termination_grace = 5;
        burn.requests = (us_resources){1, 1000, 4LL << 30};
        must(us_engine_upsert_workload(engine, &burn, 0, &err), "gpu-burn");
    }
    cycle(&w, 0);

    /* t=10: a node joins */
    add_node("n3");
    cycle(&w, 10);

    /* t=20: training arrives, a gang of two 8-GPU pods */
    must(us_engine_upsert_workload_json(engine,
                                        "{\"name\": \"train\", \"queue\": \"team\", \"replicas\": 2,"
                                        " \"requests\": {\"gpu\": 8, \"cpu\": \"16\", \"memory\": \"64Gi\"}}",
                                        20, &err), "train");
    cycle(&w, 20);
    /* errors are codes with a message; a refused call changes nothing */
    if (us_engine_remove_queue(engine, "team", &err) != US_OK)
        printf("t=20  refused: %s (%s)\n", err.message, us_strerror(err.code));

    /* t=30: the evicted pods are gone; the engine binds the gang */
    reap(&w, 30, 5);
    cycle(&w, 30);

    /* t=40, 50: steady */
    cycle(&w, 40);
    cycle(&w, 50);

    /* t=60: training finished */
    must(us_engine_complete_workload(engine, "train", 60, &err), "complete train");
    for (size_t i = 0; i < w.n;)
        if (strncmp(w.pods[i].name, "train-", 6) == 0) drop(&w, &w.pods[i]);
        else i++;
    cycle(&w, 60);

    summary();
    int ok = agree(&w);
    printf("%s\n", ok ? "world and engine agree" : "world and engine DISAGREE");
    us_engine_destroy(engine);
    return ok ? 0 : 1;
}
