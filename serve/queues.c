/*
 * queues.c — KAI's Queue objects (scheduling.run.ai/v2) fed to the engine
 * as queues of the scenario format, through the public API only.  Units
 * are KAI's: GPUs, millicores, and megabytes (10^6 bytes) for memory; -1
 * is unlimited.  A queue whose parent has not arrived yet waits for it
 * (informers list in name order, not tree order).  Owns only that waiting
 * list; it never decides anything about scheduling.
 */
#include "queues.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct waiting {
    char *name, *parent, *json;
} waiting;

struct sv_queues {
    us_engine *engine;
    waiting *w;
    size_t n, cap;
};

sv_queues *sv_queues_new(us_engine *e) {
    sv_queues *q = calloc(1, sizeof *q);
    if (q) q->engine = e;
    return q;
}

static void drop(sv_queues *q, size_t i) {
    free(q->w[i].name);
    free(q->w[i].parent);
    free(q->w[i].json);
    q->w[i] = q->w[--q->n];
}

void sv_queues_free(sv_queues *q) {
    if (!q) return;
    while (q->n) drop(q, q->n - 1);
    free(q->w);
    free(q);
}

static bool engine_has(const us_engine *e, const char *name) {
    for (size_t i = 0; i < us_engine_queue_count(e); i++) {
        us_queue_info x;
        if (us_engine_queue(e, i, &x) == US_OK && strcmp(x.name, name) == 0) return true;
    }
    return false;
}

static const cJSON *at(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* One resource of spec.resources into the scenario's {quota, limit,
 * over_quota_weight}, converting units; false when out of memory. */
static bool resource(cJSON *dst, const cJSON *src, const char *name) {
    static const char *const from[] = {"quota", "limit", "overQuotaWeight"};
    static const char *const to[] = {"quota", "limit", "over_quota_weight"};
    const cJSON *r = at(src, name);
    if (!cJSON_IsObject(r)) return true;
    cJSON *o = cJSON_AddObjectToObject(dst, name);
    if (!o) return false;
    for (int i = 0; i < 3; i++) {
        const cJSON *v = at(r, from[i]);
        char buf[64];
        if (!cJSON_IsNumber(v)) continue;
        double d = v->valuedouble;
        bool ok;
        if (i == 2 || d == -1 || strcmp(name, "gpu") == 0) {
            ok = cJSON_AddNumberToObject(o, to[i], d) != NULL;
        } else { /* KAI: cpu in millicores, memory in megabytes */
            snprintf(buf, sizeof buf, strcmp(name, "cpu") == 0 ? "%.0fm" : "%.0f",
                     strcmp(name, "cpu") == 0 ? d : d * 1e6);
            ok = cJSON_AddStringToObject(o, to[i], buf) != NULL;
        }
        if (!ok) return false;
    }
    return true;
}

/* The scenario-format queue of a Queue object; NULL when out of memory. */
static cJSON *queue_object(const cJSON *obj, const char *name) {
    const cJSON *spec = at(obj, "spec"), *parent = at(spec, "parentQueue"), *prio = at(spec, "priority");
    cJSON *o = cJSON_CreateObject(), *res = NULL;
    bool ok = o && cJSON_AddStringToObject(o, "name", name);
    if (ok && cJSON_IsString(parent) && *parent->valuestring)
        ok = cJSON_AddStringToObject(o, "parent", parent->valuestring) != NULL;
    /* KAI's default priority is 100 */
    ok = ok && cJSON_AddNumberToObject(o, "priority", cJSON_IsNumber(prio) ? prio->valuedouble : 100);
    ok = ok && (res = cJSON_AddObjectToObject(o, "resources"));
    const cJSON *r = at(spec, "resources");
    ok = ok && resource(res, r, "gpu") && resource(res, r, "cpu") && resource(res, r, "memory");
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Upsert json now; 0, or -1 (logged). */
static int put(sv_queues *q, const char *name, const char *json) {
    us_error err;
    if (us_engine_upsert_queue_json(q->engine, json, &err) != US_OK) {
        fprintf(stderr, "understory serve: queue %s not taken: %s\n", name, err.message);
        return -1;
    }
    printf("queue %s: %s\n", name, json);
    fflush(stdout);
    return 0;
}

/* Queues waiting for a parent that is now there go in, until none can. */
static void flush(sv_queues *q) {
    bool progress = true;
    while (progress) {
        progress = false;
        for (size_t i = 0; i < q->n; i++)
            if (engine_has(q->engine, q->w[i].parent)) {
                put(q, q->w[i].name, q->w[i].json);
                drop(q, i);
                progress = true;
                break;
            }
    }
}

static void unwait(sv_queues *q, const char *name) {
    for (size_t i = 0; i < q->n; i++)
        if (strcmp(q->w[i].name, name) == 0) {
            drop(q, i);
            return;
        }
}

void sv_queues_event(void *ud, sv_event ev, const cJSON *obj) {
    sv_queues *q = ud;
    const cJSON *md = at(obj, "metadata"), *nm = at(md, "name");
    us_error err;
    if (!cJSON_IsString(nm)) return;
    const char *name = nm->valuestring;
    unwait(q, name);
    if (ev == SV_DELETED) {
        if (us_engine_remove_queue(q->engine, name, &err) == US_OK) printf("queue %s: removed\n", name);
        else fprintf(stderr, "understory serve: queue %s stays: %s\n", name, err.message);
        fflush(stdout);
        return;
    }
    cJSON *o = queue_object(obj, name);
    char *json = o ? cJSON_PrintUnformatted(o) : NULL;
    const cJSON *parent = at(o, "parent");
    if (!json) {
        fprintf(stderr, "understory serve: queue %s: out of memory\n", name);
    } else if (cJSON_IsString(parent) && !engine_has(q->engine, parent->valuestring)) {
        if (q->n == q->cap) {
            size_t ncap = q->cap ? q->cap * 2 : 8;
            waiting *w = realloc(q->w, ncap * sizeof *w);
            if (!w) goto done;
            q->w = w;
            q->cap = ncap;
        }
        waiting x = {strdup(name), strdup(parent->valuestring), json};
        if (!x.name || !x.parent) {
            free(x.name);
            free(x.parent);
            goto done;
        }
        q->w[q->n++] = x;
        json = NULL; /* owned by the waiting list */
        fprintf(stderr, "understory serve: queue %s waits for its parent %s\n", name, x.parent);
    } else if (put(q, name, json) == 0) {
        flush(q);
    }
done:
    free(json);
    cJSON_Delete(o);
}

size_t sv_queues_waiting(const sv_queues *q) { return q->n; }
