/*
 * api.c — the embedding API of bindings/understory.h on top of the engine:
 * the handle (a cluster state, its policies, the last cycle's log and queue
 * figures, the event callback), and every call of the header.
 *
 * C specs are turned into objects of the scenario format and validated by
 * scenario.c, like JSON, so both paths accept and refuse the same things
 * with the same messages.  State changes go through lifecycle.c, cycles
 * through cycle.c, hot reload through reload.c.
 *
 * It owns the handle and every string it hands out.  It must never change
 * the state on a refused call (every check comes before the first change),
 * never call the caller except through the event callback once a cycle is
 * over, and never abort or exit.
 */
#include "understory.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiprofile.h"
#include "cycle.h"
#include "cyclecache.h"
#include "ledger.h"
#include "error.h"
#include "events.h"
#include "jsonw.h"
#include "lifecycle.h"
#include "plan.h"
#include "policy.h"
#include "reload.h"
#include "statejson.h"
#include "scenario.h"
#include "sort.h"
#include "state.h"
#include "strmap.h"
#include "utf8.h"

/* Names of an array of objects (workloads, nodes) -> their indices, open
 * addressing.  Objects are appended (indexed incrementally) or renumbered
 * by tidy or rollback (marked stale: rebuilt).  A name may be held by
 * several entries (a removed node and its successor): lookups check. */
typedef struct name_index {
    int *slot;                    /* [cap]: an index into the array, or -1 */
    size_t cap, n;                /* indexed: the array's first n */
    bool stale;
} name_index;

/* Pods by a node field (node or pin), each list in pod order. */
typedef struct pod_list {
    int *head;                    /* [nnodes]: the first pod, or -1 */
    int *next;                    /* [npods]: the next pod of the same node, or -1 */
} pod_list;

/* Where a pod report looks (see pods_index): the pods on each node, the
 * pods pinned to each, and each workload's pending pods not yet named,
 * newest first, from a cursor past the ones named since. */
typedef struct pod_index {
    bool valid;
    pod_list on, pinned;
    pod_list of;                  /* the pods of each workload (heads [nworkloads]), in no order */
    int *cand;                    /* pods, grouped by workload */
    size_t *cfirst;               /* [nworkloads + 1]: workload w's are cand[cfirst[w]..cfirst[w + 1]) */
    size_t *ccur;                 /* [nworkloads]: none before cand[ccur[w]] is a candidate any more */
    /* pending places made since the build (a terminating pod's
     * replacement, a pod lost and recreated), newer than every one in
     * cand: each workload's newest first */
    int *fresh_head;              /* [nworkloads]: the first, or -1 */
    int *fresh_next;              /* [cap]: the next of the same workload, or -1; -2: not listed */
    size_t cap;                   /* pods the next arrays have room for */
    size_t nw;                    /* workloads the per-workload arrays have room for */
    size_t nn;                    /* nodes the per-node arrays have room for */
} pod_index;

/* An array read by index (us_engine_pod, us_engine_workload) whose
 * entries the caller does not see (hidden) stay in it a while: the hidden
 * positions, ascending, found by one pass at the first read after a change,
 * so that the i-th entry listed is found by a binary search.  Not built
 * while none is hidden. */
typedef struct listing {
    bool valid;
    int *hidden;
    size_t n, cap;
} listing;

struct us_engine {
    us_state st;
    us_policy *pol;               /* NULL: the built-in C policies */
    us_cycle_opts copts;
    us_policy_limits limits;
    double now;                   /* latest time given */
    uint64_t cycles;

    /* events made between cycles (policy reloads), which open the next
     * cycle's events as they do in the simulator */
    us_cycle_log pending;

    /* the last cycle */
    us_cycle_log log;
    char **dec_workload;          /* [log.ndecisions]: workload of each decision's pod */
    us_label *ann;                /* every event's annotations, flattened */
    size_t *ann_first;            /* [log.nevents]: offset into ann */
    us_queue_figures *figs;       /* [nfigs], by queue index; later queues have none */
    size_t nfigs;

    us_cycle_profile prof;        /* the last cycle's phases (us_engine_cycle_phase) */

    us_event_cb cb;
    void *cb_data;
    bool busy;                    /* inside the event callback */
    bool untidy;                  /* pods marked gone await tidy (see settle) */
    size_t untidy_calls;          /* changes made since, with tidy not yet due */
    bool unsubmitted;             /* new workloads await their pods (see settle) */
    bool underived;               /* background rules await a check (see settle) */
    size_t new_from;              /* workloads from this index on are the new ones */

    /* what the pods on each node hold (us_engine_node), built on the first
     * read after a change; NULL until then */
    us_res *node_used;            /* [st.nnodes] */
    /* pods gone and finished workloads whose pods are all gone stay in
     * the state's arrays until a compaction is due (us_state.gone_share):
     * the listings by index pass over them (see listing) */
    listing pod_listing, wl_listing;
    /* where pod reports look, built by the first report after another
     * change and kept while reports follow one another (see pods_index) */
    pod_index pods;
    unsigned reports_in_row;      /* pod reports since the last other change */

    name_index wnames;            /* workload name -> indices (see find_workload) */
    name_index nnames;            /* node name -> indices (see find_node) */

    /* pod name -> pod positions, open addressing (see find_pod): each as
     * the state numbered it at names_gen, followed to now through the
     * compactions since (droplog.h); the pods before names_end, as
     * numbered at names_end_gen, are in it */
    int *names;                   /* [ncap]: a position at names_gen, or -1 */
    size_t ncap, names_end, names_used;
    uint64_t names_gen, names_end_gen;
    bool names_stale;
    const char *broken;           /* checking builds: an invariant a call found
                                     broken, reported by the next cycle */
};

/* ---- errors ------------------------------------------------------------------ */

US_API const char *us_version(void) { return UNDERSTORY_VERSION_STRING; }

US_API const char *us_strerror(int code) {
    switch (code) {
    case US_OK: return "success";
    case US_EINVAL: return "invalid input";
    case US_ENOMEM: return "out of memory";
    case US_EIO: return "input/output error";
    case US_EPOLICY: return "policy error";
    case US_ENOENT: return "no such object";
    case US_EBUSY: return "busy";
    case US_EINVARIANT: return "invariant broken";
    default: return "unknown error";
    }
}

static int ok(us_error *err) {
    if (err) {
        err->code = US_OK;
        err->message[0] = '\0';
    }
    return US_OK;
}

static int fail(us_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(us_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        us_text_escape(err->message, sizeof err->message);
    }
    return code;
}

/* An internal error, passed on (its code is a public one). */
static int fail_from(us_error *err, const us_err *in) {
    int code = in->code ? in->code : US_EINVAL;
    return fail(err, code, "%s", in->msg);
}

static int nomem(us_error *err) { return fail(err, US_ENOMEM, "out of memory"); }

static void settle(const us_engine *ce);
static void settle_change(us_engine *e);
static void settle_new(us_engine *e);
static void forget_reads(us_engine *e);
static void forget_used(us_engine *e);
static void pods_forget(us_engine *e);
static void pods_index_workloads(us_engine *e);
static void pods_index_nodes(us_engine *e);
static pod_index *pods_index(us_engine *e);
static void pods_index_add(us_engine *e, int p, bool appended);
static void pods_index_add_from(us_engine *e, size_t from);
static int workload_pods(us_engine *e, int w, int **out, size_t *n);

/* Refuse calls without a handle and calls that change the engine from
 * inside its event callback. */
#define GUARD_HANDLE(e, err)                                                                  \
    do {                                                                                      \
        if (!(e)) return fail(err, US_EINVAL, "engine: NULL handle");                         \
        if ((e)->busy)                                                                        \
            return fail(err, US_EBUSY, "the engine cannot change inside its event callback"); \
    } while (0)

/* The same, and the read caches go: the engine is about to change. */
#define GUARD_ONLY(e, err)     \
    do {                       \
        GUARD_HANDLE(e, err);  \
        forget_reads(e);       \
    } while (0)

/* The same for the calls of a control plane's stream of watched objects
 * (pods reported or removed, workloads removed, nodes sent or removed),
 * which keep the pod index (see pods_index) and settle first. */
#define GUARD_POD(e, err)          \
    do {                           \
        GUARD_HANDLE(e, err);      \
        forget_used(e);            \
        settle_change(e);          \
        (e)->reports_in_row++;     \
    } while (0)

/* The same for a workload sent (it is part of a control plane's pod
 * stream: each workload synced, then its pods): the pod index stays, and
 * nothing is settled (submissions batch up, see settle). */
#define GUARD_WORKLOAD(e, err) \
    do {                       \
        GUARD_HANDLE(e, err);  \
        forget_used(e);        \
    } while (0)

/* The same as GUARD_ONLY, then settle what earlier calls left for later. */
#define GUARD_CHANGE(e, err)  \
    do {                      \
        GUARD_ONLY(e, err);   \
        settle_change(e);     \
    } while (0)

/* A time the engine may move to. */
static int check_time(const us_engine *e, double now, us_error *err) {
    if (!isfinite(now)) return fail(err, US_EINVAL, "now: %g is not a finite time", now);
    if (now < e->now)
        return fail(err, US_EINVAL, "now: %g is before the engine's time %g (time never goes back)",
                    now, e->now);
    return US_OK;
}

/* ---- the handle ------------------------------------------------------------------ */

US_API void us_engine_options_init(us_engine_options *o) {
    memset(o, 0, sizeof *o);
    o->long_grace = 30;
}

US_API void us_queue_spec_init(us_queue_spec *q) {
    memset(q, 0, sizeof *q);
    q->limit = (us_resources){-1, -1, -1};
    q->over_quota_weight = (us_weights){1, 1, 1};
}

US_API void us_workload_spec_init(us_workload_spec *w) {
    memset(w, 0, sizeof *w);
    w->priority = US_PRIORITY_TRAIN;
    w->replicas = 1;
    w->termination_grace = 30;
}

static void free_cycle(us_engine *e) {
    for (size_t i = 0; e->dec_workload && i < e->log.ndecisions; i++) free(e->dec_workload[i]);
    free(e->dec_workload);
    free(e->ann);
    free(e->ann_first);
    us_cycle_log_free(&e->log);
    e->dec_workload = NULL;
    e->ann = NULL;
    e->ann_first = NULL;
}

US_API void us_engine_destroy(us_engine *e) {
    /* from inside the event callback the cycle still uses e: refused */
    if (!e || e->busy) return;
    free_cycle(e);
    us_cycle_log_free(&e->pending);
    free(e->names);
    free(e->pod_listing.hidden);
    free(e->wl_listing.hidden);
    free(e->wnames.slot);
    free(e->nnames.slot);
    forget_reads(e);
    free(e->figs);
    us_policy_free(e->pol);
    us_cycle_cache_free(e->copts.cache);
    us_state_free(&e->st);
    free(e);
}

US_API int us_engine_create(const us_engine_options *o, us_engine **out, us_error *err) {
    us_engine_options defaults;
    us_engine *e = NULL;
    int rc;
    if (!out) return fail(err, US_EINVAL, "out: NULL");
    *out = NULL;
    if (!o) {
        us_engine_options_init(&defaults);
        o = &defaults;
    }
    if (!isfinite(o->long_grace) || o->long_grace < 0)
        return fail(err, US_EINVAL, "options.long_grace: %g is not a number of seconds >= 0",
                    o->long_grace);
    if (!isfinite(o->cycle_budget) || o->cycle_budget < 0)
        return fail(err, US_EINVAL, "options.cycle_budget: %g is not a number of seconds >= 0",
                    o->cycle_budget);
    if (!(e = calloc(1, sizeof *e))) return nomem(err);
    us_state_init(&e->st);
    us_cycle_log_init(&e->log);
    us_cycle_log_init(&e->pending);
    us_cycle_opts_default(&e->copts);
    e->copts.background_aware_ties = !o->plain_ties;
    e->copts.long_grace = o->long_grace;
    if (o->check_invariants) e->copts.check_invariants = true;
    e->copts.reported_pods = o->reported_pods != 0;
    e->limits.instructions = o->instructions;
    e->limits.memory = o->memory;
    e->limits.time_ms = o->time_limit_ms;
    if (o->cycle_budget > 0) e->copts.cycle_budget = o->cycle_budget;
    /* what each cycle leaves for the next, unless every cycle is a full one */
    if (!o->full_cycles && !(e->copts.cache = us_cycle_cache_new())) {
        us_engine_destroy(e);
        return nomem(err);
    }
    if (o->policies && (rc = us_engine_load_policies(e, o->policies, err)) != US_OK) {
        us_engine_destroy(e);
        return rc;
    }
    *out = e;
    return ok(err);
}

/* ---- policies ------------------------------------------------------------------ */

US_API int us_engine_load_policies(us_engine *e, const char *dir, us_error *err) {
    us_err ie = {0};
    us_policy *p = NULL;
    GUARD_CHANGE(e, err);
    if (dir && !(p = us_policy_load(dir, &e->limits, &ie))) {
        int code = ie.code == US_ENOMEM ? US_ENOMEM : US_EPOLICY;
        return fail(err, code, "policies %s: %s", dir, ie.msg);
    }
    us_policy_free(e->pol);
    e->pol = p;
    return ok(err);
}

/* A reload, like the simulator's timeline reload, is also an event
 * (PolicyReloaded, PolicyReloadRefused) that opens the next cycle's events,
 * with the same wording and annotations. */
US_API int us_engine_reload_policies(us_engine *e, const char *dir, us_error *err) {
    us_err ie = {0};
    us_policy *fresh = NULL;
    const char *old_id;
    int rc;
    GUARD_CHANGE(e, err);
    if (!dir) return fail(err, US_EINVAL, "dir: NULL (load_policies(NULL) selects the built-in policies)");
    old_id = us_engine_policy_id(e);
    rc = us_reload_check(&e->st, e->now, dir, &e->limits, &e->copts, &fresh, &ie);
    if (rc < 0) {
        const char *ann[] = {"policy-dir", dir, "policy-id", old_id, NULL};
        us_error why;
        if (ie.code == US_ENOMEM) return nomem(err);
        fail(&why, US_EPOLICY, "reload of %s refused, the running policy (%s) stays: %s", dir,
             old_id, ie.msg);
        if (us_log_event(&e->pending, "Warning", "PolicyReloadRefused", "policies", ann, "%s",
                         why.message) < 0)
            return nomem(err);
        if (err) *err = why;
        return US_EPOLICY;
    }
    const char *ann[] = {"policy-dir", dir, "policy-id", us_policy_id(fresh),
                         "previous-policy-id", old_id, NULL};
    if (us_log_event(&e->pending, "Normal", "PolicyReloaded", "policies", ann,
                     "policies reloaded from %s: %s replaces %s", dir, us_policy_id(fresh), old_id) < 0) {
        us_policy_free(fresh);
        return nomem(err);
    }
    us_policy_set_previous(fresh, e->pol); /* fresh owns the old one now */
    e->pol = fresh;
    return ok(err);
}

US_API const char *us_engine_policy_id(const us_engine *e) {
    return e && e->pol ? us_policy_id(e->pol) : "builtin";
}

/* ---- JSON in ---------------------------------------------------------------------- */

/* Is every string of o (keys and values) valid UTF-8?  A key marked
 * constant is a field name a builder wrote (see item), not input. */
static bool utf8_clean(const cJSON *o) {
    if (o->string && !(o->type & cJSON_StringIsConst) &&
        us_utf8_invalid(o->string, strlen(o->string)) >= 0)
        return false;
    if (cJSON_IsString(o) && us_utf8_invalid(o->valuestring, strlen(o->valuestring)) >= 0) return false;
    for (const cJSON *c = o->child; c; c = c->next)
        if (!utf8_clean(c)) return false;
    return true;
}

/* The first string of o that is not valid UTF-8, as US_EINVAL naming its
 * path below what, and the byte offset. */
static int utf8_find(const cJSON *o, const char *what, us_error *err) {
    char path[256];
    long bad;
    if (o->string && (bad = us_utf8_invalid(o->string, strlen(o->string))) >= 0)
        return fail(err, US_EINVAL, "%s: a key is not valid UTF-8 (byte offset %ld)", what, bad);
    if (cJSON_IsString(o) && (bad = us_utf8_invalid(o->valuestring, strlen(o->valuestring))) >= 0)
        return fail(err, US_EINVAL, "%s: invalid UTF-8 at byte offset %ld", what, bad);
    int i = 0;
    for (const cJSON *c = o->child; c; c = c->next, i++) {
        if (c->string) snprintf(path, sizeof path, "%s.%s", what, c->string);
        else snprintf(path, sizeof path, "%s[%d]", what, i);
        /* a key that is itself invalid is reported under its parent */
        int rc = utf8_find(c, c->string && us_utf8_invalid(c->string, strlen(c->string)) >= 0 ? what : path, err);
        if (rc != US_OK) return rc;
    }
    return US_OK;
}

