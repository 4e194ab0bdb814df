/*
 * replay.c — drives a scenario file through the embedding API the way the
 * simulator drives it (sim.c), and prints every cycle's decisions and
 * events as normalized lines, so that tests/cli/embed-equivalence.sh can
 * compare them with the command line's and the Lua module's.
 *
 *   replay SCENARIO.json [--policies DIR] [--plain-ties]
 *   replay --from-output OUTPUT.json     (the same lines from the
 *                                         `understory simulate --json` document)
 *
 * Line format, one per decision or event, in cycle order:
 *   t=30 pipeline train-1-0 n4 action=allocate waits=gpu-burn-5,gpu-burn-6
 *   t=30 event Normal Evict gpu-burn "Evicted ..." evictor-action-type=backgroundpods ...
 *
 * A test tool: it uses only the public header plus cJSON to read files,
 * and exits non-zero with a message on any error.  The scenario must set
 * `horizon` (the simulator's quiet-stop rule is not replayed).
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "understory.h"

static void die(const char *what, const char *msg) {
    fprintf(stderr, "replay: %s: %s\n", what, msg);
    exit(1);
}

static cJSON *read_json(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0;
    cJSON *doc;
    if (!f) die(path, "cannot open");
    for (;;) {
        if (n + 4096 > cap) {
            cap = cap ? cap * 2 : 65536;
            if (!(buf = realloc(buf, cap))) die(path, "out of memory");
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (k == 0) break;
    }
    fclose(f);
    buf[n] = '\0';
    if (!(doc = cJSON_Parse(buf))) die(path, "invalid JSON");
    free(buf);
    return doc;
}

static double num(const cJSON *o, const char *key, double def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- printing ---------------------------------------------------------------- */

static void print_decision(double t, const char *op, const char *pod, const char *node,
                           const char *action, const char *evictor, const char *const *waits,
                           size_t nwaits) {
    printf("t=%g %s %s %s", t, op, pod, node ? node : "-");
    if (action) printf(" action=%s", action);
    if (evictor) printf(" evictor=%s", evictor);
    if (waits) {
        printf(" waits=");
        for (size_t i = 0; i < nwaits; i++) printf("%s%s", i ? "," : "", waits[i]);
    }
    printf("\n");
}

static void print_event(double t, const char *type, const char *reason, const char *object,
                        const char *message, const us_label *ann, size_t nann) {
    printf("t=%g event %s %s %s \"%s\"", t, type, reason, object, message);
    for (size_t i = 0; i < nann; i++) printf(" %s=%s", ann[i].key, ann[i].value);
    printf("\n");
}

/* ---- the CLI's document -------------------------------------------------------- */

static int from_output(const char *path) {
    cJSON *doc = read_json(path), *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "cycles")) {
        double t = num(c, "time", 0);
        cJSON *d, *ev;
        cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(c, "decisions")) {
            const cJSON *w = cJSON_GetObjectItemCaseSensitive(d, "waits_for"), *x;
            const char *waits[256];
            size_t nw = 0;
            cJSON_ArrayForEach(x, w) if (nw < 256) waits[nw++] = x->valuestring;
            print_decision(t, str(d, "op"), str(d, "pod"), str(d, "node"), str(d, "action"),
                           str(d, "evictor"), w ? waits : NULL, nw);
        }
        cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(c, "events")) {
            us_label ann[16];
            size_t na = 0;
            const cJSON *a;
            cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(ev, "annotations")) if (na < 16)
                ann[na++] = (us_label){a->string, a->valuestring};
            print_event(t, str(ev, "type"), str(ev, "reason"), str(ev, "object"), str(ev, "message"),
                        ann, na);
        }
    }
    cJSON_Delete(doc);
    return 0;
}

/* ---- the replay ------------------------------------------------------------------- */

typedef struct wl {
    cJSON *obj;          /* the workload object, simulator fields removed */
    const char *name;
    double submit_at, duration;
    cJSON *pods;         /* pre-existing pods (detached), or NULL */
    int state;           /* 0 waiting, 1 active, 2 finished */
} wl;

static us_engine *E;
static us_error err;

static void call(int rc, const char *what) {
    if (rc != US_OK) die(what, err.message);
}

static void upsert_json(int (*fn)(us_engine *, const char *, us_error *), const cJSON *o,
                        const char *what) {
    char *text = cJSON_PrintUnformatted(o);
    if (!text) die(what, "out of memory");
    call(fn(E, text, &err), what);
    free(text);
}

static wl *find_wl(wl *w, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(w[i].name, name) == 0) return &w[i];
    return NULL;
}

