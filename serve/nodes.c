/*
 * nodes.c — Kubernetes Nodes into the engine (nodes.h).
 */
#include "nodes.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "scenario.h"

#define POOL_LABEL "kai.scheduler/node-pool"

struct sv_nodes {
    us_engine *engine;
    sv_cache sent;   /* node name -> the text the engine was last sent (a cJSON string) */
    sv_cache short_; /* node name -> its text, for nodes taken with more than it reports */
};

static const cJSON *at(const cJSON *o, const char *a, const char *b) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    return b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

static const char *str(const cJSON *v) { return cJSON_IsString(v) ? v->valuestring : NULL; }

sv_nodes *sv_nodes_new(us_engine *e) {
    sv_nodes *n = calloc(1, sizeof *n);
    if (n) n->engine = e;
    return n;
}

void sv_nodes_free(sv_nodes *n) {
    if (!n) return;
    sv_cache_clear(&n->sent);
    sv_cache_clear(&n->short_);
    free(n);
}

size_t sv_nodes_short(const sv_nodes *n) { return n ? n->short_.n : 0; }

/* A Kubernetes Node as a scenario-format node object.  NULL when out of
 * memory. */
static cJSON *node_object(const cJSON *n) {
    const char *name = str(at(n, "metadata", "name"));
    const cJSON *alloc = at(n, "status", "allocatable"), *labels = at(n, "metadata", "labels"), *x;
    const char *pool = str(cJSON_GetObjectItemCaseSensitive(labels, POOL_LABEL));
    cJSON *o = cJSON_CreateObject(), *l = NULL, *t = NULL;
    bool ok = o != NULL;
    ok = ok && cJSON_AddStringToObject(o, "name", name ? name : "");
    ok = ok && cJSON_AddStringToObject(o, "pool", pool && *pool ? pool : "default");
    if ((x = cJSON_GetObjectItemCaseSensitive(alloc, "cpu")) && str(x))
        ok = ok && cJSON_AddStringToObject(o, "cpu", str(x));
    if ((x = cJSON_GetObjectItemCaseSensitive(alloc, "memory")) && str(x))
        ok = ok && cJSON_AddStringToObject(o, "memory", str(x));
    x = cJSON_GetObjectItemCaseSensitive(alloc, "nvidia.com/gpu");
    ok = ok && cJSON_AddNumberToObject(o, "gpu", str(x) ? atoi(str(x)) : 0);
    ok = ok && (l = cJSON_AddObjectToObject(o, "labels"));
    cJSON_ArrayForEach(x, labels) if (ok && str(x)) ok = cJSON_AddStringToObject(l, x->string, str(x)) != NULL;
    bool cordoned = cJSON_IsTrue(at(n, "spec", "unschedulable")), ready = false;
    cJSON_ArrayForEach(x, at(n, "status", "conditions")) {
        const char *type = str(cJSON_GetObjectItemCaseSensitive(x, "type"));
        if (type && strcmp(type, "Ready") == 0)
            ready = str(cJSON_GetObjectItemCaseSensitive(x, "status")) &&
                    strcmp(str(cJSON_GetObjectItemCaseSensitive(x, "status")), "True") == 0;
    }
    ok = ok && cJSON_AddBoolToObject(o, "unschedulable", cordoned || !ready);
    const cJSON *taints = at(n, "spec", "taints");
    if (cJSON_GetArraySize(taints) > 0) {
        ok = ok && (t = cJSON_AddArrayToObject(o, "taints"));
        cJSON_ArrayForEach(x, taints) {
            cJSON *e = cJSON_CreateObject();
            static const char *const keys[] = {"key", "value", "effect"};
            ok = ok && e && cJSON_AddItemToArray(t, e);
            for (int i = 0; ok && i < 3; i++) {
                const char *v = str(cJSON_GetObjectItemCaseSensitive(x, keys[i]));
                if (v) ok = cJSON_AddStringToObject(e, keys[i], v) != NULL;
            }
        }
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The node as the engine sees it, one line, with the taints it was given
 * (key=value:effect, comma-separated). */
static void log_node(const sv_nodes *s, const char *name, const cJSON *taints) {
    char tl[512] = "none";
    size_t n = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, taints) {
        const char *k = str(at(t, "key", NULL)), *v = str(at(t, "value", NULL)), *e = str(at(t, "effect", NULL));
        n += (size_t)snprintf(tl + n, n < sizeof tl ? sizeof tl - n : 0, "%s%s%s%s:%s", n ? "," : "",
                              k ? k : "", v ? "=" : "", v ? v : "", e ? e : "");
    }
    us_node_info x;
    if (us_engine_node_named(s->engine, name, &x) != US_OK) return;
    printf("node %s: pool %s, gpu %g, cpu %lldm, memory %lld, taints %s, %s\n", x.name, x.pool,
           x.capacity.gpu, (long long)x.capacity.cpu, (long long)x.capacity.memory, tl,
           x.unschedulable ? "unschedulable" : "schedulable");
    fflush(stdout);
}

/* Node object o with each resource it reports below `to` raised to that;
 * what says which, for the log.  The text, or NULL when none is below, a
 * quantity does not parse, or memory runs out. */
static char *raised(const cJSON *o, us_resources to, char *what, size_t nwhat) {
    int64_t cpu = 0, memory = 0;
    const char *c = str(at(o, "cpu", NULL)), *m = str(at(o, "memory", NULL));
    if ((c && us_parse_cpu(c, &cpu) < 0) || (m && us_parse_memory(m, &memory) < 0)) return NULL;
    double gpu = cJSON_GetNumberValue(at(o, "gpu", NULL));
    cJSON *r = cJSON_Duplicate(o, true);
    if (!r) return NULL;
    char v[32];
    size_t n = 0;
    bool ok = true, any = false;
    what[0] = '\0';
#define RAISE(field, reported, fmt, value)                                                          \
    if ((reported) < (value)) {                                                                     \
        snprintf(v, sizeof v, fmt, value);                                                          \
        cJSON_DeleteItemFromObjectCaseSensitive(r, field);                                          \
        ok = ok && cJSON_AddStringToObject(r, field, v);                                            \
        n += (size_t)snprintf(what + n, n < nwhat ? nwhat - n : 0, "%s%s %s", any ? ", " : "", field, v); \
        any = true;                                                                                 \
    }
    RAISE("cpu", cpu, "%" PRId64 "m", to.cpu)
    RAISE("memory", memory, "%" PRId64, to.memory)
#undef RAISE
    if (gpu < to.gpu) {
        cJSON_DeleteItemFromObjectCaseSensitive(r, "gpu");
        ok = ok && cJSON_AddNumberToObject(r, "gpu", to.gpu);
        n += (size_t)snprintf(what + n, n < nwhat ? nwhat - n : 0, "%sgpu %g", any ? ", " : "", to.gpu);
        any = true;
    }
    char *text = ok && any ? cJSON_PrintUnformatted(r) : NULL;
    cJSON_Delete(r);
    return text;
}

/* Node object o with what it reports below to raised to that, sent:
 * true when the engine took it (false too when nothing is below to). */
static bool send_raised(sv_nodes *s, const cJSON *o, us_resources to, char *what, size_t nwhat) {
    us_error err;
    char *up = raised(o, to, what, nwhat);
    bool in = up && us_engine_upsert_node_json(s->engine, up, &err) == US_OK;
    free(up);
    return in;
}

/* Node object o raised (nodes.h) and sent, x being the engine's node
 * before: to what its pods hold; else, when fractional pods hold more
 * devices than their sum, to the fewest devices that hold them; else
 * (pods planned there) to the capacity it had.  Which one went in (*as),
 * what was raised (what); false when the engine took none. */
static bool take_raised(sv_nodes *s, const cJSON *o, const us_node_info *x, const char **as, char *what,
                        size_t nwhat) {
    us_resources held = x->used;
    held.gpu = ceil(held.gpu); /* whole devices */
    *as = "what its pods hold";
    if (send_raised(s, o, held, what, nwhat)) return true;
    *as = "the devices its pods hold";
    for (us_resources d = held; ++d.gpu <= x->capacity.gpu;)
        if (send_raised(s, o, d, what, nwhat)) return true;
    *as = "the capacity it had";
    return send_raised(s, o, x->capacity, what, nwhat);
}

/* Send node object o (text: its JSON) as it reports itself, or, when its
 * pods hold more than that, raised (nodes.h); true when the engine took
 * one of them.  Logs the node when the engine's view of it changed
 * (always, when log_always). */
static bool take(sv_nodes *s, const cJSON *o, const char *text, bool log_always) {
    us_error err;
    const char *name = str(at(o, "name", NULL));
    us_node_info before;
    bool had = us_engine_node_named(s->engine, name, &before) == US_OK;
    if (us_engine_upsert_node_json(s->engine, text, &err) == US_OK) {
        if (sv_cache_has(&s->short_, name)) {
            sv_cache_drop(&s->short_, name);
            printf("node %s: its pods left room for the capacity it reports\n", name);
        }
        log_node(s, name, at(o, "taints", NULL));
        return true;
    }
    char what[160];
    const char *as = NULL;
    bool in = had && take_raised(s, o, &before, &as, what, sizeof what);
    if (!in) {
        sv_cache_drop(&s->short_, name);
        fprintf(stderr, "understory serve: node %s not taken: %s\n", name, err.message);
        return false;
    }
    us_node_info now; /* taken raised: it was in the engine (had), as before */
    bool moved = us_engine_node_named(s->engine, name, &now) == US_OK &&
                 (now.capacity.gpu != before.capacity.gpu || now.capacity.cpu != before.capacity.cpu ||
                  now.capacity.memory != before.capacity.memory);
    cJSON *copy = cJSON_CreateString(text);
    bool known = sv_cache_has(&s->short_, name);
    if (!copy || sv_cache_put(&s->short_, name, copy, 0) < 0)
        fprintf(stderr, "understory serve: node %s: out of memory\n", name);
    if (!known || moved)
        printf("node %s: reports less than its pods hold; taken with %s (%s) until they leave room\n", name, what,
               as);
    if (!known || moved || log_always) log_node(s, name, at(o, "taints", NULL));
    return true;
}

void sv_nodes_event(sv_nodes *s, sv_event ev, const cJSON *n) {
    us_error err;
    const char *name = str(at(n, "metadata", "name"));
    if (!name) return;
    if (ev == SV_DELETED) {
        sv_cache_drop(&s->sent, name);
        sv_cache_drop(&s->short_, name);
        if (us_engine_remove_node(s->engine, name, &err) == US_OK) printf("node %s: removed\n", name);
        fflush(stdout);
        return;
    }
    cJSON *o = node_object(n);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    const cJSON *sent = sv_cache_lookup(&s->sent, name);
    if (!text) {
        fprintf(stderr, "understory serve: node %s: out of memory\n", name);
    } else if (sent && strcmp(sent->valuestring, text) == 0) {
        /* nothing the engine sees changed (a status heartbeat, say): a
         * node sends those all the time, and each would be a change */
    } else if (!take(s, o, text, true)) {
        sv_cache_drop(&s->sent, name);
    } else if (sv_cache_put(&s->sent, name, cJSON_CreateString(text), 0) < 0) {
        sv_cache_drop(&s->sent, name); /* out of memory: sent again next time */
    }
    fflush(stdout);
    free(text);
    cJSON_Delete(o);
}

void sv_nodes_retry(sv_nodes *s) {
    /* take may drop the entry it retries (and no other): walk from the end */
    for (size_t i = s->short_.n; i-- > 0;) {
        const char *text = s->short_.objs[i]->valuestring;
        cJSON *o = cJSON_Parse(text);
        if (!o) continue; /* out of memory: tried again next time */
        char *again = strdup(text);
        if (again) take(s, o, again, false);
        free(again);
        cJSON_Delete(o);
    }
    fflush(stdout);
}