/* Every string of o (keys and values) valid UTF-8, or US_EINVAL naming
 * the first that is not.  Names and labels reach the output, which must
 * stay valid.  Paths are built only for a failure: every upsert passes
 * here, and formatting a path for each value cost more than the check. */
static int utf8_tree(const cJSON *o, const char *what, us_error *err) {
    return utf8_clean(o) ? US_OK : utf8_find(o, what, err);
}

/* Parse a JSON text holding one object; what names it in messages. */
static int parse_text(const char *json, const char *what, cJSON **out, us_error *err) {
    const char *end = NULL;
    *out = NULL;
    if (!json) return fail(err, US_EINVAL, "%s: NULL JSON text", what);
    if (!(*out = cJSON_ParseWithOpts(json, &end, 1))) {
        int line = 1, col = 1;
        size_t off = end && end >= json ? (size_t)(end - json) : 0;
        for (size_t i = 0; i < off && json[i]; i++) {
            if (json[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        return fail(err, US_EINVAL, "%s: invalid JSON at line %d, column %d", what, line, col);
    }
    int rc = utf8_tree(*out, what, err);
    if (rc != US_OK) {
        cJSON_Delete(*out);
        *out = NULL;
    }
    return rc;
}

/* o[key], JSON null read as absent. */
static const cJSON *field(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNull(v) ? NULL : v;
}

/* ---- C specs -> scenario objects -------------------------------------------------- */

/* A C spec becomes an object of the scenario format, which the loader
 * validates as it validates JSON: one set of checks, one set of messages.
 * The object is read once, so it is built without an allocation per value:
 * its items are carved from one block (on the stack unless the spec is
 * large), keys are constants or the spec's own strings, string values point
 * into the spec (cJSON_IsReference) and the cpu and memory quantities are
 * written into the block.  Such a tree must never reach cJSON_Delete:
 * build_free releases it whole.  Builders record the first failure (a NULL
 * where a string must be, out of memory) in code and msg; the caller
 * reports it. */
#define BUILD_ALIGN 16

typedef struct build {
    int code;                 /* 0, US_ENOMEM or US_EINVAL */
    char msg[256];
    char *at, *end;           /* free room in the current block */
    void *blocks;             /* heap blocks, each starting with a pointer to the one before */
    _Alignas(BUILD_ALIGN) char stack[64 * sizeof(cJSON)];
} build;

static void build_init(build *b) {
    b->code = 0;
    b->msg[0] = '\0';
    b->at = b->stack;
    b->end = b->stack + sizeof b->stack;
    b->blocks = NULL;
}

static void build_free(build *b) {
    while (b->blocks) {
        void *prev = *(void **)b->blocks;
        free(b->blocks);
        b->blocks = prev;
    }
}

/* size bytes from the current block, or a new one; NULL after a failure. */
static void *room(build *b, size_t size) {
    if (b->code) return NULL;
    size = (size + BUILD_ALIGN - 1) / BUILD_ALIGN * BUILD_ALIGN;
    if ((size_t)(b->end - b->at) < size) {
        size_t want = size + BUILD_ALIGN > sizeof b->stack ? size + BUILD_ALIGN : sizeof b->stack;
        char *blk = malloc(want);
        if (!blk) {
            b->code = US_ENOMEM;
            return NULL;
        }
        *(void **)blk = b->blocks;
        b->blocks = blk;
        b->at = blk + BUILD_ALIGN;
        b->end = blk + want;
    }
    void *p = b->at;
    b->at += size;
    return p;
}

/* A new item of type under parent (NULL: the root), as key when parent
 * is an object; NULL after a failure.  A key is never freed (the tree is
 * only read); one that is a field name of the format is marked constant,
 * so that the UTF-8 check passes over it (utf8_clean), while a key the
 * caller gave (a label's, a pool's) is checked like every value. */
static cJSON *item_keyed(build *b, cJSON *parent, const char *key, bool field, int type) {
    cJSON *it = room(b, sizeof *it);
    if (!it) return NULL;
    memset(it, 0, sizeof *it);
    it->type = type;
    if (!parent) return it;
    if (key) {
        it->string = (char *)key;
        if (field) it->type |= cJSON_StringIsConst;
    }
    /* cJSON's list: the first child's prev is the last child */
    if (!parent->child) {
        parent->child = it;
        it->prev = it;
    } else {
        cJSON *last = parent->child->prev;
        last->next = it;
        it->prev = last;
        parent->child->prev = it;
    }
    return it;
}

static cJSON *item(build *b, cJSON *parent, const char *field, int type) {
    return item_keyed(b, parent, field, true, type);
}

static void add_str_keyed(build *b, cJSON *obj, const char *key, bool field, const char *s) {
    cJSON *it;
    if (s && (it = item_keyed(b, obj, key, field, cJSON_String | cJSON_IsReference)))
        it->valuestring = (char *)s;
}

static void add_str(build *b, cJSON *obj, const char *field, const char *s) {
    add_str_keyed(b, obj, field, true, s);
}

/* As cJSON_CreateNumber sets it (valueint saturated; 0 for NaN, which
 * cJSON leaves undefined). */
static void add_num(build *b, cJSON *obj, const char *key, double d) {
    cJSON *it = item(b, obj, key, cJSON_Number);
    if (!it) return;
    it->valuedouble = d;
    it->valueint = d >= INT_MAX ? INT_MAX : d <= (double)INT_MIN ? INT_MIN : d == d ? (int)d : 0;
}

static void add_bool(build *b, cJSON *obj, const char *key, bool v) {
    item(b, obj, key, v ? cJSON_True : cJSON_False);
}

/* v in decimal, then suffix, in the block. */
static const char *int_text(build *b, int64_t v, const char *suffix) {
    char t[24], *out = room(b, 32);
    size_t n = 0, k = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    if (!out) return NULL;
    do t[n++] = (char)('0' + u % 10);
    while ((u /= 10) > 0);
    if (v < 0) out[k++] = '-';
    while (n) out[k++] = t[--n];
    while (*suffix) out[k++] = *suffix++;
    out[k] = '\0';
    return out;
}

/* cpu and memory as exact quantity strings ("1500m", "1073741824"), so
 * that no integer is rounded through a double; -1 (unlimited) as a number. */
static void add_cpu(build *b, cJSON *obj, const char *key, int64_t v) {
    if (v == -1) add_num(b, obj, key, -1);
    else add_str(b, obj, key, int_text(b, v, "m"));
}

static void add_mem(build *b, cJSON *obj, const char *key, int64_t v) {
    if (v == -1) add_num(b, obj, key, -1);
    else add_str(b, obj, key, int_text(b, v, ""));
}

static void add_labels(build *b, cJSON *obj, const char *key, const us_label *l, size_t n,
                       const char *path) {
    cJSON *m;
    if (!n || b->code) return;
    if (!l) {
        b->code = US_EINVAL;
        snprintf(b->msg, sizeof b->msg, "%s.%s: NULL array with a count of %zu", path, key, n);
        return;
    }
    m = item(b, obj, key, cJSON_Object);
    for (size_t i = 0; i < n && !b->code; i++) {
        if (!l[i].key || !l[i].value) {
            b->code = US_EINVAL;
            snprintf(b->msg, sizeof b->msg, "%s.%s[%zu]: NULL key or value", path, key, i);
            return;
        }
        add_str_keyed(b, m, l[i].key, false, l[i].value);
    }
}

/* An array of n objects, each with the given string fields of one item
 * (NULL fields left out): us_taint and us_toleration are arrays of
 * strings, so one builder serves both. */
static void add_string_items(build *b, cJSON *obj, const char *key, const void *items, size_t n,
                             size_t size, const char *const *fields, const char *path) {
    cJSON *arr;
    if (!n || b->code) return;
    if (!items) {
        b->code = US_EINVAL;
        snprintf(b->msg, sizeof b->msg, "%s.%s: NULL array with a count of %zu", path, key, n);
        return;
    }
    arr = item(b, obj, key, cJSON_Array);
    for (size_t i = 0; i < n && !b->code; i++) {
        const char *const *f = (const char *const *)((const char *)items + i * size);
        cJSON *o = item(b, arr, NULL, cJSON_Object);
        for (size_t k = 0; fields[k]; k++) add_str(b, o, fields[k], f[k]);
    }
}

static cJSON *node_object(const us_node_spec *s, build *b) {
    static const char *const taint_fields[] = {"key", "value", "effect", NULL};
    cJSON *o = item(b, NULL, NULL, cJSON_Object);
    add_str(b, o, "name", s->name);
    add_str(b, o, "pool", s->pool);
    add_cpu(b, o, "cpu", s->capacity.cpu);
    add_mem(b, o, "memory", s->capacity.memory);
    add_num(b, o, "gpu", s->capacity.gpu);
    add_labels(b, o, "labels", s->labels, s->nlabels, "node");
    add_bool(b, o, "unschedulable", s->unschedulable != 0);
    add_string_items(b, o, "taints", s->taints, s->ntaints, sizeof *s->taints, taint_fields, "node");
    return o;
}

/* {gpu: {quota, limit, over_quota_weight}, cpu: {...}, memory: {...}} */
static void add_resources(build *b, cJSON *obj, const char *key, bool field,
                          const us_resources *quota, const us_resources *limit, const us_weights *w) {
    cJSON *o = item_keyed(b, obj, key, field, cJSON_Object), *g = item(b, o, "gpu", cJSON_Object),
          *c = item(b, o, "cpu", cJSON_Object), *m = item(b, o, "memory", cJSON_Object);
    add_num(b, g, "quota", quota->gpu);
    add_num(b, g, "limit", limit->gpu);
    add_num(b, g, "over_quota_weight", w->gpu);
    add_cpu(b, c, "quota", quota->cpu);
    add_cpu(b, c, "limit", limit->cpu);
    add_num(b, c, "over_quota_weight", w->cpu);
    add_mem(b, m, "quota", quota->memory);
    add_mem(b, m, "limit", limit->memory);
    add_num(b, m, "over_quota_weight", w->memory);
}

static cJSON *queue_object(const us_queue_spec *s, build *b) {
    cJSON *o = item(b, NULL, NULL, cJSON_Object), *pools;
    add_str(b, o, "name", s->name);
    add_str(b, o, "parent", s->parent);
    add_num(b, o, "priority", s->priority);
    add_resources(b, o, "resources", true, &s->quota, &s->limit, &s->over_quota_weight);
    if (!s->npools || b->code) return o;
    if (!s->pools) {
        b->code = US_EINVAL;
        snprintf(b->msg, sizeof b->msg, "queue.pools: NULL array with a count of %zu", s->npools);
        return o;
    }
    pools = item(b, o, "pools", cJSON_Object);
    for (size_t i = 0; i < s->npools && !b->code; i++) {
        const us_queue_pool_spec *p = &s->pools[i];
        if (!p->pool) {
            b->code = US_EINVAL;
            snprintf(b->msg, sizeof b->msg, "queue.pools[%zu]: NULL pool name", i);
            break;
        }
        add_resources(b, pools, p->pool, false, &p->quota, &p->limit, &p->over_quota_weight);
    }
    return o;
}

static const char *const preempt_names[] = {NULL, "preemptible", "non-preemptible",
                                            "semi-preemptible"};
static const char *const ctrl_names[] = {"none", "job", "deployment", "daemonset"};

static cJSON *workload_object(const us_workload_spec *s, build *b) {
    static const char *const tol_fields[] = {"key", "operator", "value", "effect", NULL};
    cJSON *o = item(b, NULL, NULL, cJSON_Object), *r;
    add_str(b, o, "name", s->name);
    add_str(b, o, "queue", s->queue);
    if (s->external) add_bool(b, o, "external", true);
    add_num(b, o, "priority", s->priority);
    if (b->code) return o;
    if ((unsigned)s->preemptibility > US_PREEMPTION_SEMI_PREEMPTIBLE) {
        b->code = US_EINVAL;
        snprintf(b->msg, sizeof b->msg, "workload.preemptibility: %d is not a us_preemption",
                 (int)s->preemptibility);
        return o;
    }
    if ((unsigned)s->controller > US_CONTROLLER_DAEMONSET) {
        b->code = US_EINVAL;
        snprintf(b->msg, sizeof b->msg, "workload.controller: %d is not a us_controller_kind",
                 (int)s->controller);
        return o;
    }
    if (s->preemptibility != US_PREEMPTION_DEFAULT)
        add_str(b, o, "preemptibility", preempt_names[s->preemptibility]);
    add_str(b, o, "controller", ctrl_names[s->controller]);
    add_num(b, o, "replicas", s->replicas);
    if (s->min_member != 0) add_num(b, o, "min_member", s->min_member);
    if (s->succeeded != 0) add_num(b, o, "succeeded", s->succeeded);
    add_str(b, o, "pool", s->pool);
    add_labels(b, o, "node_selector", s->node_selector, s->nnode_selector, "workload");
    add_labels(b, o, "labels", s->labels, s->nlabels, "workload");
    add_string_items(b, o, "tolerations", s->tolerations, s->ntolerations, sizeof *s->tolerations,
                     tol_fields, "workload");
    add_num(b, o, "termination_grace", s->termination_grace);
    r = item(b, o, "requests", cJSON_Object);
    add_num(b, r, "gpu", s->requests.gpu);
    add_cpu(b, r, "cpu", s->requests.cpu);
    add_mem(b, r, "memory", s->requests.memory);
    return o;
}

/* Report a builder failure, or a string of the object that is not valid
 * UTF-8; US_OK when the object is ready for the loader. */
static int built(const build *b, const cJSON *o, const char *what, us_error *err) {
    if (b->code == US_ENOMEM) return nomem(err);
    if (b->code) return fail(err, b->code, "%s", b->msg);
    return utf8_tree(o, what, err);
}

/* ---- lookups ------------------------------------------------------------------------ */

/* Object i of an array of objects of size elem, each starting with its
 * name (us_node, us_workload). */
static const void *object_at(const void *arr, size_t elem, size_t i) {
    return (const char *)arr + i * elem;
}

static const char *name_of(const void *obj) { return *(char *const *)obj; }

/* Keep x current for an array of count objects: the ones appended since
 * are added; a stale or shrunk index, or one half full, is rebuilt.  0, or
 * -1 when out of memory. */
static int name_index_sync(name_index *x, const void *arr, size_t elem, size_t count) {
    if (x->stale || x->n > count || 2 * count + 2 > x->cap) {
        size_t cap = 16;
        while (cap < 4 * count + 4) cap *= 2; /* room to grow before the next rebuild */
        int *n = malloc(cap * sizeof *n);
        if (!n) return -1;
        free(x->slot);
        x->slot = n;
        x->cap = cap;
        x->n = 0;
        x->stale = false;
        memset(x->slot, 0xff, cap * sizeof *x->slot); /* all -1 */
    }
    for (; x->n < count; x->n++) {
        size_t k = us_name_hash(name_of(object_at(arr, elem, x->n))) & (x->cap - 1);
        while (x->slot[k] >= 0) k = (k + 1) & (x->cap - 1);
        x->slot[k] = (int)x->n;
    }
    return 0;
}

/* The object of count named name that wanted accepts; -1 when none, -2
 * when out of memory. */
static int name_index_find(name_index *x, const void *arr, size_t elem, size_t count, const char *name,
                           bool (*wanted)(const void *obj)) {
    if (name_index_sync(x, arr, elem, count) < 0) return -2;
    for (size_t k = us_name_hash(name) & (x->cap - 1); x->slot[k] >= 0; k = (k + 1) & (x->cap - 1)) {
        const void *o = object_at(arr, elem, (size_t)x->slot[k]);
        if (wanted(o) && strcmp(name_of(o), name) == 0) return x->slot[k];
    }
    return -1;
}

static bool node_present(const void *o) { return !((const us_node *)o)->removed; }

static bool workload_live(const void *o) {
    const us_workload *w = o;
    return w->state == US_WL_ACTIVE || w->state == US_WL_WAITING;
}

/* A node that is in the cluster (not removed), by name; -1 when none, -2
 * when out of memory. */
static int find_node(us_engine *e, const char *name) {
    const us_state *st = &e->st;
    return name_index_find(&e->nnames, st->nodes, sizeof *st->nodes, st->nnodes, name, node_present);
}

/* The latest removed node named name in pool, kept because pods refer to
 * it (pinned pods waiting for it, say); -1 when none, -2 when out of
 * memory. */
static int find_removed_node(us_engine *e, const char *name, const char *pool) {
    const us_state *st = &e->st;
    name_index *x = &e->nnames;
    int best = -1;
    if (name_index_sync(x, st->nodes, sizeof *st->nodes, st->nnodes) < 0) return -2;
    for (size_t k = us_name_hash(name) & (x->cap - 1); x->slot[k] >= 0; k = (k + 1) & (x->cap - 1)) {
        const us_node *n = &st->nodes[x->slot[k]];
        if (n->removed && x->slot[k] > best && strcmp(n->name, name) == 0 && strcmp(n->pool, pool) == 0)
            best = x->slot[k];
    }
    return best;
}

/* A live workload by name: active, or waiting for its pods (see settle);
 * -1 when none, -2 when out of memory.  Finished ones linger while their pods
 * terminate, under the same name. */
static int find_workload(us_engine *e, const char *name) {
    const us_state *st = &e->st;
    return name_index_find(&e->wnames, st->workloads, sizeof *st->workloads, st->nworkloads, name,
                           workload_live);
}

static bool pod_live(const us_pod *p) {
    return !p->gone && (p->state == US_POD_PENDING || p->state == US_POD_PIPELINED ||
                        p->state == US_POD_RUNNING);
}

/* Pod i (numbered now) under its current name in the index; false when
 * the index is half full (rebuild it).  An entry left under a pod's old
 * name is harmless: lookups compare names. */
static bool names_add(us_engine *e, size_t i) {
    if (2 * (e->names_used + 1) > e->ncap) return false;
    size_t k = us_name_hash(e->st.pods[i].name) & (e->ncap - 1);
    while (e->names[k] >= 0) k = (k + 1) & (e->ncap - 1);
    e->names[k] = (int)us_droplog_back(&e->st.drops, e->names_gen, (long)i);
    e->names_used++;
    return true;
}

/* Does the index follow the state's numbering (built, not stale, every
 * compaction since it was built still in the drop log)? */
static bool names_follow(const us_engine *e) {
    return e->names && !e->names_stale &&
           us_droplog_reaches(&e->st.drops, e->names_gen, e->st.generation);
}

/* The first pod (numbered now) not in the index yet. */
static size_t names_unindexed(const us_engine *e) {
    return (size_t)us_droplog_forward_end(&e->st.drops, e->names_end_gen, (long)e->names_end);
}

/* A pod was renamed: indexed under its new name too (a reported pod takes
 * a pending pod's place one call at a time: no rebuild per call). */
static void names_renamed(us_engine *e, int i) {
    if (!names_follow(e)) return;  /* built again at the next lookup */
    if ((size_t)i < names_unindexed(e) && !names_add(e, (size_t)i)) e->names_stale = true;
}

/* The name index follows the pod array: pods appended since are added,
 * and compactions since are followed through the drop log, entry by entry
 * as lookups meet them (a compaction every cycle where pods left: building
 * again would hash every pod's name each time).  Anything else -- an undone
 * append, a compaction the log no longer holds, a rename that found the
 * index full (names_stale) -- builds it again.  0, or -1 when out of
 * memory. */
static int index_names(us_engine *e) {
    const us_state *st = &e->st;
    size_t cap = 16;
    if (names_follow(e)) {
        size_t i = names_unindexed(e);
        while (i < st->npods && names_add(e, i)) i++;
        if (i == st->npods) {
            e->names_end = st->npods;
            e->names_end_gen = st->generation;
            return 0;
        }
    }
    while (cap < 4 * st->npods + 4) cap *= 2;
    if (cap != e->ncap) {
        int *n = malloc(cap * sizeof *n);
        if (!n) return -1;
        free(e->names);
        e->names = n;
        e->ncap = cap;
    }
    memset(e->names, 0xff, cap * sizeof *e->names); /* all -1 */
    e->names_used = 0;
    e->names_gen = st->generation;
    for (size_t i = 0; i < st->npods; i++) names_add(e, i);
    e->names_end = st->npods;
    e->names_end_gen = st->generation;
    e->names_stale = false;
    return 0;
}

/* The pod an entry of the name index names now, or -1 (dropped since). */
static int names_pod(const us_engine *e, int entry) {
    long i = us_droplog_forward(&e->st.drops, e->names_gen, entry);
    return i >= 0 && (size_t)i < e->st.npods ? (int)i : -1;
}

/* The live incarnation of a pod name, and a terminating one (the one on
 * node `on` when several terminate, e.g. after evictions from two nodes);
 * -1 when none.  -1 when out of memory (then both are -1). */
static int find_pod_on(us_engine *e, const char *name, int on, int *live, int *releasing) {
    const us_state *st = &e->st;
    *live = *releasing = -1;
    if (index_names(e) < 0) return -1;
    for (size_t k = us_name_hash(name) & (e->ncap - 1); e->names[k] >= 0; k = (k + 1) & (e->ncap - 1)) {
        int i = names_pod(e, e->names[k]);
        if (i < 0) continue;
        const us_pod *p = &st->pods[i];
        if (p->gone || strcmp(p->name, name) != 0) continue;
        if (pod_live(p)) *live = i;
        /* of several, the one on `on`, else the first in pod order (not
         * in the index's order, which renames and untidied pods change) */
        else if (p->state == US_POD_RELEASING &&
                 (*releasing < 0 || (p->node == on && st->pods[*releasing].node != on) ||
                  ((p->node == on) == (st->pods[*releasing].node == on) && i < *releasing)))
            *releasing = i;
    }
#ifdef US_CHECK_INVARIANTS
    /* checking builds: the index finds what a pass over the pods finds
     * (small states only: a pass per lookup) */
    if (st->npods <= 4096) {
        int live_seen = -1, rel_seen = -1, nlive = 0;
        for (size_t j = 0; j < st->npods; j++) {
            const us_pod *p = &st->pods[j];
            if (p->gone || strcmp(p->name, name) != 0) continue;
            if (pod_live(p)) live_seen = (int)j, nlive++;
            else if (p->state == US_POD_RELEASING &&
                     (rel_seen < 0 || (p->node == on && st->pods[rel_seen].node != on)))
                rel_seen = (int)j;
        }
        if ((nlive == 1 && *live != live_seen) || (nlive == 0 && *live >= 0) || *releasing != rel_seen)
            e->broken = "invariant \"pod-names\" broken: the pod name index, followed through "
                        "the compactions since it was built, does not find what a pass over the "
                        "pods finds";
    }
#endif
    return 0;
}

/* Under reported_pods a name is one pod of the cluster: reported pending,
 * or on node `on`, it terminates nowhere else (a bind that failed after the
 * engine evicted the pod it had bound, say).  Such incarnations are gone.
 * -1 when out of memory. */
static int forget_terminating_elsewhere(us_engine *e, const char *name, int on) {
    us_state *st = &e->st;
    if (!e->copts.reported_pods) return 0;
    if (index_names(e) < 0) return -1;
    for (size_t k = us_name_hash(name) & (e->ncap - 1); e->names[k] >= 0; k = (k + 1) & (e->ncap - 1)) {
        int i = names_pod(e, e->names[k]);
        if (i < 0) continue;
        us_pod *p = &st->pods[i];
        if (!p->gone && p->state == US_POD_RELEASING && p->node != on && strcmp(p->name, name) == 0) {
            us_pod_go(st, p);
            e->untidy = true;
        }
    }
    return 0;
}

static int find_pod(us_engine *e, const char *name, int *live, int *releasing) {
    return find_pod_on(e, name, -1, live, releasing);
}

/* us_life_held_fn through the pod name index: does a live pod hold name? */
static int pod_name_held(void *ctx, const char *name) {
    int live, releasing;
    if (find_pod(ctx, name, &live, &releasing) < 0) return -1;
    return live >= 0;
}

/* A workload tidying keeps: live (active, or waiting for its pods), or
 * finished with pods still its own, gone ones too until a compaction
 * drops them. */
static bool workload_stays(const us_workload *w) {
    return w->npods > 0 || w->state == US_WL_ACTIVE || w->state == US_WL_WAITING;
}

/* A workload the caller does not see (us_engine_workload): dropped by
 * tidying, kept in the array only for its pods gone (us_workload.dropped). */
static bool workload_unlisted(const us_workload *w) { return w->dropped; }

#ifdef US_CHECK_INVARIANTS
/* Checking builds: every workload's count of its pods is its pods. */
static bool pod_counts_hold(const us_state *st) {
    size_t *n = calloc(st->nworkloads ? st->nworkloads : 1, sizeof *n);
    bool same = true;
    if (!n) return true;  /* not known: memory */
    for (size_t i = 0; i < st->npods; i++) n[st->pods[i].workload]++;
    for (size_t w = 0; w < st->nworkloads && same; w++) same = n[w] == st->workloads[w].npods;
    free(n);
    return same;
}
#endif

/* ---- tidying ---------------------------------------------------------------------------
 * The engine's state never removes objects from its arrays (indices stay
 * valid for a whole simulated run).  A control plane runs for months, so
 * between calls the handle drops what can no longer matter: pods that left
 * (once they are a share of the pods, us_state.gone_share, or all of them
 * when asked), finished workloads whose pods are all dropped, removed
 * nodes no pod refers to.  Cross references (pod -> workload, node, pin)
 * are renumbered.  When memory for the maps is short it simply tidies
 * later. */
static void tidy_pods(us_engine *e, bool all) {
    us_state *st = &e->st;
    int *wmap = NULL, *nmap = NULL;
    size_t k;
    uint64_t generation = st->generation;
    forget_used(e);
    /* no pass over the pods where nothing is to be done: no gone pods due
     * to be dropped (all: any), no finished workload without pods, no
     * removed node */
    if (us_state_compact_due(st) || (all && st->ngone)) us_state_compact_pods(st);
    if (st->generation != generation) forget_reads(e); /* pods moved: the pod index goes */
    bool removed_node = false;
    for (size_t n = 0; n < st->nnodes && !removed_node; n++) removed_node = st->nodes[n].removed;
    /* a finished workload whose pods are all gone is dropped now for the
     * caller (us_workload.dropped), and from the array with its pods */
    bool workload_goes = false;
    for (size_t w = 0; w < st->nworkloads; w++) {
        us_workload *wl = &st->workloads[w];
        if (!workload_stays(wl)) workload_goes = true;
        else if (wl->npods == wl->ngone && wl->state != US_WL_ACTIVE && wl->state != US_WL_WAITING)
            wl->dropped = true;
    }
#ifdef US_CHECK_INVARIANTS
    if (!us_state_gone_counted(st))
        e->broken = "invariant \"release-times\" broken: the pods marked gone are not the "
                    "ones the state counted (a pod marked gone without us_pod_go?)";
    if (!pod_counts_hold(st))
        e->broken = "invariant \"workload-pods\" broken: a workload's count of its pods is not "
                    "the pods that are its own (a pod added or dropped without its count)";
#endif
    if (!removed_node && !workload_goes) return;
    wmap = calloc(st->nworkloads ? st->nworkloads : 1, sizeof *wmap);
    nmap = calloc(st->nnodes ? st->nnodes : 1, sizeof *nmap);
    if (!wmap || !nmap) goto out;
    /* the nodes pods refer to (1): a pass over the pods only when some
     * node is removed (a present node stays anyway) */
    for (size_t i = 0; removed_node && i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        if (p->gone) continue;  /* refers to nothing: its node and pin go to -1 */
        if (p->node >= 0) nmap[p->node] = 1;
        if (p->pin >= 0) nmap[p->pin] = 1;
    }
    k = 0;
    for (size_t w = 0; w < st->nworkloads; w++)
        wmap[w] = workload_stays(&st->workloads[w]) ? (int)k++ : -1;
    bool renumbered = k != st->nworkloads;
    /* the ledger of the cycle cache follows the new numbers (workloads
     * finish all the time on a large cluster: counting every pod again
     * after each would make every cycle a full one); when it cannot, the
     * pods count as renumbered below */
    bool followed = renumbered && e->copts.cache &&
                    us_ledger_renumber_workloads(&e->copts.cache->ledger, st, wmap, k) == 0;
    if (renumbered) {
        e->wnames.stale = true; /* renumbered */
        e->new_from = 0;        /* work left pending (out of memory): any may be new */
    }
    for (size_t w = 0; w < st->nworkloads; w++) {
        if (wmap[w] >= 0) st->workloads[wmap[w]] = st->workloads[w];
        else us_workload_free(&st->workloads[w]);
    }
    st->nworkloads = k;
    k = 0;
    for (size_t n = 0; n < st->nnodes; n++) {
        us_node *nd = &st->nodes[n];
        if (nmap[n] || !nd->removed) {
            nmap[n] = (int)k;
            st->nodes[k++] = *nd;
        } else {
            us_node_free(nd);
            nmap[n] = -1;
        }
    }
    bool nodes_renumbered = k != st->nnodes;
    if (nodes_renumbered) {
        e->nnames.stale = true;
        us_state_nodes_changed(st);
    }
    if (renumbered || nodes_renumbered) forget_reads(e); /* the pod index's lists go */
    st->nnodes = k;
    /* the pods' references follow (none moved: no pass), written only
     * where they change: pods of the workloads before the first dropped
     * one keep their pages clean */
    for (size_t i = 0; renumbered && i < st->npods; i++) {
        us_pod *p = &st->pods[i];
        if (wmap[p->workload] != p->workload) p->workload = wmap[p->workload];
    }
    for (size_t i = 0; nodes_renumbered && i < st->npods; i++) {
        us_pod *p = &st->pods[i];
        if (p->node >= 0) p->node = nmap[p->node];
        if (p->pin >= 0) p->pin = nmap[p->pin];
    }
    /* counts kept per workload are void unless the ledger followed
     * (counts per node go with the node version); what a pool's snapshot
     * kept per workload (podview.h) goes either way */
    if (renumbered && !followed) us_state_pods_renumbered(st);
    if (renumbered) us_state_changes_gap(st);
out:
    free(wmap);
    free(nmap);
}

/* Undo appends made since a mark (an out-of-memory half-way through
 * adding a node or a workload). */
typedef struct mark {
    size_t npods, nnodes, nworkloads;
    uint64_t seq;
} mark;

static mark mark_state(const us_state *st) {
    return (mark){st->npods, st->nnodes, st->nworkloads, st->next_seq};
}

static void rollback(us_engine *e, mark m) {
    us_state *st = &e->st;
    forget_reads(e);
    e->nnames.stale = e->nnames.stale || st->nnodes != m.nnodes;
    e->wnames.stale = e->wnames.stale || st->nworkloads != m.nworkloads;
    for (size_t i = m.npods; i < st->npods; i++) {
        us_state_pod_leaves(st, i);
        free(st->pods[i].name);
    }
    for (size_t i = m.nnodes; i < st->nnodes; i++) us_node_free(&st->nodes[i]);
    for (size_t i = m.nworkloads; i < st->nworkloads; i++) us_workload_free(&st->workloads[i]);
    if (st->nnodes != m.nnodes) us_state_nodes_changed(st);
    bool pods_undone = st->npods != m.npods, workloads_undone = st->nworkloads != m.nworkloads;
    st->npods = m.npods;
    st->nnodes = m.nnodes;
    st->nworkloads = m.nworkloads;
    if (pods_undone) {
        st->generation++;
        us_droplog_clear(&st->drops);  /* moved without a record */
    }
    /* the journal names the pods undone */
    if (pods_undone || workloads_undone) us_state_pods_renumbered(st);
    st->next_seq = m.seq;
}

/* Re-derive queue fields and background rules; a workload newly blocked
 * warns again. */
static int rederive(us_state *st) {
    const char **before = malloc((st->nworkloads ? st->nworkloads : 1) * sizeof *before);
    if (!before) return -1;
    for (size_t i = 0; i < st->nworkloads; i++) before[i] = st->workloads[i].blocked;
    us_state_derive_queues(st);
    us_state_check_rules(st);
    for (size_t i = 0; i < st->nworkloads; i++)
        if (st->workloads[i].blocked && st->workloads[i].blocked != before[i])
            st->workloads[i].warned = false;
    free(before);
    return 0;
}

/* rederive for the workloads from first on only, new ones: queues have
 * not changed since (a queue change re-derives everything at once). */
static int check_new_rules(us_state *st, size_t first) {
    size_t n = st->nworkloads > first ? st->nworkloads - first : 0;
    const char **before = malloc((n ? n : 1) * sizeof *before);
    if (!before) return -1;
    for (size_t i = 0; i < n; i++) before[i] = st->workloads[first + i].blocked;
    us_state_check_rules_from(st, first);
    for (size_t i = 0; i < n; i++)
        if (st->workloads[first + i].blocked && st->workloads[first + i].blocked != before[i])
            st->workloads[first + i].warned = false;
    free(before);
    return 0;
}

/* Work a control plane's bulk calls would repeat is left for later and done
 * once: a pod reported gone is only marked, and a new workload's pods are
 * created (and the background rules checked) for all new workloads in one
 * pass, so that resending ten thousand workloads or reporting a thousand
 * terminated pods costs one pass over the pods, not one per call.  The next
 * call that reads the state or changes it otherwise settles first, in call
 * order (a node added after a DaemonSet sees its pods already there).
 * Reads take a const handle: settling changes nothing they can observe, and
 * a handle is used by one thread at a time.  Out of memory, the work stays
 * pending and is retried. */
static void settle_pods(us_engine *e) {
    bool any = false;
    if (e->unsubmitted && us_life_submit_new(&e->st, e->new_from, e->now, pod_name_held, e, &any) == 0)
        e->unsubmitted = false;
    if (e->underived && check_new_rules(&e->st, e->new_from) == 0) e->underived = false;
}

static void tidy_now(us_engine *e) {
    tidy_pods(e, false);
    e->untidy = false;
    e->untidy_calls = 0;
}

/* Before a read or a cycle: everything settled, the read caches of the
 * changes since dropped; the pod index stays (new workloads' pods join
 * it, and tidying drops it only when pods move or objects are
 * renumbered). */
static void settle(const us_engine *ce) {
    us_engine *e = (us_engine *)ce; /* never defined const: the caller's handle */
    if (!e) return;
    if (e->unsubmitted || e->underived || e->untidy) {
        forget_used(e);
        e->reports_in_row = 0;
    }
    settle_new(e);
    if (e->untidy) tidy_now(e);
}

/* Before a change: the same, but pods marked gone may stay in the arrays
 * a while (every change skips them), because tidying is a pass over
 * every pod and a control plane's removals come between its reports (a pod
 * reported terminating, then gone, then its replacement reported): it is
 * done once the changes made since the last tidy number a quarter of the
 * objects it passes over, so each change pays a bounded share of it. */
static void settle_change(us_engine *e) {
    settle_new(e);
    if (!e->untidy) return;
    if (++e->untidy_calls * 4 < e->st.npods + e->st.nnodes + e->st.nworkloads) return;
    forget_reads(e);
    tidy_now(e);
}

/* ---- the pod index ------------------------------------------------------------------
 * A control plane starting up reports every pod it finds, one call each;
 * each report looked for a pending place to adopt, the room on the node
 * and a device slot with passes over every pod.  The index answers those
 * from the pods of one node or workload.  It is built by the first report
 * after any other change (forget_reads drops it at every other call that
 * changes the engine, in tidy and in rollback), and a report that changes
 * where a pod is or is pinned moves it in the lists; a report that does
 * more (a pod lost, a terminating pod added) drops it.  A pending place
 * stops being a candidate only by being named or placed while the index
 * lives, so a cursor can pass over the ones taken.  It is built from the
 * second report in a row on: reports between other changes (a node, then
 * its pod) scan as before, at most what the index would cost to build. */

static void pods_forget(us_engine *e) {
    pod_index *x = &e->pods;
    free(x->on.head);
    free(x->on.next);
    free(x->pinned.head);
    free(x->pinned.next);
    free(x->of.head);
    free(x->of.next);
    free(x->cand);
    free(x->cfirst);
    free(x->ccur);
    free(x->fresh_head);
    free(x->fresh_next);
    memset(x, 0, sizeof *x);
}

/* A pending pod of w no caller has named: a place a reported pod may take. */
static bool candidate(const us_pod *p, int w) {
    return !p->gone && p->workload == w && p->state == US_POD_PENDING && !p->named;
}

typedef struct cand_key {
    uint64_t seq;
    int workload, pod;
} cand_key;

/* By workload, newest first. */
static int by_workload_newest(const void *a, const void *b) {
    const cand_key *x = a, *y = b;
    if (x->workload != y->workload) return x->workload < y->workload ? -1 : 1;
    return x->seq > y->seq ? -1 : x->seq < y->seq;
}

static int pod_node(const us_pod *p) { return p->node; }
static int pod_pin(const us_pod *p) { return p->pin; }
static int pod_workload(const us_pod *p) { return p->workload; }

/* l over the pods, by the field key gives (a node, or the workload with
 * by_workload; pods without are in no list).  0, or -1 when out of
 * memory. */
static int list_build(pod_list *l, const us_state *st, int (*key)(const us_pod *), bool by_workload) {
    size_t nn = by_workload ? st->nworkloads : st->nnodes;
    if (nn == 0) nn = 1;
    if (!(l->head = malloc(nn * sizeof *l->head)) ||
        !(l->next = malloc((st->npods ? st->npods : 1) * sizeof *l->next)))
        return -1;
    memset(l->head, 0xff, nn * sizeof *l->head); /* all -1 */
    for (size_t i = st->npods; i-- > 0;) { /* from the end: each list in pod order */
        int n = key(&st->pods[i]);
        l->next[i] = n >= 0 ? l->head[n] : -1;
        if (n >= 0) l->head[n] = (int)i;
    }
    return 0;
}

/* Pod p's node field went from `from` to `to` (-1: none). */
static void list_move(pod_list *l, int p, int from, int to) {
    int *at;
    if (from == to) return;
    if (from >= 0) {
        for (at = &l->head[from]; *at >= 0 && *at != p; at = &l->next[*at]) {}
        if (*at == p) *at = l->next[p];
    }
    if (to >= 0) {
        for (at = &l->head[to]; *at >= 0 && *at < p; at = &l->next[*at]) {}
        l->next[p] = *at;
        *at = p;
    }
}

/* The index, built when it is not; NULL for the first report after
 * another change, or when out of memory (then the report scans the pods). */
static pod_index *pods_index(us_engine *e) {
    const us_state *st = &e->st;
    pod_index *x = &e->pods;
    cand_key *keys = NULL;
    size_t nc = 0, nw = st->nworkloads;
    if (x->valid) return x;
    if (e->reports_in_row < 2) return NULL;
    pods_forget(e);
    if (list_build(&x->on, st, pod_node, false) < 0 || list_build(&x->pinned, st, pod_pin, false) < 0 ||
        list_build(&x->of, st, pod_workload, true) < 0 ||
        !(keys = malloc((st->npods ? st->npods : 1) * sizeof *keys)) ||
        !(x->cand = malloc((st->npods ? st->npods : 1) * sizeof *x->cand)) ||
        !(x->cfirst = calloc(nw + 1, sizeof *x->cfirst)) || !(x->ccur = malloc((nw ? nw : 1) * sizeof *x->ccur)) ||
        !(x->fresh_head = malloc((nw ? nw : 1) * sizeof *x->fresh_head)) ||
        !(x->fresh_next = malloc((st->npods ? st->npods : 1) * sizeof *x->fresh_next))) {
        free(keys);
        pods_forget(e);
        return NULL;
    }
    x->cap = st->npods ? st->npods : 1;
    x->nw = nw;
    x->nn = st->nnodes;
    memset(x->fresh_head, 0xff, (nw ? nw : 1) * sizeof *x->fresh_head); /* all -1 */
    for (size_t i = 0; i < x->cap; i++) x->fresh_next[i] = -2;
    for (size_t i = 0; i < st->npods; i++) {
        const us_pod *p = &st->pods[i];
        if (candidate(p, p->workload)) keys[nc++] = (cand_key){p->seq, p->workload, (int)i};
    }
    qsort(keys, nc, sizeof *keys, by_workload_newest);
    for (size_t k = 0; k < nc; k++) {
        x->cand[k] = keys[k].pod;
        x->cfirst[keys[k].workload + 1]++;
    }
    for (size_t w = 0; w < nw; w++) {
        x->cfirst[w + 1] += x->cfirst[w];
        x->ccur[w] = x->cfirst[w];
    }
    free(keys);
    x->valid = true;
    return x;
}

/* Nodes were appended: the index makes room for them (no pod on them or
 * pinned to them listed yet).  Out of memory, it is dropped. */
static void pods_index_nodes(us_engine *e) {
    pod_index *x = &e->pods;
    size_t nn = e->st.nnodes;
    if (!x->valid || nn <= x->nn) return;
    int *on = realloc(x->on.head, nn * sizeof *on);
    if (on) x->on.head = on;
    int *pin = on ? realloc(x->pinned.head, nn * sizeof *pin) : NULL;
    if (!pin) {
        pods_forget(e);
        return;
    }
    x->pinned.head = pin;
    for (size_t n = x->nn; n < nn; n++) x->on.head[n] = x->pinned.head[n] = -1;
    x->nn = nn;
}

/* Workloads were appended: the index makes room for them (none of their
 * pods listed yet).  Out of memory, it is dropped. */
static void pods_index_workloads(us_engine *e) {
    pod_index *x = &e->pods;
    size_t nw = e->st.nworkloads;
    if (!x->valid || nw <= x->nw) return;
    size_t *cfirst = realloc(x->cfirst, (nw + 1) * sizeof *cfirst);
    if (cfirst) x->cfirst = cfirst;
    size_t *ccur = cfirst ? realloc(x->ccur, nw * sizeof *ccur) : NULL;
    if (ccur) x->ccur = ccur;
    int *fresh = ccur ? realloc(x->fresh_head, nw * sizeof *fresh) : NULL;
    if (fresh) x->fresh_head = fresh;
    int *of = fresh ? realloc(x->of.head, nw * sizeof *of) : NULL;
    if (!of) {
        pods_forget(e);
        return;
    }
    x->of.head = of;
    for (size_t w = x->nw; w < nw; w++) {
        x->cfirst[w + 1] = x->cfirst[x->nw]; /* no candidates of their own in cand */
        x->ccur[w] = x->cfirst[x->nw];
        x->fresh_head[w] = x->of.head[w] = -1;
    }
    x->nw = nw;
}

/* Pod p was added (appended: a terminating pod's replacement, an
 * incarnation seen terminating), or made a place to adopt again (lost and
 * recreated, its node already taken off the lists): the index, when there
 * is one, follows, so that a control plane replacing pods one at a time
 * does not rebuild it per pod.  Out of memory, it is dropped (reports
 * scan). */
static void pods_index_add(us_engine *e, int p, bool appended) {
    pod_index *x = &e->pods;
    const us_pod *pd = &e->st.pods[p];
    if (!x->valid) return;
    if (e->st.npods > x->cap) {
        size_t cap = 2 * x->cap > e->st.npods ? 2 * x->cap : e->st.npods;
        int *on = realloc(x->on.next, cap * sizeof *on);
        if (on) x->on.next = on;
        int *pin = on ? realloc(x->pinned.next, cap * sizeof *pin) : NULL;
        if (pin) x->pinned.next = pin;
        int *of = pin ? realloc(x->of.next, cap * sizeof *of) : NULL;
        if (of) x->of.next = of;
        int *fresh = of ? realloc(x->fresh_next, cap * sizeof *fresh) : NULL;
        if (!fresh) {
            pods_forget(e);
            return;
        }
        for (size_t i = x->cap; i < cap; i++) fresh[i] = -2;
        x->fresh_next = fresh;
        x->cap = cap;
    }
    if (appended) {
        x->on.next[p] = x->pinned.next[p] = -1;
        list_move(&x->on, p, -1, pd->node);
        list_move(&x->pinned, p, -1, pd->pin);
        /* first of its workload's: those lists need no order, and a
         * Deployment's may be long */
        x->of.next[p] = x->of.head[pd->workload];
        x->of.head[pd->workload] = p;
    }
    /* newer than every place listed: first of its workload's (taken off
     * where it was, if it was listed: a list never holds a pod twice) */
    if (candidate(pd, pd->workload)) {
        int *at = &x->fresh_head[pd->workload];
        if (x->fresh_next[p] != -2) {
            while (*at >= 0 && *at != p) at = &x->fresh_next[*at];
            if (*at == p) *at = x->fresh_next[p];
        }
        x->fresh_next[p] = x->fresh_head[pd->workload];
        x->fresh_head[pd->workload] = p;
    }
}

/* The pods appended from index from on join the index (when there is one). */
static void pods_index_add_from(us_engine *e, size_t from) {
    for (size_t i = from; i < e->st.npods && e->pods.valid; i++) pods_index_add(e, (int)i, true);
}

static int by_seq(const void *a, const void *b, void *ctx) {
    const us_state *st = ctx;
    uint64_t x = st->pods[*(const int *)a].seq, y = st->pods[*(const int *)b].seq;
    return (x > y) - (x < y);
}

#ifdef US_CHECK_INVARIANTS
/* The pods of list l for key k, in list order, into out (at most cap). */
static size_t list_read(const pod_list *l, int k, int *out, size_t cap) {
    size_t n = 0;
    for (int i = l->head[k]; i >= 0 && n < cap; i = l->next[i]) out[n++] = i;
    return n;
}

/* The candidates of workload w in the order adoptable meets them, each
 * where it is met first (a place adopted again is listed anew, and may
 * stay where it was too: met there again, it is the same place, met
 * already). */
static size_t cands_read(const us_state *st, const pod_index *x, int w, int *out, size_t cap) {
    size_t n = 0;
    for (int i = x->fresh_head[w]; i >= 0 && n < cap; i = x->fresh_next[i])
        if (candidate(&st->pods[i], w)) out[n++] = i;
    size_t nfresh = n;
    for (size_t k = x->ccur[w]; k < x->cfirst[w + 1] && n < cap; k++) {
        bool met = false;
        for (size_t j = 0; j < nfresh && !met; j++) met = out[j] == x->cand[k];
        if (!met && candidate(&st->pods[x->cand[k]], w)) out[n++] = x->cand[k];
    }
    return n;
}

/* Checking builds: is the index that followed a cycle the one a build
 * makes now (lists per node in pod order, each workload's pods, its
 * candidates in the order a report adopts them)?  1 yes, 0 no, -1 when
 * memory runs out. */
static int pods_index_same(us_engine *e) {
    const us_state *st = &e->st;
    pod_index kept = e->pods;
    unsigned row = e->reports_in_row;
    memset(&e->pods, 0, sizeof e->pods);
    e->reports_in_row = 2;
    pod_index *fresh = pods_index(e);
    e->reports_in_row = row;
    size_t cap = st->npods + 1;
    int *a = malloc(cap * sizeof *a), *b = malloc(cap * sizeof *b);
    int same = fresh && a && b ? 1 : -1;
    for (size_t n = 0; same == 1 && n < st->nnodes; n++) {
        size_t na = list_read(&kept.on, (int)n, a, cap), nb = list_read(&fresh->on, (int)n, b, cap);
        same = na == nb && memcmp(a, b, na * sizeof *a) == 0;
        na = list_read(&kept.pinned, (int)n, a, cap), nb = list_read(&fresh->pinned, (int)n, b, cap);
        same = same && na == nb && memcmp(a, b, na * sizeof *a) == 0;
    }
    for (size_t w = 0; same == 1 && w < st->nworkloads; w++) {
        size_t na = list_read(&kept.of, (int)w, a, cap), nb = list_read(&fresh->of, (int)w, b, cap);
        us_sort_ints(a, na);
        us_sort_ints(b, nb);
        same = na == nb && memcmp(a, b, na * sizeof *a) == 0;
        na = cands_read(st, &kept, (int)w, a, cap), nb = cands_read(st, fresh, (int)w, b, cap);
        same = same && na == nb && memcmp(a, b, na * sizeof *a) == 0;
    }
    free(a);
    free(b);
    pods_forget(e);
    e->pods = kept;
    return same;
}
#endif

/* The index follows the cycle that just ran (the pods it changed, as the
 * state recorded them: us_state.watch), instead of being built again by
 * the next report: a control plane reports after every cycle, and a build
 * passes over every pod several times.  Pods the cycle appended (from
 * index n0 on) join it; a pod that moved moves in the node lists; a pod
 * that became a place to adopt again (evicted, its controller's new pod
 * pending in its place) joins the places, newest last so that the
 * newest is met first.  Dropped when the record is lost or pods moved
 * (generation). */
static void pods_follow(us_engine *e, uint64_t generation, size_t n0) {
    us_state *st = &e->st;
    pod_index *x = &e->pods;
    if (!x->valid) return;
    if (st->watch_lost || st->generation != generation) {
        pods_forget(e);
        return;
    }
    int *adds = malloc((st->nwatch ? st->nwatch : 1) * sizeof *adds);
    size_t nadds = 0;
    if (!adds) {
        pods_forget(e);
        return;
    }
    for (size_t k = 0; k < st->nwatch; k++) {
        const us_pod_was *was = &st->watch[k];
        const us_pod *p = &st->pods[was->pod];
        if ((size_t)was->pod >= n0) {
            adds[nadds++] = was->pod;
            continue;
        }
        list_move(&x->on, was->pod, was->node, p->node);
        bool was_place = was->state == US_POD_PENDING && !was->named && !was->gone;
        if (!was_place && candidate(p, p->workload)) adds[nadds++] = was->pod;
    }
    us_sort(adds, nadds, sizeof *adds, by_seq, st);
    for (size_t k = 0; k < nadds && x->valid; k++) pods_index_add(e, adds[k], (size_t)adds[k] >= n0);
    free(adds);
#ifdef US_CHECK_INVARIANTS
    if (x->valid && !e->broken && pods_index_same(e) == 0)
        e->broken = "invariant \"pod-index\" broken: the pod index that followed the cycle is "
                    "not the one a build makes (a change to a pod the state did not record?)";
#endif
}

/* New workloads' pods created and their rules checked (settle_pods), the
 * pods appended joining the pod index. */
static void settle_new(us_engine *e) {
    if (!e->unsubmitted && !e->underived) return;
    size_t from = e->st.npods;
    forget_used(e);
    settle_pods(e);
    pods_index_workloads(e);
    pods_index_add_from(e, from);
}

/* The pod after i (-1: the first) on node n: through the index x, or a
 * scan without one. */
static int next_on(const us_state *st, const pod_index *x, int n, int i) {
    if (x) return i < 0 ? x->on.head[n] : x->on.next[i];
    for (size_t k = (size_t)(i + 1); k < st->npods; k++)
        if (st->pods[k].node == n) return (int)k;
    return -1;
}

/* ---- room on a node ---------------------------------------------------------------- */

/* Take req on u when it fits; else name the resource that runs short. */
static bool take(us_use *u, const us_node *cap, us_res req, int slot, const char **res) {
    if (!us_use_fits(u, cap, req, slot)) {
        *res = "gpu"; /* devices, when no sum is over */
        for (int r = US_NRES - 1; r >= 0; r--)
            if (us_sat_add(u->used.v[r], req.v[r]) > cap->cap.v[r]) *res = us_res_names[r];
        return false;
    }
    us_use_add(u, cap, req, slot);
    return true;
}

/* Can a fraction of a device (milli) go on slot i of u? */
static bool slot_has_room(const us_use *u, const us_node *cap, int i, int64_t milli) {
    return u->shared[i] ? u->shared[i] + milli <= US_GPU_UNIT : us_use_free_gpus(u, cap) >= 1;
}

/* The device a fractional request takes in both views at once (now: a,
 * and where the plan ends: b, or NULL when only now counts): a pod holds
 * one device, so a slot free in each view apart is not enough (fuzz_api
 * found a pod reported running put on a device that pipelined pods had
 * filled as planned).  prefer (a slot, or -1) when it has room: a pod keeps
 * its device.  Else the fullest slot with room in both (packing keeps
 * whole devices free), ties to the lowest.  -1 when none has room. */
static int common_slot(const us_use *a, const us_use *b, const us_node *cap, int64_t milli, int prefer) {
    int best = -1, best_fill = -1;
    for (int i = 0; i < cap->gpus && i < US_MAX_GPUS; i++) {
        if (!slot_has_room(a, cap, i, milli) || (b && !slot_has_room(b, cap, i, milli))) continue;
        if (i == prefer) return i;
        int fill = a->shared[i] + (b ? b->shared[i] : 0);
        if (fill > best_fill) {
            best = i;
            best_fill = fill;
        }
    }
    return best;
}

/* Would the pods on node n fit a node shaped like cap, with pod `extra`
 * (or -1) moved onto it?  Checked twice: running and terminating pods (what
 * the node physically holds), and running and pipelined pods (what the
 * engine has planned for it).  A fractional extra pod needs one device
 * with room in both (*slot: the one it takes; -1 for other pods; slot may
 * be NULL); prefer is the device it holds now on n, or -1.  On false, *res
 * names the resource short. */
static bool node_holds(const us_state *st, const pod_index *x, int n, const us_node *cap, int extra,
                       bool extra_releasing, int prefer, int *slot, const char **res) {
    us_use u[2];
    memset(u, 0, sizeof u);
    for (int pass = 0; pass < 2; pass++) {
        us_pod_state other = pass == 0 ? US_POD_RELEASING : US_POD_PIPELINED;
        for (int i = next_on(st, x, n, -1); i >= 0; i = next_on(st, x, n, i)) {
            const us_pod *p = &st->pods[i];
            if (i == extra || p->gone || p->node != n ||
                (p->state != US_POD_RUNNING && p->state != other))
                continue;
            if (!take(&u[pass], cap, st->workloads[p->workload].request, p->shared_dev, res)) return false;
        }
    }
    if (slot) *slot = -1;
    if (extra < 0) return true;
    us_res req = st->workloads[st->pods[extra].workload].request;
    int s = -1;
    if (us_req_is_fractional(req)) {
        /* a terminating pod holds its room now, not where the plan ends */
        s = common_slot(&u[0], extra_releasing ? NULL : &u[1], cap, req.v[US_GPU], prefer);
        if (s < 0 && us_use_fits(&u[0], cap, req, -1) && (extra_releasing || us_use_fits(&u[1], cap, req, -1))) {
            *res = "gpu"; /* room on a device in each view, but not on one device in both */
            return false;
        }
    }
    for (int pass = 0; pass < 2; pass++)
        if (!(extra_releasing && pass == 1) && !take(&u[pass], cap, req, s, res)) return false;
    if (slot) *slot = s;
    return true;
}

/* ---- nodes ------------------------------------------------------------------------ */

/* The pods on node n (when on) and those pinned to it (when pinned), in
 * *out (the caller's to free), those on it first (*non of them): from the
 * pod index x when there is one, else one pass over the pods.  -1 when out
 * of memory. */
static int pods_at(const us_state *st, const pod_index *x, int n, bool on, bool pinned, int **out,
                   size_t *np, size_t *non) {
    size_t cap = 1;
    *np = *non = 0;
    for (int i = x && on ? x->on.head[n] : -1; i >= 0; i = x->on.next[i]) cap++;
    for (int i = x && pinned ? x->pinned.head[n] : -1; i >= 0; i = x->pinned.next[i]) cap++;
    if (!x) cap += 2 * st->npods;
    if (!(*out = malloc(cap * sizeof **out))) return -1;
    for (int i = x && on ? x->on.head[n] : -1; i >= 0; i = x->on.next[i]) (*out)[(*np)++] = i;
    for (size_t i = 0; !x && on && i < st->npods; i++)
        if (st->pods[i].node == n) (*out)[(*np)++] = (int)i;
    *non = *np;
    for (int i = x && pinned ? x->pinned.head[n] : -1; i >= 0; i = x->pinned.next[i]) (*out)[(*np)++] = i;
    for (size_t i = 0; !x && pinned && i < st->npods; i++)
        if (st->pods[i].pin == n) (*out)[(*np)++] = (int)i;
    return 0;
}

static int upsert_node(us_engine *e, const cJSON *o, us_error *err) {
    us_state *st = &e->st;
    us_err ie = {0};
    us_node n;
    const char *res;
    int idx;
    if (us_scenario_parse_node(o, "node", &n, &ie) < 0) return fail_from(err, &ie);
    idx = find_node(e, n.name);
    if (idx == -2) {
        us_node_free(&n);
        return nomem(err);
    }
    if (idx < 0) {
        mark m = mark_state(st);
        int old = find_removed_node(e, n.name, n.pool);
        if (old == -2) {
            us_node_free(&n);
            return nomem(err);
        }
        size_t from = st->npods;
        if ((idx = us_state_add_node(st, &n)) < 0) return nomem(err); /* n freed */
        pods_index_nodes(e);
        if (us_life_add_new_node(st, idx, e->now, pod_name_held, e) < 0) {
            rollback(e, m);
            return nomem(err);
        }
        /* its DaemonSet pods join the pod index */
        pods_index_add_from(e, from);
        /* a node that comes back: the pods pinned to it waited for it
         * (us_life_remove_node), and those that finished there keep it for
         * the record; they follow it to its new entry, and the old one,
         * unreferenced, goes at the next tidy (as it would have gone
         * already had nothing referred to it) */
        for (size_t i = 0; old >= 0 && i < st->npods; i++) {
            us_pod *p = &st->pods[i];
            if (p->pin == old) p->pin = idx;
            if (p->node == old) p->node = idx;
        }
        if (old >= 0) {
            e->untidy = true;
            pods_forget(e); /* the lists of the old entry would be the new one's */
        }
        return ok(err);
    }
    us_node *cur = &st->nodes[idx];
    int rc = US_OK;
    if (strcmp(cur->pool, n.pool) != 0) {
        rc = fail(err, US_EINVAL,
                  "node.pool: \"%s\" is in pool \"%s\"; a node's pool cannot change (remove the "
                  "node and add it again)", cur->name, cur->pool);
        goto out;
    }
    pod_index *x = pods_index(e);
    if (!node_holds(st, x, idx, &n, -1, false, -1, NULL, &res)) {
        rc = fail(err, US_EINVAL,
                  "node.%s: the pods on \"%s\" hold more than that; report them gone or let them "
                  "finish first", res, cur->name);
        goto out;
    }
    bool relabel = cur->labels.n != n.labels.n;
    for (size_t i = 0; !relabel && i < n.labels.n; i++) {
        const char *v = us_labels_get(&cur->labels, n.labels.items[i].key);
        relabel = !v || strcmp(v, n.labels.items[i].value) != 0;
    }
    relabel = relabel || !us_taints_equal(&cur->taints, &n.taints);
    if (relabel || memcmp(&cur->cap, &n.cap, sizeof cur->cap) != 0 || cur->gpus != n.gpus ||
        cur->unschedulable != n.unschedulable)
        us_state_node_specs_changed(st);
    us_labels old = cur->labels;
    cur->labels = n.labels;
    n.labels = old;
    us_taints oldt = cur->taints;
    cur->taints = n.taints;
    n.taints = oldt;
    cur->cap = n.cap;
    cur->gpus = n.gpus;
    cur->unschedulable = n.unschedulable;
    if (relabel) {
        /* the DaemonSets follow: through the pods pinned to the node, from
         * the pod index when there is one; their new pods join it */
        size_t np, non, from = st->npods;
        int *pods = NULL;
        if (pods_at(st, x, idx, false, true, &pods, &np, &non) < 0 ||
            us_life_node_changed_listed(st, idx, pods, np, e->now, pod_name_held, e) < 0) {
            rc = nomem(err);
            pods_forget(e);
        } else {
            ok(err);
        }
        free(pods);
        pods_index_add_from(e, from);
        e->untidy = true;
    } else {
        ok(err);
    }
out:
    us_node_free(&n);
    return rc;
}

US_API int us_engine_upsert_node(us_engine *e, const us_node_spec *spec, us_error *err) {
    build b;
    cJSON *o;
    int rc;
    GUARD_POD(e, err);
    if (!spec) return fail(err, US_EINVAL, "node: NULL spec");
    build_init(&b);
    o = node_object(spec, &b);
    if ((rc = built(&b, o, "node", err)) == US_OK) rc = upsert_node(e, o, err);
    build_free(&b);
    return rc;
}

US_API int us_engine_upsert_node_json(us_engine *e, const char *json, us_error *err) {
    cJSON *o;
    int rc;
    GUARD_POD(e, err);
    if ((rc = parse_text(json, "node", &o, err)) != US_OK) return rc;
    rc = upsert_node(e, o, err);
    cJSON_Delete(o);
    return rc;
}

/* A node leaves (a cluster scaling down removes nodes one at a time): its
 * pods are taken from the pod index when there is one (the pods on it and
 * pinned to it), which keeps up with them; else one pass over the pods. */
US_API int us_engine_remove_node(us_engine *e, const char *name, us_error *err) {
    int n, *pods;
    size_t np;
    GUARD_POD(e, err);
    if (!name) return fail(err, US_EINVAL, "node: NULL name");
    if ((n = find_node(e, name)) < 0)
        return fail(err, US_ENOENT, "node \"%s\" is not in the cluster", name);
    pod_index *x = pods_index(e);
    us_state *st = &e->st;
    size_t was_on; /* pods[0..was_on) were on n */
    if (pods_at(st, x, n, true, true, &pods, &np, &was_on) < 0) return nomem(err);
    us_life_remove_node_listed(st, n, pods, np, e->now);
    /* the pods lost with it are off its list; one that became a place to
     * adopt again keeps its age, older than the places the index lists
     * as new: the index goes (rare: a reported pod stays named) */
    bool stale = false;
    for (size_t k = 0; x && k < was_on; k++) {
        const us_pod *p = &st->pods[pods[k]];
        if (p->gone || p->node == n) continue;
        list_move(&x->on, pods[k], n, -1);
        stale = stale || candidate(p, p->workload);
    }
    if (stale) pods_forget(e);
    free(pods);
    e->untidy = true;
    return ok(err);
}

/* ---- queues ------------------------------------------------------------------------ */

/* A workload of queue q that holds it (not one kept only for its pods
 * gone, see workload_unlisted), or -1; *kept tells whether such a kept
 * one is of q. */
static int queue_user_of(const us_state *st, int q, bool *kept) {
    *kept = false;
    for (size_t i = 0; i < st->nworkloads; i++) {
        if (st->workloads[i].queue != q) continue;
        if (!workload_unlisted(&st->workloads[i])) return (int)i;
        *kept = true;
    }
    return -1;
}

/* The workload that holds queue q, or -1 (none), -2 (out of memory).  A
 * finished workload kept only for its pods gone holds nothing, but would
 * still refer to q: such ones go first, with their pods (tidy_pods). */
static int queue_user(us_engine *e, int q) {
    bool kept;
    int user = queue_user_of(&e->st, q, &kept);
    if (user >= 0 || !kept) return user;
    tidy_pods(e, true);
    return queue_user_of(&e->st, q, &kept) >= 0 || kept ? -2 : -1;
}

static bool qres_same(const us_qres *a, const us_qres *b) {
    for (int r = 0; r < US_NRES; r++)
        if (a[r].quota != b[r].quota || a[r].limit != b[r].limit || a[r].over_quota_weight != b[r].over_quota_weight)
            return false;
    return true;
}

/* Does q say what cur says (a queue sent again unchanged, as a control
 * plane does for every queue when its watch lists again)? */
static bool queue_same(const us_queue *cur, const us_queue *q) {
    if (cur->parent != q->parent || cur->priority != q->priority || !qres_same(cur->res, q->res) ||
        cur->npools != q->npools)
        return false;
    for (size_t i = 0; i < q->npools; i++) {
        const us_qpool *a = &cur->pools[i], *b = &q->pools[i];
        if (strcmp(a->pool, b->pool) != 0 || !qres_same(a->res, b->res) || memcmp(a->set, b->set, sizeof a->set))
            return false;
    }
    return true;
}

static int upsert_queue(us_engine *e, const cJSON *o, us_error *err) {
    us_state *st = &e->st;
    us_err ie = {0};
    us_queue q;
    int idx, user, rc = US_OK;
    if (us_scenario_parse_queue(o, st, "queue", &q, &ie) < 0) return fail_from(err, &ie);
    idx = us_state_queue_index(st, q.name);
    if (idx >= 0 && queue_same(&st->queues[idx], &q)) {
        /* nothing to check or derive again */
        us_queue_free(&q);
        return ok(err);
    }
    if (q.parent >= 0) {
        const char *pname = st->queues[q.parent].name;
        /* only a queue already in the tree can close a cycle (a walk to
         * the root per new queue would make a deep chain quadratic) */
        for (int a = idx >= 0 ? q.parent : -1; a >= 0; a = st->queues[a].parent) {
            if (a == idx) {
                rc = fail(err, US_EINVAL, "queue.parent: \"%s\" %s", pname,
                          q.parent == idx ? "is the queue itself"
                                          : "is below this queue: that would make a cycle");
                goto out;
            }
        }
        if ((user = queue_user(e, q.parent)) == -2) {
            rc = nomem(err);
            goto out;
        }
        if (user >= 0) {
            rc = fail(err, US_EINVAL,
                      "queue.parent: \"%s\" holds workload \"%s\"; workloads go to leaf queues "
                      "only, so it cannot have children", pname, st->workloads[user].name);
            goto out;
        }
    }
    if (idx < 0) {
        /* a new queue holds no workload: of what rederive derives, only
         * its own depth and leaf flag and its parent's leaf flag change
         * (a tree built one queue at a time is not a pass over the queues
         * and workloads per queue) */
        int parent = q.parent;
        if ((idx = us_state_add_queue(st, &q)) < 0) return nomem(err); /* q freed */
        st->queues[idx].leaf = true;
        st->queues[idx].depth = parent >= 0 ? st->queues[parent].depth + 1 : 0;
        if (parent >= 0) st->queues[parent].leaf = false;
        return ok(err);
    } else {
        us_queue *cur = &st->queues[idx];
        us_qpool *pools = cur->pools;
        size_t npools = cur->npools;
        cur->parent = q.parent;
        cur->priority = q.priority;
        memcpy(cur->res, q.res, sizeof cur->res);
        cur->pools = q.pools;
        cur->npools = q.npools;
        q.pools = pools;
        q.npools = npools;
        us_queue_free(&q);
    }
    if (rederive(st) < 0) return nomem(err);
    return ok(err);
out:
    us_queue_free(&q);
    return rc;
}

US_API int us_engine_upsert_queue(us_engine *e, const us_queue_spec *spec, us_error *err) {
    build b;
    cJSON *o;
    int rc;
    GUARD_CHANGE(e, err);
    if (!spec) return fail(err, US_EINVAL, "queue: NULL spec");
    build_init(&b);
    o = queue_object(spec, &b);
    if ((rc = built(&b, o, "queue", err)) == US_OK) rc = upsert_queue(e, o, err);
    build_free(&b);
    return rc;
}

US_API int us_engine_upsert_queue_json(us_engine *e, const char *json, us_error *err) {
    cJSON *o;
    int rc;
    GUARD_CHANGE(e, err);
    if ((rc = parse_text(json, "queue", &o, err)) != US_OK) return rc;
    rc = upsert_queue(e, o, err);
    cJSON_Delete(o);
    return rc;
}

US_API int us_engine_remove_queue(us_engine *e, const char *name, us_error *err) {
    us_state *st;
    int q, user;
    GUARD_CHANGE(e, err);
    if (!name) return fail(err, US_EINVAL, "queue: NULL name");
    st = &e->st;
    if ((q = us_state_queue_index(st, name)) < 0)
        return fail(err, US_ENOENT, "queue \"%s\" does not exist", name);
    for (size_t i = 0; i < st->nqueues; i++)
        if (st->queues[i].parent == q)
            return fail(err, US_EBUSY, "queue \"%s\" has a child queue \"%s\"", name,
                        st->queues[i].name);
    if ((user = queue_user(e, q)) == -2) return nomem(err);
    if (user >= 0)
        return fail(err, US_EBUSY, "queue \"%s\" holds workload \"%s\"%s", name,
                    st->workloads[user].name,
                    st->workloads[user].state == US_WL_ACTIVE ? "" : " (still terminating)");
    us_queue_free(&st->queues[q]);
    memmove(&st->queues[q], &st->queues[q + 1], (st->nqueues - (size_t)q - 1) * sizeof *st->queues);
    st->nqueues--;
    us_state_queues_renumbered(st);
    for (size_t i = 0; i < st->nqueues; i++)
        if (st->queues[i].parent > q) st->queues[i].parent--;
    for (size_t i = 0; i < st->nworkloads; i++)
        if (st->workloads[i].queue > q) st->workloads[i].queue--;
    if ((size_t)q < e->nfigs) {
        memmove(&e->figs[q], &e->figs[q + 1], (e->nfigs - (size_t)q - 1) * sizeof *e->figs);
        e->nfigs--;
    }
    /* cannot fail for want of memory in a way that matters: the derived
     * fields are recomputed at every change anyway */
    if (rederive(st) < 0) return nomem(err);
    return ok(err);
}

/* ---- workloads ---------------------------------------------------------------------- */

static bool labels_same(const us_labels *a, const us_labels *b) {
    if (a->n != b->n) return false;
    for (size_t i = 0; i < a->n; i++) {
        const char *v = us_labels_get(b, a->items[i].key);
        if (!v || strcmp(v, a->items[i].value) != 0) return false;
    }
    return true;
}

/* The first field a live workload may not change that w changes, or NULL. */
static const char *immutable_change(const us_workload *cur, const us_workload *w) {
    if (cur->queue != w->queue) return "queue";
    if (cur->external != w->external) return "external";
    if (cur->priority != w->priority) return "priority";
    if (cur->preemptibility != w->preemptibility) return "preemptibility";
    if (cur->controller != w->controller) return "controller";
    if (strcmp(cur->pool, w->pool) != 0) return "pool";
    if (!labels_same(&cur->node_selector, &w->node_selector)) return "node_selector";
    if (!labels_same(&cur->labels, &w->labels)) return "labels";
    if (!us_tolerations_equal(&cur->tolerations, &w->tolerations)) return "tolerations";
    for (int r = 0; r < US_NRES; r++)
        if (cur->request.v[r] != w->request.v[r]) return "requests";
    return NULL;
}

static int upsert_workload(us_engine *e, const cJSON *o, double now, us_error *err) {
    static const char *const sim_only[][2] = {
        {"submit_at", "the engine submits a workload when it is upserted"},
        {"duration", "the caller completes a workload with us_engine_complete_workload"},
        {"pods", "the caller reports running pods with us_engine_upsert_pod"}};
    us_state *st = &e->st;
    us_err ie = {0};
    us_workload w;
    const char *what;
    int idx, rc;
    if ((rc = check_time(e, now, err)) != US_OK) return rc;
    for (size_t i = 0; cJSON_IsObject(o) && i < sizeof sim_only / sizeof sim_only[0]; i++)
        if (field(o, sim_only[i][0]))
            return fail(err, US_EINVAL, "workload.%s: a simulator field, not used here: %s",
                        sim_only[i][0], sim_only[i][1]);
    if (us_scenario_parse_workload(o, st, "workload", &w, &ie) < 0) return fail_from(err, &ie);
    idx = find_workload(e, w.name);
    if (idx == -2) {
        us_workload_free(&w);
        return nomem(err);
    }
    if (idx < 0) {
        w.submit_at = now; /* waiting: its pods come at the next settle */
        if (us_state_add_workload(st, &w) < 0) return nomem(err); /* w freed */
        pods_index_workloads(e);
        if (!e->unsubmitted && !e->underived) e->new_from = st->nworkloads - 1;
        e->unsubmitted = e->underived = true;
        e->now = now;
        return ok(err);
    }
    us_workload *cur = &st->workloads[idx];
    if ((what = immutable_change(cur, &w))) {
        rc = fail(err, US_EINVAL,
                  "workload.%s: cannot change on live workload \"%s\" (only replicas, min_member, "
                  "succeeded and termination_grace can); remove the workload and submit it again",
                  what, cur->name);
        us_workload_free(&w);
        return rc;
    }
    e->now = now;
    cur->termination_grace = w.termination_grace;
    cur->min_member = w.min_member;
    cur->succeeded = w.succeeded;
    rc = 0;
    if (cur->controller != US_CTRL_DAEMONSET && cur->replicas != w.replicas) {
        /* its pods from the pod index when there is one; the pods it
         * adds join the index, those it stops are left for a later tidy */
        int *pods;
        size_t n, from = st->npods;
        if (workload_pods(e, idx, &pods, &n) < 0) {
            us_workload_free(&w);
            return nomem(err);
        }
        rc = us_life_scale_listed(st, idx, w.replicas, pods, n, now, pod_name_held, e);
        free(pods);
        pods_index_add_from(e, from);
        e->untidy = true;
    } else {
        cur->replicas = w.replicas;
    }
    /* a gang now below min_member is stopped by the next cycle, with decisions */
    us_workload_free(&w);
    return rc < 0 ? nomem(err) : ok(err);
}

US_API int us_engine_upsert_workload(us_engine *e, const us_workload_spec *spec, double now,
                                     us_error *err) {
    build b;
    cJSON *o;
    int rc;
    GUARD_WORKLOAD(e, err);
    if (!spec) return fail(err, US_EINVAL, "workload: NULL spec");
    build_init(&b);
    o = workload_object(spec, &b);
    if ((rc = built(&b, o, "workload", err)) == US_OK) rc = upsert_workload(e, o, now, err);
    build_free(&b);
    return rc;
}

US_API int us_engine_upsert_workload_json(us_engine *e, const char *json, double now,
                                          us_error *err) {
    cJSON *o;
    int rc;
    GUARD_WORKLOAD(e, err);
    if ((rc = parse_text(json, "workload", &o, err)) != US_OK) return rc;
    rc = upsert_workload(e, o, now, err);
    cJSON_Delete(o);
    return rc;
}

/* Shared checks of remove and complete: the live workload named name. */
static int live_workload(us_engine *e, const char *name, double now, int *w, us_error *err) {
    int rc;
    if (!name) return fail(err, US_EINVAL, "workload: NULL name");
    if ((rc = check_time(e, now, err)) != US_OK) return rc;
    if ((*w = find_workload(e, name)) < 0)
        return fail(err, US_ENOENT, "workload \"%s\" is not a live workload", name);
    return US_OK;
}

/* The pods of workload w, in no order (*out the caller's to free): from
 * the pod index while calls of the pod stream follow one another, else
 * one pass over the pods.  -1 when out of memory. */
static int workload_pods(us_engine *e, int w, int **out, size_t *n) {
    const us_state *st = &e->st;
    const pod_index *x = pods_index(e);
    size_t k = 0;
    *n = 0;
    if (x) {
        for (int i = x->of.head[w]; i >= 0; i = x->of.next[i]) k++;
    } else {
        for (size_t i = 0; i < st->npods; i++) k += st->pods[i].workload == w;
    }
    if (!(*out = malloc((k ? k : 1) * sizeof **out))) return -1;
    if (x) {
        for (int i = x->of.head[w]; i >= 0; i = x->of.next[i]) (*out)[(*n)++] = i;
    } else {
        for (size_t i = 0; i < st->npods; i++)
            if (st->pods[i].workload == w) (*out)[(*n)++] = (int)i;
    }
    return 0;
}

/* A workload leaves: deleted, or completed (done: its completed pods hold
 * nothing, and a control plane has no use for them).  Part of the pod
 * stream (serve removes a workload's pods, then the workload): the pod
 * index stays and no pass over every pod is made when it is there. */
static int end_workload(us_engine *e, const char *name, double now, bool done, us_error *err) {
    int w = -1, rc, *pods;
    size_t n;
    GUARD_POD(e, err);
    if ((rc = live_workload(e, name, now, &w, err)) != US_OK) return rc;
    if (workload_pods(e, w, &pods, &n) < 0) return nomem(err);
    e->now = now;
    if (done) us_life_complete_listed(&e->st, w, pods, n, now);
    else us_life_delete_listed(&e->st, w, pods, n, now);
    for (size_t k = 0; done && k < n; k++)
        if (e->st.pods[pods[k]].state == US_POD_COMPLETED) {
            us_pod_go(&e->st, &e->st.pods[pods[k]]);
        }
    free(pods);
    e->untidy = true;
    return ok(err);
}

US_API int us_engine_remove_workload(us_engine *e, const char *name, double now, us_error *err) {
    return end_workload(e, name, now, false, err);
}

US_API int us_engine_complete_workload(us_engine *e, const char *name, double now,
                                       us_error *err) {
    return end_workload(e, name, now, true, err);
}

/* ---- pods ---------------------------------------------------------------------------- */

/* What a caller reports about one pod (us_pod_spec, or its JSON). */
typedef struct pod_report {
    const char *name, *workload, *node, *pin;
    bool terminating;
} pod_report;

/* A pending pod of workload w that an unknown pod reported at node n (on
 * it, or pinned to it; -1: anywhere) may take the place of: a DaemonSet's
 * pod pinned to n, else the newest pending pod not pinned elsewhere.  -1
 * when none, with the reason in err. */
static int adoptable(const us_state *st, pod_index *x, int w, int n, const char *pod, us_error *err) {
    const us_workload *wl = &st->workloads[w];
    bool daemon_here = wl->controller == US_CTRL_DAEMONSET && n >= 0;
    int best = -1;
    if (x && daemon_here) {
        /* its pod pinned to n */
        for (int i = x->pinned.head[n]; i >= 0; i = x->pinned.next[i])
            if (candidate(&st->pods[i], w) && (best < 0 || st->pods[i].seq > st->pods[best].seq)) best = i;
    } else if (x) {
        /* the newest candidate not pinned elsewhere: among the places
         * made since the index was built, then the others */
        for (int *at = &x->fresh_head[w]; *at >= 0 && best < 0;) {
            const us_pod *p = &st->pods[*at];
            if (!candidate(p, w)) { /* taken for good */
                int taken = *at;
                *at = x->fresh_next[taken];
                x->fresh_next[taken] = -2;
            }
            else if (n >= 0 && p->pin >= 0 && p->pin != n) at = &x->fresh_next[*at];
            else best = *at;
        }
        for (size_t k = x->ccur[w]; k < x->cfirst[w + 1] && best < 0; k++) {
            const us_pod *p = &st->pods[x->cand[k]];
            if (!candidate(p, w)) {
                if (k == x->ccur[w]) x->ccur[w]++; /* taken for good */
                continue;
            }
            if (!(n >= 0 && p->pin >= 0 && p->pin != n)) best = x->cand[k];
        }
    } else {
        for (size_t i = 0; i < st->npods; i++) {
            const us_pod *p = &st->pods[i];
            /* a pod a caller named already is that pod, not a free place */
            if (!candidate(p, w)) continue;
            if (n >= 0 && p->pin >= 0 && p->pin != n) continue;
            if (daemon_here && p->pin != n) continue;
            if (best < 0 || p->seq > st->pods[best].seq) best = (int)i;
        }
    }
    if (best < 0) {
        if (wl->controller == US_CTRL_DAEMONSET && n >= 0)
            fail(err, US_EINVAL,
                 "pod.workload: daemonset \"%s\" has no pending pod on \"%s\" for \"%s\" to be "
                 "(its pod there is placed already, or the node does not match it)",
                 wl->name, st->nodes[n].name, pod);
        else
            fail(err, US_EINVAL,
                 "pod.workload: \"%s\" has no pending pod for \"%s\" to be (all its replicas "
                 "are placed)", wl->name, pod);
    }
    return best;
}

/* A pending pod the caller never named is a controller's replacement for
 * a pod that was lost, keeping the lost pod's name (us_life_pod_lost).
 * When the caller reports that name under another workload, the real pod
 * was not lost but adopted by another owner (its ownerReferences
 * changed): the replacement keeps its place in its own workload under a
 * name of its own, "<workload>-<k>" for the first k no live or
 * terminating pod holds, and the name goes to the report.  0, or -1 when
 * out of memory (nothing changed). */
static int rename_placeholder(us_engine *e, int p) {
    us_state *st = &e->st;
    const char *wl = st->workloads[st->pods[p].workload].name;
    size_t len = strlen(wl) + 24;
    char *name = malloc(len);
    if (!name) return -1;
    for (unsigned k = 0;; k++) {
        int live, rel;
        snprintf(name, len, "%s-%u", wl, k);
        if (find_pod_on(e, name, -1, &live, &rel) < 0) {
            free(name);
            return -1;
        }
        if (live < 0 && rel < 0) break;
    }
    free(st->pods[p].name);
    st->pods[p].name = name;
    names_renamed(e, p);
    return 0;
}

/* live (the live pod of a reported name), when it is a replacement
 * rename_placeholder may rename: a pending pod the caller never named, of
 * another workload than the report's; else -1. */
static int replacement_for(const us_state *st, int live, const char *workload) {
    if (live < 0 || !workload || st->pods[live].state != US_POD_PENDING || st->pods[live].named ||
        strcmp(workload, st->workloads[st->pods[live].workload].name) == 0)
        return -1;
    return live;
}

/* Pod p, a pending place of the report's workload, takes the reported
 * name, and the replacement that held it (placeholder, when >= 0) one of
 * its own.  0, or -1 when out of memory (nothing changed). */
static int take_reported_name(us_engine *e, int p, const char *name, int placeholder) {
    char *copy = strdup(name);
    if (!copy || (placeholder >= 0 && rename_placeholder(e, placeholder) < 0)) {
        free(copy);
        return -1;
    }
    free(e->st.pods[p].name);
    e->st.pods[p].name = copy;
    names_renamed(e, p);
    return 0;
}

/* The real pod name is being deleted on node n, not by a decision of the
 * engine (a user, a controller scaling down, a node drain): it terminates
 * there, holding its room, until the caller removes it, and it is no
 * longer one of its workload's replicas -- the same state as a pod the
 * engine evicted.  live: its live incarnation, or -1. */
static int report_terminating(us_engine *e, const pod_report *r, int n, int live, us_error *err) {
    us_state *st = &e->st;
    const char *res;
    int w;
    pod_index *x = pods_index(e);
    int placeholder = replacement_for(st, live, r->workload); /* renamed once the report is accepted */
    if (placeholder >= 0) live = -1;
    if (live >= 0) {
        w = st->pods[live].workload;
        if (r->workload && strcmp(r->workload, st->workloads[w].name) != 0)
            return fail(err, US_EINVAL, "pod.workload: pod \"%s\" belongs to workload \"%s\"", r->name,
                        st->workloads[w].name);
    } else {
        if (!r->workload)
            return fail(err, US_ENOENT,
                        "pod.workload: pod \"%s\" is unknown; name its workload to add it", r->name);
        if ((w = find_workload(e, r->workload)) < 0)
            return fail(err, US_ENOENT, "pod.workload: \"%s\" is not a live workload", r->workload);
    }
    if (strcmp(st->nodes[n].pool, st->workloads[w].pool) != 0)
        return fail(err, US_EINVAL, "pod.node: \"%s\" is in pool \"%s\", not workload \"%s\"'s pool \"%s\"",
                    r->node, st->nodes[n].pool, st->workloads[w].name, st->workloads[w].pool);
    if (live >= 0 && st->pods[live].state == US_POD_RUNNING && st->pods[live].node == n) {
        /* the running pod itself: it releases; its controller's new pod
         * takes its place as a pending pod (named when the caller reports
         * it), as after an eviction */
        us_pod *pd = &st->pods[live];
        int pin = pd->pin;
        us_pod_touch(st, pd);
        pd->state = US_POD_RELEASING;
        pd->release_at = INFINITY;
        pd->named = true;
        if (st->workloads[w].state == US_WL_ACTIVE) {
            int q = us_state_add_pod(st, w, r->name, pin);
            if (q < 0) {
                pods_forget(e);
                return nomem(err); /* consistent: only the replacement is missing */
            }
            pods_index_add(e, q, true);
        }
        return ok(err);
    }
    /* an incarnation the engine did not see on n: added there, terminating;
     * a live incarnation elsewhere stays (the caller reports it apart) */
    mark m = mark_state(st);
    int p = us_state_add_pod(st, w, r->name, -1);
    if (p < 0) return nomem(err);
    st->pods[p].node = n;
    st->pods[p].state = US_POD_RELEASING;
    st->pods[p].release_at = INFINITY;
    st->pods[p].named = true;
    /* the lists do not hold p yet: node_holds adds it as the extra pod */
    int slot;
    if (!node_holds(st, x, n, &st->nodes[n], p, true, -1, &slot, &res)) {
        rollback(e, m);
        return fail(err, US_EINVAL,
                    "pod.node: \"%s\" has not enough %s for terminating pod \"%s\" besides the pods "
                    "running or terminating there", r->node, res, r->name);
    }
    if (placeholder >= 0 && rename_placeholder(e, placeholder) < 0) {
        rollback(e, m);
        return nomem(err);
    }
    st->pods[p].shared_dev = slot;
    pods_index_add(e, p, true);
    return ok(err);
}

/* A reported pod is pinned as the report says, unless it is a DaemonSet's
 * (pinned to its node by its controller).  Only once the report is
 * accepted: a refused call changes nothing. */
static void repin(us_engine *e, int p, int pin) {
    us_pod *pd = &e->st.pods[p];
    if (e->st.workloads[pd->workload].controller == US_CTRL_DAEMONSET || pd->pin == pin) return;
    if (e->pods.valid) list_move(&e->pods.pinned, p, pd->pin, pin);
    us_pod_touch(&e->st, pd);  /* a pin joins the pods passing through (state.h) */
    pd->pin = pin;
}

static int upsert_pod(us_engine *e, const pod_report *r, us_error *err) {
    us_state *st = &e->st;
    const char *res, *name = r->name, *workload = r->workload, *node = r->node;
    int live, rel, w, n = -1, pin = -1, p;
    if (!name || !*name) return fail(err, US_EINVAL, "pod.name: required field is missing");
    /* as the loader's names: a Kubernetes name is at most 253 characters */
    if (strlen(name) > 253)
        return fail(err, US_EINVAL, "pod.name: is %zu characters long, more than the 253 a "
                    "Kubernetes name may have", strlen(name));
    if (node && (n = find_node(e, node)) < 0)
        return fail(err, US_ENOENT, "pod.node: \"%s\" is not a node in the cluster", node);
    if (r->pin && (pin = find_node(e, r->pin)) < 0)
        return fail(err, US_ENOENT, "pod.pin: \"%s\" is not a node in the cluster", r->pin);
    if (r->terminating && n < 0)
        return fail(err, US_EINVAL, "pod.terminating: a terminating pod is on a node: pod.node is required");
    if (!r->terminating && n >= 0 && pin >= 0 && pin != n)
        return fail(err, US_EINVAL, "pod.node: pod \"%s\" is pinned to \"%s\", not \"%s\"", name, r->pin, node);
    if ((!r->terminating && forget_terminating_elsewhere(e, name, n) < 0) ||
        find_pod_on(e, name, n, &live, &rel) < 0)
        return nomem(err);
    /* an evicted pod runs on until it has terminated, as decided; seen
     * still there, it holds its room until the caller says it is gone,
     * whatever its grace period said (a deletion can take longer) */
    if (n >= 0 && rel >= 0 && st->pods[rel].node == n) {
        st->pods[rel].release_at = INFINITY;
        return ok(err);
    }
    if (r->terminating) return report_terminating(e, r, n, live, err);
    int placeholder = replacement_for(st, live, workload); /* renamed once the report is accepted */
    if (placeholder >= 0) live = -1;
    if (live >= 0) {
        w = st->pods[live].workload;
        if (workload && strcmp(workload, st->workloads[w].name) != 0)
            return fail(err, US_EINVAL, "pod.workload: pod \"%s\" belongs to workload \"%s\"", name,
                        st->workloads[w].name);
        p = live;
    } else {
        if (!workload)
            return fail(err, US_ENOENT,
                        "pod.workload: pod \"%s\" is unknown; name its workload to add it", name);
        if ((w = find_workload(e, workload)) < 0)
            return fail(err, US_ENOENT, "pod.workload: \"%s\" is not a live workload", workload);
        if ((p = adoptable(st, pods_index(e), w, n >= 0 ? n : pin, name, err)) < 0)
            return err ? err->code : US_EINVAL;
    }
    const us_workload *wl = &st->workloads[w];
    us_pod *pd = &st->pods[p];
    /* a DaemonSet's pod belongs to its node; any other pod is pinned as
     * the caller says, each report anew */
    int at = n >= 0 ? n : pin;
    if (wl->controller == US_CTRL_DAEMONSET && at >= 0 && pd->pin >= 0 && pd->pin != at)
        return fail(err, US_EINVAL, "pod.%s: daemonset pod \"%s\" belongs on \"%s\", not \"%s\"",
                    n >= 0 ? "node" : "pin", name, st->nodes[pd->pin].name, st->nodes[at].name);
    if (n < 0 && pin >= 0 && strcmp(st->nodes[pin].pool, wl->pool) != 0)
        return fail(err, US_EINVAL, "pod.pin: \"%s\" is in pool \"%s\", not workload \"%s\"'s pool \"%s\"",
                    r->pin, st->nodes[pin].pool, wl->name, wl->pool);
    if (n < 0) {
        if (live < 0) { /* an unknown pending pod: it takes a pending pod's name */
            if (take_reported_name(e, p, name, placeholder) < 0) return nomem(err);
            us_pod_touch(st, pd);
            pd->named = true;
            repin(e, p, pin);
            return ok(err);
        }
        repin(e, p, pin);
        /* pinned elsewhere than the node planned for it (fuzz_api found
         * such a pod written as a state that does not load back): that plan
         * is void, and it is pending again, to be planned anew (its gang,
         * if that breaks it, is stopped by the next cycle, with decisions) */
        if (pd->state == US_POD_PIPELINED && pd->pin >= 0 && pd->pin != pd->node) {
            if (e->pods.valid) list_move(&e->pods.on, p, pd->node, -1);
            us_pod_touch(st, pd);
            pd->state = US_POD_PENDING;
            pd->node = -1;
            pd->shared_dev = -1;
        }
        /* a pipelined pod is unbound until its room is free: as decided
         * (pending again, its gang would break and stop the pods it has
         * running) */
        if (pd->state == US_POD_PENDING || pd->state == US_POD_PIPELINED) {
            us_pod_touch(st, pd);
            pd->named = true;
            return ok(err);
        }
        pods_forget(e); /* a place to adopt again */
        if (us_life_pod_lost(st, p, false, e->now) < 0) return nomem(err);
        pd->named = true; /* the same real pod, pending again */
        e->untidy = true;
        return ok(err);
    }
    if (pd->node == n && pd->state == US_POD_RUNNING) {
        repin(e, p, pin);
        return ok(err);
    }
    if (strcmp(st->nodes[n].pool, wl->pool) != 0)
        return fail(err, US_EINVAL, "pod.node: \"%s\" is in pool \"%s\", not workload \"%s\"'s pool \"%s\"",
                    node, st->nodes[n].pool, wl->name, wl->pool);
    pod_index *x = pods_index(e);
    int slot;
    if (!node_holds(st, x, n, &st->nodes[n], p, false, pd->node == n ? pd->shared_dev : -1, &slot, &res))
        return fail(err, US_EINVAL,
                    "pod.node: \"%s\" has not enough %s for pod \"%s\" besides the pods running, "
                    "terminating or pipelined there", node, res, name);
    if (live < 0 && take_reported_name(e, p, name, placeholder) < 0) return nomem(err);
    repin(e, p, pin);
    us_pod_touch(st, pd);
    pd->named = true;
    pd->shared_dev = slot;
    if (x) list_move(&x->on, p, pd->node, n);
    pd->node = n;
    pd->state = US_POD_RUNNING;
    return ok(err);
}

US_API int us_engine_upsert_pod(us_engine *e, const us_pod_spec *spec, us_error *err) {
    GUARD_POD(e, err);
    if (!spec) return fail(err, US_EINVAL, "pod: NULL spec");
    const char *const strs[] = {spec->name, spec->workload, spec->node, spec->pin};
    const char *const keys[] = {"name", "workload", "node", "pin"};
    for (int k = 0; k < 4; k++)
        if (strs[k] && us_utf8_invalid(strs[k], strlen(strs[k])) >= 0)
            return fail(err, US_EINVAL, "pod.%s: invalid UTF-8 at byte offset %ld", keys[k],
                        us_utf8_invalid(strs[k], strlen(strs[k])));
    pod_report r = {spec->name, spec->workload, spec->node, spec->pin, spec->terminating != 0};
    return upsert_pod(e, &r, err);
}

US_API int us_engine_upsert_pod_json(us_engine *e, const char *json, us_error *err) {
    static const char *const keys[] = {"name", "workload", "node", "state", "pin"};
    enum { NKEYS = 5 };
    const char *s[NKEYS] = {NULL, NULL, NULL, NULL, NULL};
    cJSON *o;
    const cJSON *f;
    int rc;
    GUARD_POD(e, err);
    if ((rc = parse_text(json, "pod", &o, err)) != US_OK) return rc;
    if (!cJSON_IsObject(o)) {
        rc = fail(err, US_EINVAL, "pod: must be an object");
        goto out;
    }
    for (f = o->child; f; f = f->next) {
        size_t k = 0;
        while (k < NKEYS && strcmp(f->string, keys[k]) != 0) k++;
        if (k == NKEYS) {
            rc = fail(err, US_EINVAL, "pod.%s: unknown field (name, workload, node, state, pin)", f->string);
            goto out;
        }
        if (cJSON_IsNull(f)) continue;
        if (!cJSON_IsString(f)) {
            rc = fail(err, US_EINVAL, "pod.%s: must be a string", f->string);
            goto out;
        }
        if (s[k]) {
            rc = fail(err, US_EINVAL, "pod.%s: duplicate field", f->string);
            goto out;
        }
        s[k] = f->valuestring;
    }
    if (s[3] && strcmp(s[3], "running") != 0 && strcmp(s[3], "pending") != 0 && strcmp(s[3], "releasing") != 0) {
        rc = fail(err, US_EINVAL, "pod.state: \"%s\" is not a state a pod can be reported in "
                  "(running, pending, releasing; a pod that is gone is removed)", s[3]);
        goto out;
    }
    if (s[3] && (strcmp(s[3], "pending") != 0) != (s[2] != NULL)) {
        rc = fail(err, US_EINVAL, "pod.state: \"%s\" %s", s[3],
                  s[2] ? "with a node: a pod on a node is running or releasing" : "needs a node");
        goto out;
    }
    pod_report r = {s[0], s[1], s[2], s[4], s[3] && strcmp(s[3], "releasing") == 0};
    rc = upsert_pod(e, &r, err);
out:
    cJSON_Delete(o);
    return rc;
}

/* A removal is one of a control plane's pod reports (a pod deleted comes
 * between the reports of its neighbours): the pod index stays, and the
 * pod is only marked gone (see settle_change). */
US_API int us_engine_remove_pod(us_engine *e, const char *name, us_error *err) {
    int live, rel;
    GUARD_POD(e, err);
    if (!name) return fail(err, US_EINVAL, "pod: NULL name");
    if (find_pod(e, name, &live, &rel) < 0) return nomem(err);
    if (rel >= 0) {
        us_pod_go(&e->st, &e->st.pods[rel]);   /* terminated early: its room is free now */
        e->untidy = true;
        return ok(err);
    }
    if (live < 0) return fail(err, US_ENOENT, "pod \"%s\" is unknown", name);
    int was_on = e->st.pods[live].node;
    if (us_life_pod_lost(&e->st, live, true, e->now) < 0) return nomem(err);
    /* off its node, and a place to adopt again */
    if (e->pods.valid && e->st.pods[live].node != was_on) list_move(&e->pods.on, live, was_on, -1);
    /* a new incarnation (seq) in the same place under the same name: the
     * name index still holds */
    pods_index_add(e, live, false);
    e->untidy = true;
    return ok(err);
}

/* ---- cycles --------------------------------------------------------------------------- */

/* Per-decision workload names and flattened annotations for the infos;
 * before tidy, while the workload indices the decisions name still hold
 * (a cycle never renumbers workloads).  Names are copied: tidying may drop
 * the workload before the caller reads the decision. */
static int index_cycle(us_engine *e) {
    const us_cycle_log *log = &e->log;
    const us_state *st = &e->st;
    size_t nann = 0, k = 0;
    if (log->ndecisions && !(e->dec_workload = calloc(log->ndecisions, sizeof *e->dec_workload)))
        return -1;
    for (size_t i = 0; i < log->ndecisions; i++) {
        int w = log->decisions[i].workload;
        if (w >= 0 && (size_t)w < st->nworkloads &&
            !(e->dec_workload[i] = strdup(st->workloads[w].name)))
            return -1;
    }
    for (size_t i = 0; i < log->nevents; i++) nann += log->events[i].annotations.n;
    if (log->nevents && !(e->ann_first = calloc(log->nevents, sizeof *e->ann_first))) return -1;
    if (nann && !(e->ann = calloc(nann, sizeof *e->ann))) return -1;
    for (size_t i = 0; i < log->nevents; i++) {
        const us_labels *a = &log->events[i].annotations;
        e->ann_first[i] = k;
        for (size_t j = 0; j < a->n; j++, k++)
            e->ann[k] = (us_label){a->items[j].key, a->items[j].value};
    }
    return 0;
}

static void event_info(const us_engine *e, size_t i, us_event_info *out) {
    const us_event *ev = &e->log.events[i];
    out->type = ev->type;
    out->reason = ev->reason;
    out->object = ev->object;
    out->message = ev->message;
    out->nannotations = ev->annotations.n;
    out->annotations = ev->annotations.n ? e->ann + e->ann_first[i] : NULL;
}

/* Call the event callback once per event of the last cycle.  The callback
 * is read again before every event: one that replaces or removes itself
 * (us_engine_on_event from inside) takes effect from the next event on. */
static void deliver_events(us_engine *e) {
    e->busy = true;
    for (size_t i = 0; i < e->log.nevents && e->cb; i++) {
        us_event_info info;
        event_info(e, i, &info);
        e->cb(e, &info, e->cb_data);
    }
    e->busy = false;
}

US_API int us_engine_run_cycle(us_engine *e, double now, us_error *err) {
    us_err ie = {0};
    us_queue_figures *figs;
    int rc;
    GUARD_HANDLE(e, err);
    forget_used(e);
    e->reports_in_row = 0;
    settle(e); /* it starts tidy */
    if (e->broken) return fail(err, US_EINVARIANT, "%s", e->broken);
    if ((rc = check_time(e, now, err)) != US_OK) return rc;
    if (!(figs = calloc(e->st.nqueues ? e->st.nqueues : 1, sizeof *figs))) return nomem(err);
    free_cycle(e);
    e->log = e->pending; /* events since the last cycle come first */
    us_cycle_log_init(&e->pending);
    /* the simulator seeds cycle i with i: the same inputs decide the same */
    if (e->pol) us_policy_seed(e->pol, e->cycles + 1);
    memset(&e->prof, 0, sizeof e->prof);
    e->copts.profile = &e->prof; /* only for this cycle: a reload's dry run is not timed */
    uint64_t generation = e->st.generation;
    size_t n0 = e->st.npods;
    if (e->pods.valid) us_state_watch_start(&e->st);
    rc = us_cycle_run(&e->st, e->pol, now, &e->copts, &e->log, figs, NULL, &ie);
    us_state_watch_stop(&e->st);
    if (rc < 0) pods_forget(e);
    else pods_follow(e, generation, n0);
    e->copts.profile = NULL;
    e->now = now;
    e->cycles++;
    if (rc < 0 && ie.code == US_EINVARIANT) us_err_prefix(&ie, "cycle %llu: ", (unsigned long long)e->cycles);
    if (rc < 0 || index_cycle(e) < 0) {
        free(figs);
        free_cycle(e);
        tidy_now(e);
        return rc < 0 ? fail_from(err, &ie) : nomem(err);
    }
    free(e->figs);
    e->figs = figs;
    e->nfigs = e->st.nqueues;
    tidy_now(e);
    deliver_events(e);
    return ok(err);
}

US_API double us_engine_time(const us_engine *e) { return e ? e->now : 0; }
US_API uint64_t us_engine_cycle_count(const us_engine *e) { return e ? e->cycles : 0; }

US_API void us_engine_on_event(us_engine *e, us_event_cb cb, void *data) {
    if (!e) return;
    e->cb = cb;
    e->cb_data = cb ? data : NULL;
}

US_API size_t us_engine_decision_count(const us_engine *e) { return e ? e->log.ndecisions : 0; }
US_API size_t us_engine_event_count(const us_engine *e) { return e ? e->log.nevents : 0; }

US_API int us_engine_decision(const us_engine *e, size_t i, us_decision_info *out) {
    if (!e || !out || i >= e->log.ndecisions) return US_ENOENT;
    const us_decision *d = &e->log.decisions[i];
    out->op = d->op == US_OP_BIND ? US_DECISION_BIND
              : d->op == US_OP_PIPELINE ? US_DECISION_PIPELINE
                                        : US_DECISION_EVICT;
    out->op_name = us_op_names[d->op];
    out->action = d->action == US_ACT_NONE ? NULL : us_action_names[d->action];
    out->pod = d->pod;
    out->workload = e->dec_workload ? e->dec_workload[i] : NULL;
    out->node = d->node;
    /* char ** read through const char *const *: only adds qualifiers */
    out->waits_for = (const char *const *)d->waits_for;
    out->nwaits_for = d->nwaits;
    out->evictor = d->evictor;
    return US_OK;
}

US_API int us_engine_event(const us_engine *e, size_t i, us_event_info *out) {
    if (!e || !out || i >= e->log.nevents) return US_ENOENT;
    event_info(e, i, out);
    return US_OK;
}

US_API size_t us_engine_policy_log_count(const us_engine *e) { return e ? e->log.nlines : 0; }

US_API int us_engine_policy_log(const us_engine *e, size_t i, us_policy_log_info *out) {
    if (!e || !out || i >= e->log.nlines) return US_ENOENT;
    out->file = e->log.lines[i].file;
    out->line = e->log.lines[i].line;
    out->message = e->log.lines[i].text;
    return US_OK;
}

US_API unsigned long us_engine_policy_log_dropped(const us_engine *e) { return e ? e->log.dropped_lines : 0; }

/* ---- reading the state ------------------------------------------------------------------ */

static const char *const phase_names[] = {"pending", "pipelined", "running", "releasing"};

static us_resources out_res(us_res r) {
    return (us_resources){(double)r.v[US_GPU] / US_GPU_UNIT, r.v[US_CPU], r.v[US_MEM]};
}

/* l made for the n entries of an array where hidden(k) tells entry k is
 * hidden, when some is (any > 0): 0, or -1 when memory runs out. */
static int listing_make(listing *l, size_t n, size_t any, bool (*hidden)(const us_state *, size_t),
                        const us_state *st) {
    if (l->valid) return 0;
    l->n = 0;
    for (size_t k = 0; any && k < n; k++) {
        if (!hidden(st, k)) continue;
        if (us_grow((void **)&l->hidden, &l->cap, l->n, sizeof *l->hidden) < 0) return -1;
        l->hidden[l->n++] = (int)k;
    }
    l->valid = true;
    return 0;
}

/* The position of the i-th entry listed: i plus the hidden entries before
 * it.  hidden[j] - j entries are listed before hidden[j] (ascending in j),
 * so those with hidden[j] - j <= i come before it. */
static size_t listing_at(const listing *l, size_t i) {
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((size_t)l->hidden[mid] - mid <= i) lo = mid + 1;
        else hi = mid;
    }
    return i + lo;
}

static bool pod_hidden(const us_state *st, size_t k) { return st->pods[k].gone; }

static bool workload_hidden(const us_state *st, size_t k) { return workload_unlisted(&st->workloads[k]); }

/* The pods listed (not gone), for a read: NULL when memory runs out. */
static const listing *pods_listed(const us_engine *ce) {
    us_engine *e = (us_engine *)ce; /* a cache: see settle */
    return listing_make(&e->pod_listing, e->st.npods, e->st.ngone, pod_hidden, &e->st) < 0
               ? NULL : &e->pod_listing;
}

/* The workloads listed (not workload_unlisted), for a read: NULL when memory runs out. */
static const listing *workloads_listed(const us_engine *ce) {
    us_engine *e = (us_engine *)ce; /* a cache: see settle */
    return listing_make(&e->wl_listing, e->st.nworkloads, e->st.ngone, workload_hidden, &e->st) < 0
               ? NULL : &e->wl_listing;
}

US_API size_t us_engine_pod_count(const us_engine *e) {
    settle(e);
    return e ? e->st.npods - e->st.ngone : 0;
}

US_API int us_engine_pod(const us_engine *e, size_t i, us_pod_info *out) {
    settle(e);
    if (!e || !out || i >= e->st.npods - e->st.ngone) return US_ENOENT;
    const listing *l = pods_listed(e);
    if (!l) return US_ENOMEM;
    const us_pod *p = &e->st.pods[listing_at(l, i)];
    const us_workload *w = &e->st.workloads[p->workload];
    out->name = p->name;
    out->workload = w->name;
    out->node = p->node >= 0 && p->state != US_POD_PENDING ? e->st.nodes[p->node].name : NULL;
    switch (p->state) {
    case US_POD_PENDING: out->phase = US_PHASE_PENDING; break;
    case US_POD_PIPELINED: out->phase = US_PHASE_PIPELINED; break;
    case US_POD_RUNNING: out->phase = US_PHASE_RUNNING; break;
    default: out->phase = US_PHASE_RELEASING; break;
    }
    out->phase_name = phase_names[out->phase];
    out->background = w->background;
    out->external = w->external;
    return US_OK;
}

US_API size_t us_engine_node_count(const us_engine *e) {
    settle(e);
    return e ? e->st.nnodes : 0;
}

/* What a pod holds on its node now (running or terminating), or -1. */
static int holding_node(const us_pod *p) {
    return !p->gone && (p->state == US_POD_RUNNING || p->state == US_POD_RELEASING) ? p->node : -1;
}

/* The read caches every change voids: what nodes hold, the listings. */
static void forget_used(us_engine *e) {
    free(e->node_used);
    e->node_used = NULL;
    e->pod_listing.valid = e->wl_listing.valid = false;
}

/* The caches no longer hold: the state is about to change. */
static void forget_reads(us_engine *e) {
    forget_used(e);
    pods_forget(e);
    e->reports_in_row = 0;
}

/* What every node holds, in one pass over the pods: reading each node after
 * a change costs one pass, not one per node.  NULL when out of memory. */
static const us_res *nodes_used(us_engine *e) {
    const us_state *st = &e->st;
    if (e->node_used || !(e->node_used = calloc(st->nnodes ? st->nnodes : 1, sizeof *e->node_used)))
        return e->node_used;
    for (size_t k = 0; k < st->npods; k++) {
        int n = holding_node(&st->pods[k]);
        if (n >= 0) e->node_used[n] = us_res_add(e->node_used[n], st->workloads[st->pods[k].workload].request);
    }
    return e->node_used;
}

/* Node i's info; one node read alone (named) sums what is on it from the
 * pod index when there is one rather than filling the cache of every
 * node, which a change empties (a control plane reading back each node it
 * sends would pay a pass over every pod per node). */
static int node_info(us_engine *e, size_t i, bool alone, us_node_info *out) {
    const us_node *n = &e->st.nodes[i];
    bool listed = e->pods.valid && i < e->pods.nn;
    const us_res *all = e->node_used || !alone || !listed ? nodes_used(e) : NULL; /* a cache: see settle */
    us_res used = {{0}};
    if (all) {
        used = all[i];
    } else if (listed) {
        for (int k = e->pods.on.head[i]; k >= 0; k = e->pods.on.next[k])
            if (holding_node(&e->st.pods[k]) == (int)i)
                used = us_res_add(used, e->st.workloads[e->st.pods[k].workload].request);
    } else {
        for (size_t k = 0; k < e->st.npods; k++)
            if (holding_node(&e->st.pods[k]) == (int)i)
                used = us_res_add(used, e->st.workloads[e->st.pods[k].workload].request);
    }
    out->name = n->name;
    out->pool = n->pool;
    out->capacity = out_res(n->cap);
    out->used = out_res(used);
    out->unschedulable = n->unschedulable;
    return US_OK;
}

US_API int us_engine_node(const us_engine *e, size_t i, us_node_info *out) {
    settle(e);
    if (!e || !out || i >= e->st.nnodes) return US_ENOENT;
    return node_info((us_engine *)e, i, false, out); /* caches: see settle */
}

US_API int us_engine_node_named(const us_engine *e, const char *name, us_node_info *out) {
    settle(e);
    if (!e || !name || !out) return US_ENOENT;
    int i = find_node((us_engine *)e, name); /* the name index: a cache, see settle */
    if (i == -2) return US_ENOMEM;
    return i < 0 ? US_ENOENT : node_info((us_engine *)e, (size_t)i, true, out);
}

US_API size_t us_engine_queue_count(const us_engine *e) { return e ? e->st.nqueues : 0; }

US_API int us_engine_queue(const us_engine *e, size_t i, us_queue_info *out) {
    if (!e || !out || i >= e->st.nqueues) return US_ENOENT;
    const us_queue *q = &e->st.queues[i];
    us_res alloc = {{0}}, fair = {{0}};
    if (i < e->nfigs) {
        alloc = e->figs[i].allocated;
        /* like the simulator's output: rounded to the engine's units */
        for (int r = 0; r < US_NRES; r++)
            fair.v[r] = us_res_round(e->figs[i].fair[r]);
    }
    out->name = q->name;
    out->parent = q->parent >= 0 ? e->st.queues[q->parent].name : NULL;
    out->allocated = out_res(alloc);
    out->fair_share = out_res(fair);
    return US_OK;
}

/* Workload i of the listing, or -1 (none; -2: out of memory). */
static long listed_workload(const us_engine *e, size_t i) {
    const listing *l = workloads_listed(e);
    if (!l) return -2;
    return i < e->st.nworkloads - l->n ? (long)listing_at(l, i) : -1;
}

US_API size_t us_engine_workload_count(const us_engine *e) {
    settle(e);
    if (!e) return 0;
    const listing *l = workloads_listed(e);
    /* out of memory: the ones listed are not known; none is hidden for long */
    return e->st.nworkloads - (l ? l->n : 0);
}

US_API int us_engine_workload(const us_engine *e, size_t i, us_workload_info *out) {
    settle(e);
    if (!e || !out) return US_ENOENT;
    long k = listed_workload(e, i);
    if (k < 0) return k == -2 ? US_ENOMEM : US_ENOENT;
    const us_workload *w = &e->st.workloads[k];
    out->name = w->name;
    out->queue = w->queue >= 0 ? e->st.queues[w->queue].name : NULL;
    out->phase = w->state == US_WL_COMPLETED ? US_WORKLOAD_COMPLETED
                 : w->state == US_WL_DELETED ? US_WORKLOAD_DELETED
                                             : US_WORKLOAD_ACTIVE;
    out->background = w->background;
    out->blocked = w->blocked;
    out->running_since = w->started_at;
    out->external = w->external;
    return US_OK;
}

US_API const char *us_engine_workload_pending_reason(const us_engine *e, size_t i) {
    settle(e);
    if (!e) return NULL;
    long k = listed_workload(e, i);
    return k < 0 ? NULL : e->st.workloads[k].pending_reason;
}

/* ---- what a cycle cost, what the GPUs do ------------------------------------------------ */

static const char *const cycle_phases[] = {"snapshot", "eviction", "fairshare", "allocate",
                                           "victims",  "reoffer",  "commit"};
#define NPHASES (sizeof cycle_phases / sizeof *cycle_phases)

US_API size_t us_engine_cycle_phase_count(const us_engine *e) { return e ? NPHASES : 0; }

US_API int us_engine_cycle_phase(const us_engine *e, size_t i, us_cycle_phase_info *out) {
    if (!e || !out || i >= NPHASES) return US_ENOENT;
    const double secs[NPHASES] = {e->prof.snapshot, e->prof.eviction, e->prof.fairshare, e->prof.allocate,
                                  e->prof.victims,  e->prof.reoffer,  e->prof.commit};
    out->name = cycle_phases[i];
    out->seconds = secs[i];
    return US_OK;
}

US_API int us_engine_cycle_reuse(const us_engine *e, us_cycle_reuse *out) {
    if (!e || !out) return US_EINVAL;
    *out = (us_cycle_reuse){e->prof.policy_calls, e->prof.nodes_classed, e->prof.nodes_class_kept,
                            e->prof.scores_kept};
    return US_OK;
}

const us_cycle_profile *us_engine_profile(const us_engine *e) { return e ? &e->prof : NULL; }

void us_engine_set_gone_share(us_engine *e, unsigned share) {
    if (e) e->st.gone_share = share;
}

US_API int us_engine_gpu_use(const us_engine *e, us_gpu_use *out) {
    settle(e);
    if (!e || !out) return US_EINVAL;
    memset(out, 0, sizeof *out);
    int64_t held_ai = 0, held_bg = 0, held_ext = 0, cap = 0;
    for (size_t i = 0; i < e->st.nnodes; i++)
        if (!e->st.nodes[i].removed) cap += e->st.nodes[i].cap.v[US_GPU];
    for (size_t i = 0; i < e->st.npods; i++) {
        const us_pod *p = &e->st.pods[i];
        const us_workload *w = &e->st.workloads[p->workload];
        /* devices held now: running and terminating pods (a pipelined pod
         * holds nothing yet) */
        if (p->gone || p->node < 0 || (p->state != US_POD_RUNNING && p->state != US_POD_RELEASING)) continue;
        int64_t g = w->request.v[US_GPU];
        if (w->external) held_ext += g;
        else if (w->background) held_bg += g;
        else held_ai += g;
    }
    out->capacity = (double)cap / US_GPU_UNIT;
    out->ai = (double)held_ai / US_GPU_UNIT;
    out->background = (double)held_bg / US_GPU_UNIT;
    out->external = (double)held_ext / US_GPU_UNIT;
    out->idle = (double)(cap - held_ai - held_bg - held_ext) / US_GPU_UNIT;
    return US_OK;
}

/* ---- the state as a scenario --------------------------------------------------------------- */

US_API int us_engine_state_json(const us_engine *e, char **out, size_t *len, us_error *err) {
    cJSON *doc;
    if (out) *out = NULL;
    if (len) *len = 0;
    if (!e || !out) return fail(err, US_EINVAL, "%s: NULL", !e ? "engine" : "out");
    settle(e);
    if (us_statejson_write(&e->st, e->now, "engine state", &doc) < 0) return nomem(err);
    char *text = us_jw_print(doc); /* cJSON_Print's text, us_free frees it */
    cJSON_Delete(doc);
    if (!text) return nomem(err);
    *out = text;
    if (len) *len = strlen(text);
    return ok(err);
}

US_API void us_free(void *p) { cJSON_free(p); }