static cJSON *find_named(cJSON **objs, size_t n, const char *name) {
    for (size_t i = n; i-- > 0;)
        if (strcmp(str(objs[i], "name"), name) == 0) return objs[i];
    return NULL;
}

static void submit(wl *w, double t) {
    char *text = cJSON_PrintUnformatted(w->obj), pname[512];
    const cJSON *p;
    int i = 0;
    if (!text) die(w->name, "out of memory");
    call(us_engine_upsert_workload_json(E, text, t, &err), w->name);
    free(text);
    w->state = 1;
    /* its pre-existing pods run where the scenario says */
    cJSON_ArrayForEach(p, w->pods) {
        const char *ctrl = str(w->obj, "controller"), *node = str(p, "node");
        us_pod_spec ps = {.name = str(p, "name"), .workload = w->name, .node = node};
        if (!ps.name) {
            if (ctrl && strcmp(ctrl, "daemonset") == 0) snprintf(pname, sizeof pname, "%s-%s", w->name, node);
            else snprintf(pname, sizeof pname, "%s-%d", w->name, i);
            ps.name = pname;
        }
        call(us_engine_upsert_pod(E, &ps, &err), ps.name);
        i++;
    }
}

static int replay(const char *path, const char *policies, int plain_ties) {
    cJSON *doc = read_json(path), *o, *tl = cJSON_GetObjectItemCaseSensitive(doc, "timeline");
    double interval = num(doc, "cycle_interval", 10), horizon = num(doc, "horizon", -1);
    us_engine_options opts;
    size_t nw = 0, nn = 0, ntl = (size_t)cJSON_GetArraySize(tl), nq, added = 0;
    wl *w = calloc(256, sizeof *w);
    cJSON **nodes = calloc(256, sizeof *nodes), **entries = calloc(ntl + 1, sizeof *entries);
    if (!w || !nodes || !entries) die(path, "out of memory");
    if (horizon < 0) die(path, "the replay needs a horizon");

    us_engine_options_init(&opts);
    opts.policies = policies;
    opts.plain_ties = plain_ties;
    opts.long_grace = 30;
    call(us_engine_create(&opts, &E, &err), "create");

    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(doc, "nodes")) {
        upsert_json(us_engine_upsert_node_json, o, "node");
        nodes[nn++] = o;
    }
    /* parents first: a queue may name a parent that comes later */
    nq = (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "queues"));
    char *done = calloc(nq + 1, 1);
    while (added < nq) {
        size_t before = added, i = 0;
        cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(doc, "queues")) {
            const char *parent = str(o, "parent");
            us_queue_info qi;
            bool ready = !parent;
            for (size_t k = 0; !ready && us_engine_queue(E, k, &qi) == US_OK; k++)
                ready = strcmp(qi.name, parent) == 0;
            if (!done[i] && ready) {
                upsert_json(us_engine_upsert_queue_json, o, "queue");
                done[i] = 1;
                added++;
            }
            i++;
        }
        if (added == before) die(path, "queue parents make a cycle");
    }
    free(done);

    /* workloads in the simulator's order: the file's, then timeline submits */
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(doc, "workloads")) w[nw++].obj = o;
    cJSON_ArrayForEach(o, tl) {
        cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "workload");
        if (cJSON_IsObject(x)) {
            w[nw].obj = x;
            w[nw++].submit_at = num(o, "at", 0);
        }
    }
    for (size_t i = 0; i < nw; i++) {
        if (!w[i].submit_at) w[i].submit_at = num(w[i].obj, "submit_at", 0);
        w[i].duration = num(w[i].obj, "duration", -1);
        w[i].name = str(w[i].obj, "name");
        w[i].pods = cJSON_DetachItemFromObjectCaseSensitive(w[i].obj, "pods");
        cJSON_DeleteItemFromObjectCaseSensitive(w[i].obj, "submit_at");
        cJSON_DeleteItemFromObjectCaseSensitive(w[i].obj, "duration");
    }
    /* the timeline, stably sorted by time */
    size_t k = 0;
    cJSON_ArrayForEach(o, tl) entries[k++] = o;
    for (size_t i = 1; i < ntl; i++)
        for (size_t j = i; j > 0 && num(entries[j], "at", 0) < num(entries[j - 1], "at", 0); j--) {
            cJSON *x = entries[j];
            entries[j] = entries[j - 1];
            entries[j - 1] = x;
        }
    for (size_t i = 0; i < ntl; i++) {
        cJSON *x = cJSON_GetObjectItemCaseSensitive(entries[i], "workload");
        if (strcmp(str(entries[i], "action"), "submit") == 0 && cJSON_IsString(x))
            find_wl(w, nw, x->valuestring)->submit_at = num(entries[i], "at", 0);
    }

    size_t next = 0;
    for (int c = 0; c < 1000; c++) {
        double t = c * interval;
        size_t first = next;
        if (t > horizon) break;
        for (; next < ntl && num(entries[next], "at", 0) <= t; next++) {
            cJSON *e = entries[next];
            const char *a = str(e, "action"), *name = str(e, "workload");
            if (!name) name = str(e, "node");
            if (strcmp(a, "delete") == 0 || strcmp(a, "complete") == 0) {
                wl *x = find_wl(w, nw, name);
                if (x->state == 1)
                    call(a[0] == 'd' ? us_engine_remove_workload(E, name, t, &err)
                                     : us_engine_complete_workload(E, name, t, &err), a);
                if (x->state == 0 && a[0] == 'd') x->state = 2; /* never submitted */
                else if (x->state == 1) x->state = 2;
            } else if (strcmp(a, "add_node") == 0) {
                cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "node");
                upsert_json(us_engine_upsert_node_json, n, a);
                nodes[nn++] = n;
            } else if (strcmp(a, "remove_node") == 0) {
                call(us_engine_remove_node(E, name, &err), a);
            } else if (strcmp(a, "cordon") == 0 || strcmp(a, "uncordon") == 0) {
                cJSON *n = find_named(nodes, nn, name);
                cJSON_DeleteItemFromObjectCaseSensitive(n, "unschedulable");
                cJSON_AddBoolToObject(n, "unschedulable", a[0] == 'c');
                upsert_json(us_engine_upsert_node_json, n, a);
            }
        }
        for (size_t i = 0; i < nw; i++) {
            if (w[i].state == 0 && w[i].submit_at <= t) {
                submit(&w[i], t);
            } else if (w[i].state == 1 && w[i].duration >= 0) {
                for (size_t j = 0; j < us_engine_workload_count(E); j++) {
                    us_workload_info wi;
                    us_engine_workload(E, j, &wi);
                    if (wi.phase != US_WORKLOAD_ACTIVE || strcmp(wi.name, w[i].name) != 0) continue;
                    if (wi.running_since >= 0 && wi.running_since + w[i].duration <= t) {
                        call(us_engine_complete_workload(E, w[i].name, t, &err), "complete");
                        w[i].state = 2;
                    }
                    break;
                }
            }
        }
        /* reloads last, as the simulator does: their dry run sees the
         * state this cycle starts from */
        for (size_t i = first; i < next; i++) {
            char dir[1024];
            const char *slash = strrchr(path, '/'), *d = str(entries[i], "dir");
            if (strcmp(str(entries[i], "action"), "reload_policies") != 0) continue;
            if (d[0] == '/' || !slash) snprintf(dir, sizeof dir, "%s", d);
            else snprintf(dir, sizeof dir, "%.*s/%s", (int)(slash - path), path, d);
            int rc = us_engine_reload_policies(E, dir, &err);
            if (rc != US_OK && rc != US_EPOLICY) die(dir, err.message); /* refused: the old stays */
        }
        call(us_engine_run_cycle(E, t, &err), "cycle");
        for (size_t i = 0; i < us_engine_decision_count(E); i++) {
            us_decision_info d;
            us_engine_decision(E, i, &d);
            print_decision(t, d.op_name, d.pod, d.node, d.action, d.evictor,
                           d.op == US_DECISION_PIPELINE ? d.waits_for : NULL, d.nwaits_for);
        }
        for (size_t i = 0; i < us_engine_event_count(E); i++) {
            us_event_info ev;
            us_engine_event(E, i, &ev);
            print_event(t, ev.type, ev.reason, ev.object, ev.message, ev.annotations, ev.nannotations);
        }
    }
    us_engine_destroy(E);
    for (size_t i = 0; i < nw; i++) cJSON_Delete(w[i].pods);
    free(w);
    free(nodes);
    free(entries);
    cJSON_Delete(doc);
    return 0;
}

int main(int argc, char **argv) {
    const char *policies = NULL, *file = NULL;
    int plain = 0;
    if (argc == 3 && strcmp(argv[1], "--from-output") == 0) return from_output(argv[2]);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--policies") == 0 && i + 1 < argc) policies = argv[++i];
        else if (strcmp(argv[i], "--plain-ties") == 0) plain = 1;
        else if (!file) file = argv[i];
        else die("usage", "replay SCENARIO.json [--policies DIR] [--plain-ties]");
    }
    if (!file) die("usage", "replay SCENARIO.json [--policies DIR] [--plain-ties]");
    return replay(file, policies, plain);
}
