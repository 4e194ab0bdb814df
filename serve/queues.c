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

#include "cache.h"

struct sv_queues {
    us_engine *engine;
    /* unordered, so that each is a constant-time lookup: a listing of n
     * queues whose parents come later was a scan of every queue per
     * queue, and freeing a chain of them rescanned the waiting list for
     * each one put, cubic in all */
    sv_cache known;    /* the queues the engine has (put, not removed) */
    sv_cache waiting;  /* name -> {"parent": ..., "json": ...} */
    sv_cache children; /* parent -> the names waiting for it (an array, in arrival order) */
};

sv_queues *sv_queues_new(us_engine *e) {
    sv_queues *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->engine = e;
    sv_cache_unordered(&q->known);
    sv_cache_unordered(&q->waiting);
    sv_cache_unordered(&q->children);
    return q;
}

void sv_queues_free(sv_queues *q) {
    if (!q) return;
    sv_cache_clear(&q->known);
    sv_cache_clear(&q->waiting);
    sv_cache_clear(&q->children);
    free(q);
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
    if (sv_cache_put(&q->known, name, NULL, 0) < 0)
        fprintf(stderr, "understory serve: queue %s: out of memory\n", name);
    printf("queue %s: %s\n", name, json);
    fflush(stdout);
    return 0;
}

/* Queue name waits for parent, with json to put then; json is owned. */
static void wait_for(sv_queues *q, const char *name, const char *parent, char *json) {
    cJSON *w = cJSON_CreateObject(), *kids = sv_cache_lookup(&q->children, parent);
    bool ok = w && cJSON_AddStringToObject(w, "parent", parent) && cJSON_AddStringToObject(w, "json", json);
    free(json);
    if (ok && !kids) {
        ok = (kids = cJSON_CreateArray()) && sv_cache_put(&q->children, parent, kids, 0) == 0;
        kids = ok ? sv_cache_lookup(&q->children, parent) : NULL;
    }
    ok = ok && kids && cJSON_AddItemToArray(kids, cJSON_CreateString(name)) && kids->child;
    if (!ok || sv_cache_put(&q->waiting, name, w, 0) < 0) {
        if (!ok) cJSON_Delete(w);
        fprintf(stderr, "understory serve: queue %s: out of memory\n", name);
        return;
    }
    fprintf(stderr, "understory serve: queue %s waits for its parent %s\n", name, parent);
}

/* Queue name waits no more (sent again, or deleted). */
static void unwait(sv_queues *q, const char *name) {
    const cJSON *w = sv_cache_lookup(&q->waiting, name);
    if (!w) return;
    const char *parent = cJSON_GetObjectItemCaseSensitive(w, "parent")->valuestring;
    cJSON *kids = sv_cache_lookup(&q->children, parent);
    for (cJSON *k = kids ? kids->child : NULL; k; k = k->next)
        if (!strcmp(k->valuestring, name)) {
            cJSON_Delete(cJSON_DetachItemViaPointer(kids, k));
            break;
        }
    if (kids && !kids->child) sv_cache_drop(&q->children, parent);
    sv_cache_drop(&q->waiting, name);
}

/* The queues waiting for first, now in the engine, go in, and the ones
 * waiting for them after them: each waiting queue is looked at once. */
static void flush(sv_queues *q, const char *first) {
    cJSON *worklist = cJSON_CreateArray(), *t;
    if (!worklist || !cJSON_AddItemToArray(worklist, cJSON_CreateString(first)) || !worklist->child) {
        cJSON_Delete(worklist);
        fprintf(stderr, "understory serve: queue %s: out of memory\n", first);
        return;
    }
    for (t = worklist->child; t; t = t->next) { /* the names put, appended as they are */
        cJSON *kids = sv_cache_lookup(&q->children, t->valuestring);
        for (const cJSON *k = kids ? kids->child : NULL; k; k = k->next) {
            const cJSON *w = sv_cache_lookup(&q->waiting, k->valuestring);
            if (w && put(q, k->valuestring, cJSON_GetObjectItemCaseSensitive(w, "json")->valuestring) == 0)
                cJSON_AddItemToArray(worklist, cJSON_CreateString(k->valuestring));
            sv_cache_drop(&q->waiting, k->valuestring);
        }
        if (kids) sv_cache_drop(&q->children, t->valuestring);
    }
    cJSON_Delete(worklist);
}

void sv_queues_event(void *ud, sv_event ev, const cJSON *obj) {
    sv_queues *q = ud;
    const cJSON *md = at(obj, "metadata"), *nm = at(md, "name");
    us_error err;
    if (!cJSON_IsString(nm)) return;
    const char *name = nm->valuestring;
    unwait(q, name);
    if (ev == SV_DELETED) {
        if (us_engine_remove_queue(q->engine, name, &err) == US_OK) {
            sv_cache_drop(&q->known, name);
            printf("queue %s: removed\n", name);
        } else {
            fprintf(stderr, "understory serve: queue %s stays: %s\n", name, err.message);
        }
        fflush(stdout);
        return;
    }
    cJSON *o = queue_object(obj, name);
    char *json = o ? cJSON_PrintUnformatted(o) : NULL;
    const cJSON *parent = at(o, "parent");
    if (!json) {
        fprintf(stderr, "understory serve: queue %s: out of memory\n", name);
    } else if (cJSON_IsString(parent) && !sv_cache_has(&q->known, parent->valuestring)) {
        wait_for(q, name, parent->valuestring, json);
        json = NULL; /* owned by the waiting list */
    } else if (put(q, name, json) == 0) {
        flush(q, name);
    }
    free(json);
    cJSON_Delete(o);
}

size_t sv_queues_waiting(const sv_queues *q) { return q->waiting.n; }
