/*
 * objects.c — the Kubernetes object mapping (see objects.h): Nodes, Queues
 * and PriorityClasses one by one; Pods grouped into workloads (a PodGroup,
 * else the pod's top owner, else the pod alone), with their PodGroup,
 * Namespace and PriorityClass resolved.
 *
 * Pure: reads the objects it is given, returns new scenario objects, and
 * never talks to a server or an engine.  Quantities are parsed by the
 * scenario loader's own parser (us_parse_cpu, us_parse_memory), so a
 * quantity means the same here as in a scenario file.
 */
#include "objects.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario.h"
#include "sort.h"
#include "state.h"

#define QUEUE_LABEL "kai.scheduler/queue"
#define POOL_LABEL "kai.scheduler/node-pool"
#define KAI_PREFIX "kai.scheduler/"
#define GPU_KEY "nvidia.com/gpu"
#define PODGROUP_ANNOTATION "pod-group-name"
#define FRACTION_ANNOTATION "gpu-fraction"
#define HASH_LABEL "pod-template-hash"

/* Where an object is, for messages: its path and "Kind \"name\"". */
typedef struct loc {
    const char *path;
    char who[320];
} loc;

static int fail(us_err *err, const loc *l, const char *sub, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(us_err *err, const loc *l, const char *sub, const char *fmt, ...) {
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return us_err_set(err, US_EINVAL, "%s%s%s%s%s: %s", l->path, sub && *sub ? "." : "", sub ? sub : "",
                      l->who[0] ? " " : "", l->who, msg);
}

static const cJSON *get(const cJSON *o, const char *key) {
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

static const char *tname(const cJSON *v) {
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}

/* An RFC 3339 time ("2026-12-01T02:52:14Z", fractions and offsets
 * allowed) as seconds since the epoch; -1 when s is not one. */
static int rfc3339(const char *s, double *out) {
    int y, mo, d, h, mi, n = 0;
    double sec;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%lf%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 || n < 19 ||
        mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec < 0 || sec >= 61)
        return -1;
    const char *z = s + n;
    double off = 0;
    if (*z == 'Z' || *z == 'z') {
        z++;
    } else if (*z == '+' || *z == '-') {
        int oh, om, k = 0;
        if (sscanf(z + 1, "%2d:%2d%n", &oh, &om, &k) != 2 || k != 5) return -1;
        off = (*z == '-' ? -1 : 1) * (oh * 3600.0 + om * 60.0);
        z += 6;
    } else {
        return -1;
    }
    if (*z) return -1;
    /* days from 1970-01-01 (Howard Hinnant's days_from_civil) */
    y -= mo <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400, doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy, days = era * 146097 + doe - 719468;
    *out = (double)days * 86400 + h * 3600.0 + mi * 60.0 + sec - off;
    return 0;
}

/* An optional value at o.key (sub names it) that `is` accepts, `what`
 * naming the type in the error; NULL when absent. */
static int opt_typed(us_err *err, const loc *l, const cJSON *o, const char *sub, const char *key,
                     cJSON_bool (*is)(const cJSON *), const char *what, const cJSON **out) {
    const cJSON *v = get(o, key);
    char p[256];
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!is(v)) {
        /* the path only when it is needed: this runs for every field read */
        snprintf(p, sizeof p, "%s%s%s", sub, *sub ? "." : "", key);
        return fail(err, l, p, "must be %s, not %s", what, tname(v));
    }
    *out = v;
    return 0;
}

static int opt_str(us_err *err, const loc *l, const cJSON *o, const char *sub, const char *key,
                   const char **out) {
    const cJSON *v;
    int rc = opt_typed(err, l, o, sub, key, cJSON_IsString, "a string", &v);
    *out = v ? v->valuestring : NULL;
    return rc;
}

static int opt_obj(us_err *err, const loc *l, const cJSON *o, const char *sub, const char *key,
                   const cJSON **out) {
    return opt_typed(err, l, o, sub, key, cJSON_IsObject, "an object", out);
}

static int opt_arr(us_err *err, const loc *l, const cJSON *o, const char *sub, const char *key,
                   const cJSON **out) {
    return opt_typed(err, l, o, sub, key, cJSON_IsArray, "an array", out);
}

/* metadata.name (required) and metadata.namespace (required when ns is
 * asked for); fills l->who with kind and the name ("ns/name"). */
static int meta(us_err *err, loc *l, const cJSON *o, const char *kind, const char **name,
                const char **ns) {
    const cJSON *md;
    snprintf(l->who, sizeof l->who, "(%s)", kind);
    if (!cJSON_IsObject(o)) return fail(err, l, NULL, "must be an object, not %s", tname(o));
    if (opt_obj(err, l, o, "", "metadata", &md) < 0) return -1;
    if (!md) return fail(err, l, "metadata", "required field is missing");
    if (opt_str(err, l, md, "metadata", "name", name) < 0) return -1;
    if (!*name || !**name) return fail(err, l, "metadata.name", "required field is missing");
    if (ns) {
        if (opt_str(err, l, md, "metadata", "namespace", ns) < 0) return -1;
        if (!*ns || !**ns) return fail(err, l, "metadata.namespace", "required field is missing");
        snprintf(l->who, sizeof l->who, "(%s \"%s/%s\")", kind, *ns, *name);
    } else {
        snprintf(l->who, sizeof l->who, "(%s \"%s\")", kind, *name);
    }
    return 0;
}

/* A string map (labels, annotations, nodeSelector) as a new JSON object of
 * the pairs whose key starts with prefix (NULL: all). */
static int str_map(us_err *err, const loc *l, const cJSON *m, const char *sub, const char *prefix,
                   cJSON *into) {
    const cJSON *v;
    char p[320];
    cJSON_ArrayForEach(v, m) {
        if (prefix && strncmp(v->string, prefix, strlen(prefix)) != 0) continue;
        if (!cJSON_IsString(v)) {
            snprintf(p, sizeof p, "%s.%s", sub, v->string);
            return fail(err, l, p, "must be a string, not %s", tname(v));
        }
        cJSON_DeleteItemFromObjectCaseSensitive(into, v->string);
        if (!cJSON_AddStringToObject(into, v->string, v->valuestring)) return us_err_nomem(err);
    }
    return 0;
}

/* metadata.creationTimestamp in seconds since the epoch; *has false when
 * absent. */
static int created(us_err *err, const loc *l, const cJSON *o, double *out, bool *has) {
    const char *ts;
    *has = false;
    if (opt_str(err, l, get(o, "metadata"), "metadata", "creationTimestamp", &ts) < 0) return -1;
    if (!ts) return 0;
    if (rfc3339(ts, out) < 0)
        return fail(err, l, "metadata.creationTimestamp", "\"%s\" is not an RFC 3339 time", ts);
    *has = true;
    return 0;
}

/* ---- quantities ------------------------------------------------------------ */

/* Resource r of a Kubernetes quantity at v (path sub) in engine units. */
static int quantity(us_err *err, const loc *l, const char *sub, const cJSON *v, int r, int64_t *out) {
    char num[64];
    const char *s;
    if (cJSON_IsString(v)) s = v->valuestring;
    else if (cJSON_IsNumber(v)) {
        snprintf(num, sizeof num, "%.17g", v->valuedouble);
        s = num;
    } else {
        return fail(err, l, sub, "must be a quantity, not %s", tname(v));
    }
    int rc = r == US_MEM ? us_parse_memory(s, out) : us_parse_cpu(s, out);
    if (rc < 0) return fail(err, l, sub, "\"%s\" is not a %s quantity", s, r == US_GPU ? "gpu" : us_res_names[r]);
    if (r == US_GPU && *out % US_GPU_UNIT != 0)
        return fail(err, l, sub, "\"%s\" is not a whole number of GPUs", s);
    return 0;
}

/* The cpu, memory and nvidia.com/gpu of a resource list (requests,
 * allocatable, overhead).  Other resources: ephemeral-storage, pods and
 * hugepages are not modelled and skipped where skip_other; any other
 * (an extended resource such as another vendor's GPU) is an error. */
static int res_list(us_err *err, const loc *l, const cJSON *m, const char *sub, bool skip_other,
                    us_res *out) {
    const cJSON *v;
    char p[320];
    memset(out, 0, sizeof *out);
    cJSON_ArrayForEach(v, m) {
        int r = -1;
        snprintf(p, sizeof p, "%s[\"%s\"]", sub, v->string);
        if (!strcmp(v->string, "cpu")) r = US_CPU;
        else if (!strcmp(v->string, "memory")) r = US_MEM;
        else if (!strcmp(v->string, GPU_KEY)) r = US_GPU;
        if (r < 0) {
            if (skip_other || !strcmp(v->string, "ephemeral-storage") ||
                !strncmp(v->string, "hugepages-", 10))
                continue;
            return fail(err, l, p, "resource \"%s\" cannot be mapped (the engine models cpu, "
                        "memory and " GPU_KEY ")", v->string);
        }
        if (quantity(err, l, p, v, r, &out->v[r]) < 0) return -1;
    }
    return 0;
}

static void res_max(us_res *a, us_res b) {
    for (int r = 0; r < US_NRES; r++)
        if (b.v[r] > a->v[r]) a->v[r] = b.v[r];
}

static int put_res(cJSON *o, us_res r, us_err *err) {
    char s[40];
    cJSON *req = cJSON_AddObjectToObject(o, "requests");
    if (!req || !cJSON_AddNumberToObject(req, "gpu", (double)r.v[US_GPU] / US_GPU_UNIT))
        return us_err_nomem(err);
    snprintf(s, sizeof s, "%lldm", (long long)r.v[US_CPU]);
    if (!cJSON_AddStringToObject(req, "cpu", s)) return us_err_nomem(err);
    snprintf(s, sizeof s, "%lld", (long long)r.v[US_MEM]);
    if (!cJSON_AddStringToObject(req, "memory", s)) return us_err_nomem(err);
    return 0;
}

/* ---- nodes ------------------------------------------------------------------ */

static bool node_ready(const cJSON *node) {
    const cJSON *c;
    cJSON_ArrayForEach(c, get(get(node, "status"), "conditions")) {
        const cJSON *t = get(c, "type"), *s = get(c, "status");
        if (cJSON_IsString(t) && !strcmp(t->valuestring, "Ready"))
            return cJSON_IsString(s) && !strcmp(s->valuestring, "True");
    }
    return false;
}

static const char *node_pool(const cJSON *node) {
    const cJSON *v = get(get(get(node, "metadata"), "labels"), POOL_LABEL);
    return cJSON_IsString(v) ? v->valuestring : "default";
}

int kube_node(const cJSON *node, const char *path, cJSON **out, us_err *err) {
    loc l = {path, ""};
    const char *name;
    const cJSON *status, *alloc, *labels, *spec, *taints, *t, *unsched;
    us_res cap;
    char s[40];
    int i = 0;
    cJSON *o = NULL, *ls, *ts;
    *out = NULL;
    if (meta(err, &l, node, "Node", &name, NULL) < 0) return -1;
    if (opt_obj(err, &l, node, "", "status", &status) < 0 ||
        opt_obj(err, &l, status, "status", "allocatable", &alloc) < 0 ||
        opt_obj(err, &l, get(node, "metadata"), "metadata", "labels", &labels) < 0 ||
        opt_obj(err, &l, node, "", "spec", &spec) < 0 || opt_arr(err, &l, spec, "spec", "taints", &taints) < 0)
        return -1;
    if (!alloc) return fail(err, &l, "status.allocatable", "required field is missing");
    if (res_list(err, &l, alloc, "status.allocatable", true, &cap) < 0) return -1;
    if (!(o = cJSON_CreateObject()) || !cJSON_AddStringToObject(o, "name", name) ||
        !cJSON_AddStringToObject(o, "pool", node_pool(node)))
        goto nomem;
    snprintf(s, sizeof s, "%lldm", (long long)cap.v[US_CPU]);
    if (!cJSON_AddStringToObject(o, "cpu", s)) goto nomem;
    snprintf(s, sizeof s, "%lld", (long long)cap.v[US_MEM]);
    if (!cJSON_AddStringToObject(o, "memory", s) ||
        !cJSON_AddNumberToObject(o, "gpu", (double)(cap.v[US_GPU] / US_GPU_UNIT)) ||
        !(ls = cJSON_AddObjectToObject(o, "labels")))
        goto nomem;
    if (labels && str_map(err, &l, labels, "metadata.labels", NULL, ls) < 0) goto fail;
    unsched = get(spec, "unschedulable");
    if (unsched && !cJSON_IsBool(unsched)) {
        fail(err, &l, "spec.unschedulable", "must be true or false, not %s", tname(unsched));
        goto fail;
    }
    /* cordoned, or not Ready: no new pods (its running pods stay) */
    if (!cJSON_AddBoolToObject(o, "unschedulable", cJSON_IsTrue(unsched) || !node_ready(node)) ||
        !(ts = cJSON_AddArrayToObject(o, "taints")))
        goto nomem;
    cJSON_ArrayForEach(t, taints) {
        char p[64];
        const char *key, *value, *effect;
        cJSON *x;
        snprintf(p, sizeof p, "spec.taints[%d]", i++);
        if (!cJSON_IsObject(t)) {
            fail(err, &l, p, "must be an object, not %s", tname(t));
            goto fail;
        }
        if (opt_str(err, &l, t, p, "key", &key) < 0 || opt_str(err, &l, t, p, "value", &value) < 0 ||
            opt_str(err, &l, t, p, "effect", &effect) < 0)
            goto fail;
        if (!(x = cJSON_CreateObject()) || !cJSON_AddItemToArray(ts, x) ||
            !cJSON_AddStringToObject(x, "key", key ? key : "") ||
            (value && !cJSON_AddStringToObject(x, "value", value)) ||
            !cJSON_AddStringToObject(x, "effect", effect ? effect : ""))
            goto nomem;
    }
    *out = o;
    return 0;
nomem:
    us_err_nomem(err);
fail:
    cJSON_Delete(o);
    return -1;
}

/* ---- queues ---------------------------------------------------------------- */

/* One KAI number (quota, limit, weight) at v: gpu devices, cpu
 * millicores, memory megabytes; -1 unlimited where allowed.  Into o.key
 * in the scenario's units (cpu "Nm", memory bytes). */
static int kai_number(us_err *err, const loc *l, const char *sub, const cJSON *v, int r, bool weight,
                      cJSON *o, const char *key) {
    char s[48];
    if (!cJSON_IsNumber(v)) return fail(err, l, sub, "must be a number, not %s", tname(v));
    double x = v->valuedouble;
    if (!isfinite(x) || (x < 0 && (weight || x != -1)) || x > 1e12)
        return fail(err, l, sub, "%g is out of range (%s)", x, weight ? "0 or more" : "-1 for unlimited, or 0 or more");
    if (weight || r == US_GPU || x == -1) return cJSON_AddNumberToObject(o, key, x) ? 0 : us_err_nomem(err);
    if (r == US_CPU) {
        if (x != floor(x)) return fail(err, l, sub, "%g is not a whole number of millicores", x);
        snprintf(s, sizeof s, "%.0fm", x);
    } else {
        /* KAI's memory unit is the megabyte: 10^6 bytes */
        snprintf(s, sizeof s, "%.0f", floor(x * 1e6 + 0.5));
    }
    return cJSON_AddStringToObject(o, key, s) ? 0 : us_err_nomem(err);
}

int kube_queue(const cJSON *queue, const char *path, double epoch, cJSON **out, us_err *err) {
    static const char *const kai_keys[] = {"quota", "overQuotaWeight", "limit"};
    static const char *const our_keys[] = {"quota", "over_quota_weight", "limit"};
    loc l = {path, ""};
    const char *name, *parent;
    const cJSON *spec, *res, *pri;
    cJSON *o = NULL, *rs;
    *out = NULL;
    if (meta(err, &l, queue, "Queue", &name, NULL) < 0 || opt_obj(err, &l, queue, "", "spec", &spec) < 0 ||
        opt_str(err, &l, spec, "spec", "parentQueue", &parent) < 0 ||
        opt_obj(err, &l, spec, "spec", "resources", &res) < 0)
        return -1;
    double ct;
    bool has_ct;
    if (created(err, &l, queue, &ct, &has_ct) < 0) return -1;
    pri = get(spec, "priority");
    if (pri && (!cJSON_IsNumber(pri) || pri->valuedouble != floor(pri->valuedouble) ||
                fabs(pri->valuedouble) > 1e6))
        return fail(err, &l, "spec.priority", "must be a whole number, not %s", tname(pri));
    if (!(o = cJSON_CreateObject()) || !cJSON_AddStringToObject(o, "name", name) ||
        (parent && *parent && !cJSON_AddStringToObject(o, "parent", parent)) ||
        /* KAI's default queue priority is 100 */
        !cJSON_AddNumberToObject(o, "priority", pri ? pri->valuedouble : 100) ||
        (has_ct && !cJSON_AddNumberToObject(o, "created_at", ct - epoch)) ||
        !(rs = cJSON_AddObjectToObject(o, "resources")))
        goto nomem;
    const cJSON *r;
    cJSON_ArrayForEach(r, res) {
        char p[320];
        int ri = -1;
        for (int k = 0; k < US_NRES; k++)
            if (!strcmp(r->string, us_res_names[k])) ri = k;
        snprintf(p, sizeof p, "spec.resources.%s", r->string);
        if (ri < 0) {
            fail(err, &l, p, "not a resource (gpu, cpu, memory)");
            goto fail;
        }
        if (!cJSON_IsObject(r)) {
            fail(err, &l, p, "must be an object, not %s", tname(r));
            goto fail;
        }
        cJSON *x = cJSON_AddObjectToObject(rs, r->string);
        if (!x) goto nomem;
        const cJSON *f;
        cJSON_ArrayForEach(f, r) {
            int k = -1;
            for (int j = 0; j < 3; j++)
                if (!strcmp(f->string, kai_keys[j])) k = j;
            char fp[400];
            snprintf(fp, sizeof fp, "%s.%s", p, f->string);
            if (k < 0) {
                fail(err, &l, fp, "not a field of a queue resource (quota, overQuotaWeight, limit)");
                goto fail;
            }
            if (kai_number(err, &l, fp, f, ri, k == 1, x, our_keys[k]) < 0) goto fail;
        }
    }
    *out = o;
    return 0;
nomem:
    us_err_nomem(err);
fail:
    cJSON_Delete(o);
    return -1;
}

/* ---- pods ------------------------------------------------------------------- */

typedef struct kpod {
    const cJSON *o;
    loc l;
    const char *ns, *name;
    char *key;          /* "ns/name" */
    char *group;        /* "<Kind>/ns/name": the workload it belongs to */
    char *wl;           /* the workload's name: "ns/name" */
    const char *node;   /* spec.nodeName, or NULL */
    const char *pin;    /* the node its affinity on metadata.name names, or NULL */
    bool ours, releasing;
    bool succeeded;     /* skipped: it ran to completion (phase Succeeded) */
    int controller;     /* US_CTRL_* */
    double created;     /* metadata.creationTimestamp, epoch seconds */
    bool has_created;
    const cJSON *pg;    /* its PodGroup, or NULL */
    cJSON *fields;      /* the workload fields this pod asks for */
} kpod;

typedef struct kctx {
    const kube_cluster *c;
    const kube_opts *o;
    double epoch;       /* the time that is t=0 */
    us_err *err;
    kpod *pods;
    size_t npods;
    struct kindex *ix;  /* the objects pods refer to, by name: IX_* */
    char **done;        /* the workload of each pod that ran to completion,
                           sorted once all are read */
    size_t ndone;
} kctx;

static const char *const ctrl_names[] = {"none", "job", "deployment", "daemonset"};

/* The objects pods refer to, sorted by namespace and name, so that a
 * lookup is a binary search, not a scan per pod (pods x nodes). */
enum { IX_NODES, IX_NAMESPACES, IX_PODGROUPS, IX_PRIORITYCLASSES, IX_N };
typedef struct named {
    const char *ns, *name; /* ns "" for a cluster-scoped kind */
    size_t i;              /* its index in the input */
} named;
typedef struct kindex {
    const kube_objs *objs;
    named *v;
    size_t n;
} kindex;

static int by_named(const void *a, const void *b, void *ctx) {
    (void)ctx;
    const named *x = a, *y = b;
    int c = strcmp(x->ns, y->ns);
    if (!c) c = strcmp(x->name, y->name);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int index_objs(kindex *ix, const kube_objs *objs, bool namespaced, us_err *err) {
    ix->objs = objs;
    ix->n = 0;
    if (!(ix->v = malloc((objs->n ? objs->n : 1) * sizeof *ix->v))) return us_err_nomem(err);
    for (size_t i = 0; i < objs->n; i++) {
        const cJSON *md = get(objs->objs[i], "metadata"), *n = get(md, "name"), *s = get(md, "namespace");
        if (!cJSON_IsString(n)) continue;
        ix->v[ix->n++] = (named){namespaced && cJSON_IsString(s) ? s->valuestring : "", n->valuestring, i};
    }
    us_sort(ix->v, ix->n, sizeof *ix->v, by_named, NULL);
    return 0;
}

/* The first object (in input order) of kind which named name (in
 * namespace ns when the kind is namespaced), or NULL; *at its index. */
static const cJSON *find(const kctx *k, int which, const char *ns, const char *name, size_t *at) {
    const kindex *ix = &k->ix[which];
    named key = {ns ? ns : "", name, 0};
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (by_named(&ix->v[mid], &key, NULL) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo == ix->n || strcmp(ix->v[lo].ns, key.ns) || strcmp(ix->v[lo].name, name)) return NULL;
    if (at) *at = ix->v[lo].i;
    return ix->objs->objs[ix->v[lo].i];
}

static char *join(const char *a, const char *b, const char *c) {
    size_t n = strlen(a) + strlen(b) + (c ? strlen(c) + 1 : 0) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s%s%s", a, b, c ? "/" : "", c ? c : "");
    return s;
}

static const char *label(const cJSON *o, const char *key) {
    const cJSON *v = get(get(get(o, "metadata"), "labels"), key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Effective requests: the sum over containers (and sidecars: init
 * containers that keep running), at least each init container with the
 * sidecars started before it, plus the pod's overhead (Kubernetes' rule). */
static int effective(us_err *err, const loc *l, const cJSON *spec, us_res *out) {
    const cJSON *cs, *ics, *c, *oh;
    us_res sum = {{0}}, side = {{0}}, peak = {{0}}, r;
    char p[128], rp[160];
    int i = 0;
    if (opt_arr(err, l, spec, "spec", "containers", &cs) < 0 ||
        opt_arr(err, l, spec, "spec", "initContainers", &ics) < 0 ||
        opt_obj(err, l, spec, "spec", "overhead", &oh) < 0)
        return -1;
    cJSON_ArrayForEach(c, ics) {
        const cJSON *res, *req;
        const char *restart;
        snprintf(p, sizeof p, "spec.initContainers[%d]", i++);
        if (opt_obj(err, l, c, p, "resources", &res) < 0) return -1;
        snprintf(rp, sizeof rp, "%s.resources", p);
        if (opt_obj(err, l, res, rp, "requests", &req) < 0) return -1;
        snprintf(rp, sizeof rp, "%s.resources.requests", p);
        if (res_list(err, l, req, rp, false, &r) < 0 || opt_str(err, l, c, p, "restartPolicy", &restart) < 0)
            return -1;
        if (restart && !strcmp(restart, "Always")) {
            side = us_res_add(side, r);
        } else {
            res_max(&peak, us_res_add(side, r));
        }
    }
    i = 0;
    cJSON_ArrayForEach(c, cs) {
        const cJSON *res, *req;
        snprintf(p, sizeof p, "spec.containers[%d]", i++);
        if (opt_obj(err, l, c, p, "resources", &res) < 0) return -1;
        snprintf(rp, sizeof rp, "%s.resources", p);
        if (opt_obj(err, l, res, rp, "requests", &req) < 0) return -1;
        snprintf(rp, sizeof rp, "%s.resources.requests", p);
        if (res_list(err, l, req, rp, false, &r) < 0) return -1;
        sum = us_res_add(sum, r);
    }
    if (i == 0) return fail(err, l, "spec.containers", "required field is missing (a pod has containers)");
    sum = us_res_add(sum, side);
    res_max(&sum, peak);
    if (oh) {
        if (res_list(err, l, oh, "spec.overhead", false, &r) < 0) return -1;
        sum = us_res_add(sum, r);
    }
    *out = sum;
    return 0;
}

/* nodeSelector and required node affinity on labels, as one selector;
 * matchFields metadata.name In one node (what the DaemonSet controller
 * writes) is the pod's pin, *pin. */
static int selector(us_err *err, const loc *l, const cJSON *spec, cJSON *sel, const char **pin) {
    const cJSON *ns, *aff, *na, *req, *terms, *t;
    if (opt_obj(err, l, spec, "spec", "nodeSelector", &ns) < 0 ||
        opt_obj(err, l, spec, "spec", "affinity", &aff) < 0 ||
        opt_obj(err, l, aff, "spec.affinity", "nodeAffinity", &na) < 0 ||
        opt_obj(err, l, na, "spec.affinity.nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", &req) < 0 ||
        opt_arr(err, l, req, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                "nodeSelectorTerms", &terms) < 0)
        return -1;
    if (ns && str_map(err, l, ns, "spec.nodeSelector", NULL, sel) < 0) return -1;
    /* a filter that cannot be expressed must not be dropped: the pod would
     * be placed where Kubernetes would never run it */
    static const char *const filters[] = {"podAffinity", "podAntiAffinity"};
    for (int k = 0; k < 2; k++) {
        const cJSON *pa = get(aff, filters[k]);
        if (get(pa, "requiredDuringSchedulingIgnoredDuringExecution")) {
            char p[160];
            snprintf(p, sizeof p, "spec.affinity.%s.requiredDuringSchedulingIgnoredDuringExecution", filters[k]);
            return fail(err, l, p, "cannot be mapped: the engine has no pod (anti-)affinity filter");
        }
    }
    const cJSON *tsc;
    int i = 0;
    cJSON_ArrayForEach(tsc, get(spec, "topologySpreadConstraints")) {
        const cJSON *w = get(tsc, "whenUnsatisfiable");
        if (!cJSON_IsString(w) || strcmp(w->valuestring, "ScheduleAnyway") != 0) {
            char p[80];
            snprintf(p, sizeof p, "spec.topologySpreadConstraints[%d]", i);
            return fail(err, l, p, "cannot be mapped: the engine has no topology spread filter");
        }
        i++;
    }
    if (!terms) return 0;
    const char *tp = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    if (cJSON_GetArraySize(terms) != 1)
        return fail(err, l, tp, "%d terms cannot be mapped: a node selector is one term of "
                    "\"In\" expressions with one value each", cJSON_GetArraySize(terms));
    t = cJSON_GetArrayItem(terms, 0);
    const cJSON *e;
    i = 0;
    cJSON_ArrayForEach(e, get(t, "matchExpressions")) {
        const cJSON *k = get(e, "key"), *op = get(e, "operator"), *vs = get(e, "values");
        char p[300];
        snprintf(p, sizeof p, "%s[0].matchExpressions[%d]", tp, i++);
        if (!cJSON_IsString(k) || !cJSON_IsString(op) || strcmp(op->valuestring, "In") != 0 ||
            cJSON_GetArraySize(vs) != 1 || !cJSON_IsString(cJSON_GetArrayItem(vs, 0)))
            return fail(err, l, p, "cannot be mapped: a node selector holds only \"In\" with one value");
        const char *v = cJSON_GetArrayItem(vs, 0)->valuestring;
        const cJSON *have = get(sel, k->valuestring);
        if (have && strcmp(have->valuestring, v) != 0)
            return fail(err, l, p, "asks %s=%s, and spec.nodeSelector %s=%s", k->valuestring, v,
                        k->valuestring, have->valuestring);
        if (!have && !cJSON_AddStringToObject(sel, k->valuestring, v)) return us_err_nomem(err);
    }
    i = 0;
    cJSON_ArrayForEach(e, get(t, "matchFields")) {
        const cJSON *k = get(e, "key"), *op = get(e, "operator"), *vs = get(e, "values");
        char p[300];
        snprintf(p, sizeof p, "%s[0].matchFields[%d]", tp, i++);
        if (!cJSON_IsString(k) || strcmp(k->valuestring, "metadata.name") != 0 || !cJSON_IsString(op) ||
            strcmp(op->valuestring, "In") != 0 || cJSON_GetArraySize(vs) != 1 ||
            !cJSON_IsString(cJSON_GetArrayItem(vs, 0)) || *pin)
            return fail(err, l, p, "cannot be mapped: a pod is pinned to a node by one matchFields "
                        "metadata.name In with one node name");
        *pin = cJSON_GetArrayItem(vs, 0)->valuestring;
    }
    return 0;
}

static int tolerations(us_err *err, const loc *l, const cJSON *spec, cJSON *into) {
    const cJSON *ts, *t;
    int i = 0;
    if (opt_arr(err, l, spec, "spec", "tolerations", &ts) < 0) return -1;
    cJSON_ArrayForEach(t, ts) {
        static const char *const keys[] = {"key", "operator", "value", "effect"};
        char p[64];
        cJSON *x = cJSON_CreateObject();
        snprintf(p, sizeof p, "spec.tolerations[%d]", i++);
        if (!x || !cJSON_AddItemToArray(into, x)) {
            cJSON_Delete(x);
            return us_err_nomem(err);
        }
        /* tolerationSeconds bounds a NoExecute eviction, which the engine
         * does not model: the toleration itself is what placement needs */
        for (int k = 0; k < 4; k++) {
            const char *s;
            if (opt_str(err, l, t, p, keys[k], &s) < 0) return -1;
            if (s && *s && !cJSON_AddStringToObject(x, keys[k], s)) return us_err_nomem(err);
        }
    }
    return 0;
}

/* A priority as Kubernetes has it: a whole number within int32. */
static bool int32_value(const cJSON *v, int *out) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= INT32_MIN && v->valuedouble <= INT32_MAX) ||
        v->valuedouble != floor(v->valuedouble))
        return false;
    *out = (int)v->valuedouble;
    return true;
}

static int priority_class(kctx *k, const loc *l, const char *sub, const char *name, int *out) {
    const cJSON *pc = find(k, IX_PRIORITYCLASSES, NULL, name, NULL), *v = get(pc, "value");
    if (!pc) return fail(k->err, l, sub, "priority class \"%s\" is not in the input", name);
    if (!int32_value(v, out))
        return fail(k->err, l, sub, "priority class \"%s\" has no value that is a whole number within int32",
                    name);
    return 0;
}

/* The owner a workload is grouped by, and the controller kind. */
static int owner(kctx *k, kpod *p) {
    const cJSON *refs = get(get(p->o, "metadata"), "ownerReferences"), *r, *pick = NULL;
    cJSON_ArrayForEach(r, refs)
        if (!pick || cJSON_IsTrue(get(r, "controller"))) pick = r;
    p->controller = US_CTRL_NONE;
    if (!pick) return (p->group = join("Pod", p->ns, p->name)) ? 0 : us_err_nomem(k->err);
    const cJSON *kind = get(pick, "kind"), *name = get(pick, "name");
    if (!cJSON_IsString(kind) || !cJSON_IsString(name))
        return fail(k->err, &p->l, "metadata.ownerReferences", "an owner needs a kind and a name");
    const char *kd = kind->valuestring;
    char *nm = strdup(name->valuestring);
    if (!nm) return us_err_nomem(k->err);
    if (!strcmp(kd, "ReplicaSet")) {
        /* a Deployment's ReplicaSet is named <deployment>-<pod-template-hash> */
        const char *h = label(p->o, HASH_LABEL);
        size_t n = strlen(nm), hn = h ? strlen(h) : 0;
        if (h && n > hn + 1 && nm[n - hn - 1] == '-' && !strcmp(nm + n - hn, h)) {
            nm[n - hn - 1] = 0;
            kd = "Deployment";
        }
        p->controller = US_CTRL_DEPLOYMENT;
    } else if (!strcmp(kd, "Deployment") || !strcmp(kd, "StatefulSet")) {
        /* a StatefulSet recreates its pods as a Deployment does */
        p->controller = US_CTRL_DEPLOYMENT;
    } else if (!strcmp(kd, "DaemonSet")) {
        p->controller = US_CTRL_DAEMONSET;
    } else if (!strcmp(kd, "Job")) {
        p->controller = US_CTRL_JOB;
    }
    p->group = join(kd, p->ns, nm);
    free(nm);
    return p->group ? 0 : us_err_nomem(k->err);
}

/* The fields of the workload a pod of ours asks for (all but name,
 * replicas, min_member, pool and pods): pods of one workload must agree. */
static int our_fields(kctx *k, kpod *p, us_res req) {
    us_err *err = k->err;
    const cJSON *spec = get(p->o, "spec"), *pri = get(spec, "priority"), *md = get(p->o, "metadata");
    const char *queue = label(p->o, QUEUE_LABEL), *pcn;
    int prio = 0;
    cJSON *f = p->fields = cJSON_CreateObject(), *x;
    if (!f) return us_err_nomem(err);
    /* the queue: the pod's label, its PodGroup's, its namespace's */
    if (!queue && p->pg) {
        const cJSON *q = get(get(p->pg, "spec"), "queue");
        if (cJSON_IsString(q) && *q->valuestring) queue = q->valuestring;
    }
    if (!queue) queue = label(find(k, IX_NAMESPACES, NULL, p->ns, NULL), QUEUE_LABEL);
    if (!queue)
        return fail(err, &p->l, "metadata.labels", "no queue: no label " QUEUE_LABEL " on the pod, "
                    "no spec.queue on its PodGroup, no label " QUEUE_LABEL " on namespace \"%s\"", p->ns);
    if (!cJSON_AddStringToObject(f, "queue", queue)) return us_err_nomem(err);
    /* priority: the pod's (admission resolved its class), else its
     * PodGroup's class, else its own class */
    if (opt_str(err, &p->l, spec, "spec", "priorityClassName", &pcn) < 0) return -1;
    if (pri) {
        if (!cJSON_IsNumber(pri)) return fail(err, &p->l, "spec.priority", "must be a number, not %s", tname(pri));
        if (!int32_value(pri, &prio))
            return fail(err, &p->l, "spec.priority", "must be a whole number within int32, not %g", pri->valuedouble);
    } else if (p->pg && cJSON_IsString(get(get(p->pg, "spec"), "priorityClassName"))) {
        if (priority_class(k, &p->l, "spec.priority", get(get(p->pg, "spec"), "priorityClassName")->valuestring,
                           &prio) < 0)
            return -1;
    } else if (pcn && priority_class(k, &p->l, "spec.priorityClassName", pcn, &prio) < 0) {
        return -1;
    }
    if (!cJSON_AddNumberToObject(f, "priority", prio)) return us_err_nomem(err);
    if (p->pg) {
        const cJSON *pe = get(get(p->pg, "spec"), "preemptibility");
        if (pe && (!cJSON_IsString(pe) || (strcmp(pe->valuestring, "preemptible") &&
                                           strcmp(pe->valuestring, "non-preemptible") &&
                                           strcmp(pe->valuestring, "semi-preemptible"))))
            return fail(err, &p->l, "metadata.annotations." PODGROUP_ANNOTATION,
                        "its PodGroup's spec.preemptibility is not preemptible, non-preemptible or "
                        "semi-preemptible");
        if (pe && !cJSON_AddStringToObject(f, "preemptibility", pe->valuestring)) return us_err_nomem(err);
    }
    if (!cJSON_AddStringToObject(f, "controller", ctrl_names[p->controller]) ||
        !(x = cJSON_AddObjectToObject(f, "node_selector")))
        return us_err_nomem(err);
    if (selector(err, &p->l, spec, x, &p->pin) < 0) return -1;
    /* a scenario document lists only bound pods (the simulator creates the
     * pending ones, and pins only a DaemonSet's): a pending pod of another
     * kind pinned to a node cannot be said there */
    if (p->pin && !p->node && p->controller != US_CTRL_DAEMONSET && !(k->o && k->o->pending_pods))
        return fail(err, &p->l, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                    "cannot be mapped: only a DaemonSet's pending pods are pinned to a node in a scenario "
                    "(matchFields metadata.name)");
    /* labels: KAI's (background, preemptibility, ...) of the PodGroup, the
     * pod's over them; the rest mean nothing to the engine */
    if (!(x = cJSON_AddObjectToObject(f, "labels"))) return us_err_nomem(err);
    if (p->pg && str_map(err, &p->l, get(get(p->pg, "metadata"), "labels"), "PodGroup.metadata.labels",
                         KAI_PREFIX, x) < 0)
        return -1;
    if (str_map(err, &p->l, get(md, "labels"), "metadata.labels", KAI_PREFIX, x) < 0) return -1;
    if (!(x = cJSON_AddArrayToObject(f, "tolerations"))) return us_err_nomem(err);
    if (tolerations(err, &p->l, spec, x) < 0) return -1;
    const cJSON *g = get(spec, "terminationGracePeriodSeconds");
    if (g && (!cJSON_IsNumber(g) || g->valuedouble < 0))
        return fail(err, &p->l, "spec.terminationGracePeriodSeconds", "must be a number of seconds (>= 0)");
    if (!cJSON_AddNumberToObject(f, "termination_grace", g ? g->valuedouble : 30)) return us_err_nomem(err);
    return put_res(f, req, err);
}

/* Read one pod into p; *skip when it has finished (Succeeded, Failed:
 * p->succeeded tells which). */
static int read_pod(kctx *k, const cJSON *o, const char *path, kpod *p, bool *skip) {
    us_err *err = k->err;
    const cJSON *spec, *status, *md;
    const char *phase, *sched, *frac, *pgname;
    us_res req;
    memset(p, 0, sizeof *p);
    p->o = o;
    p->l.path = path;
    *skip = false;
    if (meta(err, &p->l, o, "Pod", &p->name, &p->ns) < 0 || opt_obj(err, &p->l, o, "", "spec", &spec) < 0 ||
        opt_obj(err, &p->l, o, "", "status", &status) < 0 ||
        opt_str(err, &p->l, status, "status", "phase", &phase) < 0 ||
        opt_str(err, &p->l, spec, "spec", "schedulerName", &sched) < 0 ||
        opt_str(err, &p->l, spec, "spec", "nodeName", &p->node) < 0)
        return -1;
    if (!spec) return fail(err, &p->l, "spec", "required field is missing");
    if (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) {
        p->succeeded = !strcmp(phase, "Succeeded");
        *skip = true;
        return 0;
    }
    if (p->node && !*p->node) p->node = NULL;
    if (created(err, &p->l, o, &p->created, &p->has_created) < 0) return -1;
    md = get(o, "metadata");
    p->releasing = get(md, "deletionTimestamp") && !cJSON_IsNull(get(md, "deletionTimestamp"));
    p->ours = !strcmp(sched ? sched : "default-scheduler",
                      k->o && k->o->scheduler_name ? k->o->scheduler_name : KUBE_DEFAULT_SCHEDULER);
    if (!(p->key = join(p->ns, p->name, NULL))) return us_err_nomem(err);
    if (effective(err, &p->l, spec, &req) < 0) return -1;
    /* KAI's fractional GPU: a share of one device */
    const cJSON *ann;
    if (opt_obj(err, &p->l, md, "metadata", "annotations", &ann) < 0 ||
        opt_str(err, &p->l, ann, "metadata.annotations", FRACTION_ANNOTATION, &frac) < 0 ||
        opt_str(err, &p->l, ann, "metadata.annotations", PODGROUP_ANNOTATION, &pgname) < 0)
        return -1;
    if (frac) {
        int64_t share;
        if (req.v[US_GPU])
            return fail(err, &p->l, "metadata.annotations." FRACTION_ANNOTATION,
                        "a pod asks for a GPU fraction or for " GPU_KEY ", not both");
        if (us_parse_cpu(frac, &share) < 0 || share <= 0 || share > US_GPU_UNIT)
            return fail(err, &p->l, "metadata.annotations." FRACTION_ANNOTATION,
                        "\"%s\" is not a fraction of a GPU (above 0, at most 1)", frac);
        req.v[US_GPU] = share;
    }
    if (!p->ours) {
        /* another scheduler's pod: it holds its room, alone */
        p->group = join("External", p->ns, p->name);
        p->wl = strdup(p->key);
        if (!p->group || !p->wl) return us_err_nomem(err);
        cJSON *f = p->fields = cJSON_CreateObject();
        const cJSON *g = get(spec, "terminationGracePeriodSeconds");
        if (!f || !cJSON_AddBoolToObject(f, "external", true) ||
            !cJSON_AddNumberToObject(f, "termination_grace", cJSON_IsNumber(g) && g->valuedouble >= 0 ? g->valuedouble : 30))
            return us_err_nomem(err);
        return put_res(f, req, err);
    }
    if (owner(k, p) < 0) return -1;
    if (pgname && *pgname) {
        if (!(p->pg = find(k, IX_PODGROUPS, p->ns, pgname, NULL)))
            return fail(err, &p->l, "metadata.annotations." PODGROUP_ANNOTATION,
                        "PodGroup \"%s/%s\" is not in the input", p->ns, pgname);
        free(p->group);
        if (!(p->group = join("PodGroup", p->ns, pgname))) return us_err_nomem(err);
    }
    /* the workload's name: the group without its kind */
    if (!(p->wl = strdup(strchr(p->group, '/') + 1))) return us_err_nomem(err);
    return our_fields(k, p, req);
}

/* The name of the workload pod belongs to, or NULL with err set: US_ENOMEM
 * when memory ran out, else what makes the pod unreadable. */
static char *pod_workload(const cJSON *pod, const kube_opts *o, us_err *err) {
    kctx k = {NULL, o, 0, err, NULL, 0, NULL, NULL, 0};
    kpod p;
    const char *sched, *pgname = NULL;
    char *wl = NULL;
    memset(&p, 0, sizeof p);
    p.o = pod;
    p.l.path = "pod";
    if (meta(err, &p.l, pod, "Pod", &p.name, &p.ns) < 0) return NULL;
    const cJSON *sn = get(get(pod, "spec"), "schedulerName"), *pg;
    sched = cJSON_IsString(sn) ? sn->valuestring : "default-scheduler";
    if (strcmp(sched, o && o->scheduler_name ? o->scheduler_name : KUBE_DEFAULT_SCHEDULER) != 0)
        wl = join(p.ns, p.name, NULL); /* another scheduler's: alone */
    else if ((pg = get(get(get(pod, "metadata"), "annotations"), PODGROUP_ANNOTATION)) &&
             cJSON_IsString(pg) && *(pgname = pg->valuestring))
        wl = join(p.ns, pgname, NULL);
    else if (owner(&k, &p) == 0)
        wl = strdup(strchr(p.group, '/') + 1);
    free(p.group);
    if (!wl && !err->code) us_err_nomem(err);
    return wl;
}

char *kube_pod_workload(const cJSON *pod, const kube_opts *o) {
    us_err err = {0};
    return pod_workload(pod, o, &err);
}

/* By workload name, then group (so that two owners forming one name
 * meet), then pod name. */
static int by_group(const void *a, const void *b, void *ctx) {
    (void)ctx;
    const kpod *x = a, *y = b;
    int c = strcmp(x->wl, y->wl);
    if (!c) c = strcmp(x->group, y->group);
    return c ? c : strcmp(x->key, y->key);
}

static const char *pool_of(const kctx *k, const char *node) {
    const cJSON *n = node ? find(k, IX_NODES, NULL, node, NULL) : NULL;
    return n ? node_pool(n) : NULL;
}

static const char *path_of(const kube_objs *k, size_t i, const char *kind, char *buf, size_t len) {
    if (k->paths && k->paths[i]) return k->paths[i];
    snprintf(buf, len, "%s[%zu]", kind, i);
    return buf;
}

static int by_str(const void *a, const void *b, void *ctx) {
    (void)ctx;
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* How many pods of workload wl ran to completion (k->done is sorted). */
static int done_of(const kctx *k, const char *wl) {
    size_t lo = 0, hi = k->ndone;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(k->done[mid], wl) < 0) lo = mid + 1;
        else hi = mid;
    }
    int n = 0;
    while (lo < k->ndone && !strcmp(k->done[lo++], wl)) n++;
    return n;
}

static void free_done(kctx *k) {
    for (size_t i = 0; i < k->ndone; i++) free(k->done[i]);
    free(k->done);
}

/* One workload from pods[0..n) of one group. */
static int workload(kctx *k, kpod *pods, size_t n, cJSON *out) {
    us_err *err = k->err;
    kpod *first = &pods[0];
    cJSON *w = cJSON_CreateObject(), *arr, *f;
    int live = 0;
    const char *pool = NULL;
    if (!w || !cJSON_AddItemToArray(out, w) || !cJSON_AddStringToObject(w, "name", first->wl))
        return us_err_nomem(err);
    for (size_t i = 0; i < n; i++) {
        if (!cJSON_Compare(pods[i].fields, first->fields, true)) {
            const cJSON *a, *b = NULL;
            cJSON_ArrayForEach(a, first->fields) {
                b = get(pods[i].fields, a->string);
                if (!b || !cJSON_Compare(a, b, true)) break;
            }
            return fail(err, &pods[i].l, NULL, "differs from pod \"%s\" (%s) in %s, but both are pods of "
                        "workload \"%s\"", first->key, first->l.path, a ? a->string : "its fields", first->wl);
        }
        live += !pods[i].releasing;
        if (!pool && pods[i].node) pool = pool_of(k, pods[i].node);
        if (pods[i].node && !pool_of(k, pods[i].node))
            return fail(err, &pods[i].l, "spec.nodeName", "node \"%s\" is not in the input", pods[i].node);
    }
    const char *pl = label(first->o, POOL_LABEL);
    if (!pl && first->pg) pl = label(first->pg, POOL_LABEL);
    if (pl) pool = pl;
    bool external = cJSON_IsTrue(get(first->fields, "external"));
    int min = 1;
    if (!external && first->pg) {
        const cJSON *m = get(get(first->pg, "spec"), "minMember");
        if (m && (!cJSON_IsNumber(m) || m->valuedouble < 1 || m->valuedouble > 1e6))
            return fail(err, &first->l, "metadata.annotations." PODGROUP_ANNOTATION,
                        "its PodGroup's spec.minMember must be a number of pods (1 or more)");
        if (m) min = (int)m->valuedouble;
    }
    /* a workload whose every pod is being deleted and that no controller
     * recreates holds its room until they are gone, and is never placed
     * again: that is what an external workload is */
    if (!external && live == 0 && first->controller == US_CTRL_NONE) external = true;
    cJSON_ArrayForEach(f, first->fields) {
        if (external && strcmp(f->string, "requests") && strcmp(f->string, "termination_grace") &&
            strcmp(f->string, "external"))
            continue;
        cJSON *copy = cJSON_Duplicate(f, true);
        if (!copy || !cJSON_AddItemToObject(w, f->string, copy)) {
            cJSON_Delete(copy);
            return us_err_nomem(err);
        }
    }
    if (external && !get(w, "external") && !cJSON_AddBoolToObject(w, "external", true)) return us_err_nomem(err);
    /* created: its PodGroup's creation, else its oldest pod's (job order
     * breaks priority ties by creation time, as KAI does) */
    double ct = 0;
    bool has_ct = false;
    if (first->pg) {
        char pb[64];
        const char *name, *ns;
        loc pl = {"podgroups", ""};
        size_t at;
        const char *pgn = get(get(first->pg, "metadata"), "name")->valuestring;
        if (find(k, IX_PODGROUPS, first->ns, pgn, &at) == first->pg)
            pl.path = path_of(&k->c->podgroups, at, "podgroups", pb, sizeof pb);
        if (meta(err, &pl, first->pg, "PodGroup", &name, &ns) < 0 || created(err, &pl, first->pg, &ct, &has_ct) < 0)
            return -1;
    }
    for (size_t j = 0; j < n && !first->pg; j++)
        if (pods[j].has_created && (!has_ct || pods[j].created < ct)) {
            ct = pods[j].created;
            has_ct = true;
        }
    if (has_ct && !cJSON_AddNumberToObject(w, "created_at", ct - k->epoch)) return us_err_nomem(err);
    /* its pods that ran to completion: a gang with some is whole, and
     * starts again with min_member less them (KAI's IsStale) */
    int done = external || first->controller == US_CTRL_DAEMONSET ? 0 : done_of(k, first->wl);
    /* a gang whose pods are not all created yet: its controller creates them */
    int replicas = live > min - done || external ? live : min - done;
    if (replicas < 1 && !external) replicas = 1; /* its controller recreates one */
    if (!cJSON_AddStringToObject(w, "pool", pool ? pool : "default") ||
        (first->controller != US_CTRL_DAEMONSET && !cJSON_AddNumberToObject(w, "replicas", replicas)) ||
        (!external && !cJSON_AddNumberToObject(w, "min_member", min)) ||
        (done > 0 && !cJSON_AddNumberToObject(w, "succeeded", done)) ||
        !(arr = cJSON_AddArrayToObject(w, "pods")))
        return us_err_nomem(err);
    bool pending = k->o && k->o->pending_pods;
    for (size_t i = 0; i < n; i++) {
        if (!pods[i].node && !pending) continue;
        cJSON *p = cJSON_CreateObject();
        if (!p || !cJSON_AddItemToArray(arr, p) || !cJSON_AddStringToObject(p, "name", pods[i].key) ||
            (pods[i].node && !cJSON_AddStringToObject(p, "node", pods[i].node)) ||
            (pods[i].pin && !cJSON_AddStringToObject(p, "pin", pods[i].pin)) ||
            !cJSON_AddStringToObject(p, "state", pods[i].releasing ? "releasing"
                                                 : pods[i].node ? "running" : "pending"))
            return us_err_nomem(err);
    }
    return 0;
}

static void free_pods(kpod *pods, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(pods[i].key);
        free(pods[i].group);
        free(pods[i].wl);
        cJSON_Delete(pods[i].fields);
    }
    free(pods);
}

static int by_name(const void *a, const void *b, void *ctx) {
    (void)ctx;
    const cJSON *x = *(cJSON *const *)a, *y = *(cJSON *const *)b;
    return strcmp(get(x, "name")->valuestring, get(y, "name")->valuestring);
}

/* Sort the objects of arr by their "name". */
static int sort_named(cJSON *arr, us_err *err) {
    int n = cJSON_GetArraySize(arr);
    cJSON **items = malloc((size_t)(n ? n : 1) * sizeof *items);
    if (!items) return us_err_nomem(err);
    for (int i = n - 1; i >= 0; i--) items[i] = cJSON_DetachItemFromArray(arr, i);
    us_sort(items, (size_t)n, sizeof *items, by_name, NULL);
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, items[i]);
    free(items);
    return 0;
}


int kube_scenario(const kube_cluster *c, const kube_opts *o, cJSON **out, us_err *err) {
    kindex ix[IX_N] = {{0}};
    kctx k = {c, o, 0, err, NULL, 0, ix, NULL, 0};
    cJSON *doc = cJSON_CreateObject(), *nodes, *queues, *wls, *x;
    char pb[64];
    *out = NULL;
    if (!doc || !cJSON_AddStringToObject(doc, "name", o && o->name ? o->name : "imported") ||
        !(nodes = cJSON_AddArrayToObject(doc, "nodes")) || !(queues = cJSON_AddArrayToObject(doc, "queues")) ||
        !(wls = cJSON_AddArrayToObject(doc, "workloads")))
        goto nomem;
    /* a control plane that feeds nodes apart looks them up only */
    for (size_t i = 0; i < c->nodes.n && !(o && o->workloads_only); i++) {
        if (kube_node(c->nodes.objs[i], path_of(&c->nodes, i, "nodes", pb, sizeof pb), &x, err) < 0) goto fail;
        cJSON_AddItemToArray(nodes, x);
    }
    /* t=0 is the newest creation time in the input, unless given */
    if (o && o->epoch > 0) {
        k.epoch = o->epoch;
    } else {
        const kube_objs *timed[] = {&c->queues, &c->pods, &c->podgroups};
        for (int t = 0; t < 3; t++)
            for (size_t i = 0; i < timed[t]->n; i++) {
                const cJSON *ts = get(get(timed[t]->objs[i], "metadata"), "creationTimestamp");
                double v;
                if (cJSON_IsString(ts) && rfc3339(ts->valuestring, &v) == 0 && v > k.epoch) k.epoch = v;
            }
    }
    for (size_t i = 0; i < c->queues.n; i++) {
        if (kube_queue(c->queues.objs[i], path_of(&c->queues, i, "queues", pb, sizeof pb), k.epoch, &x, err) < 0)
            goto fail;
        cJSON_AddItemToArray(queues, x);
    }
    /* the objects the pods refer to must be well formed themselves */
    static const char *const kinds[] = {"Namespace", "PodGroup", "PriorityClass"};
    const kube_objs *refs[] = {&c->namespaces, &c->podgroups, &c->priorityclasses};
    for (int r = 0; r < 3; r++)
        for (size_t i = 0; i < refs[r]->n; i++) {
            loc l = {path_of(refs[r], i, kinds[r], pb, sizeof pb), ""};
            const char *name, *ns;
            if (meta(err, &l, refs[r]->objs[i], kinds[r], &name, r == 1 ? &ns : NULL) < 0) goto fail;
        }
    if (index_objs(&ix[IX_NODES], &c->nodes, false, err) < 0 ||
        index_objs(&ix[IX_NAMESPACES], &c->namespaces, false, err) < 0 ||
        index_objs(&ix[IX_PODGROUPS], &c->podgroups, true, err) < 0 ||
        index_objs(&ix[IX_PRIORITYCLASSES], &c->priorityclasses, false, err) < 0)
        goto fail;
    if (!(k.pods = calloc(c->pods.n ? c->pods.n : 1, sizeof *k.pods)) ||
        !(k.done = calloc(c->pods.n ? c->pods.n : 1, sizeof *k.done)))
        goto nomem;
    char (*paths)[64] = calloc(c->pods.n ? c->pods.n : 1, sizeof *paths);
    if (!paths) goto nomem;
    for (size_t i = 0; i < c->pods.n; i++) {
        bool skip;
        const char *p = path_of(&c->pods, i, "pods", paths[i], sizeof paths[i]);
        int rc = read_pod(&k, c->pods.objs[i], p, &k.pods[k.npods], &skip);
        if (rc == 0 && skip && k.pods[k.npods].succeeded) {
            /* a finished pod whose owner cannot be read counts for no one;
             * memory running out fails the mapping, as it does anywhere */
            us_err we = {0};
            char *wl = pod_workload(c->pods.objs[i], o, &we);
            if (wl) k.done[k.ndone++] = wl;
            else if (we.code == US_ENOMEM) rc = us_err_nomem(err);
        }
        if (rc < 0 || skip) {
            kpod *q = &k.pods[k.npods];
            free(q->key);
            free(q->group);
            free(q->wl);
            cJSON_Delete(q->fields);
            if (rc < 0) {
                free(paths);
                goto fail;
            }
            continue;
        }
        k.npods++;
    }
    us_sort(k.pods, k.npods, sizeof *k.pods, by_group, NULL);
    us_sort(k.done, k.ndone, sizeof *k.done, by_str, NULL);
    for (size_t i = 0, j; i < k.npods; i = j) {
        for (j = i + 1; j < k.npods && !strcmp(k.pods[j].group, k.pods[i].group); j++) {}
        /* two groups of one name (a Deployment and a lone pod both "ns/web") */
        if (i > 0 && !strcmp(k.pods[i - 1].wl, k.pods[i].wl)) {
            fail(err, &k.pods[i].l, NULL, "forms workload \"%s\", and so does pod \"%s\" (%s) of another "
                 "owner: workload names must be unique", k.pods[i].wl, k.pods[i - 1].key, k.pods[i - 1].l.path);
            free(paths);
            goto fail;
        }
        if (workload(&k, &k.pods[i], j - i, wls) < 0) {
            free(paths);
            goto fail;
        }
    }
    free(paths);
    if (sort_named(nodes, err) < 0 || sort_named(queues, err) < 0 || sort_named(wls, err) < 0) goto fail;
    free_pods(k.pods, k.npods);
    free_done(&k);
    for (int j = 0; j < IX_N; j++) free(ix[j].v);
    *out = doc;
    return 0;
nomem:
    us_err_nomem(err);
fail:
    free_pods(k.pods, k.npods);
    free_done(&k);
    for (int j = 0; j < IX_N; j++) free(ix[j].v);
    cJSON_Delete(doc);
    return -1;
}

/* ---- lists ------------------------------------------------------------------ */

static int push(kube_objs *k, const cJSON *o, char *path, us_err *err) {
    const cJSON **no = realloc(k->objs, (k->n + 1) * sizeof *no);
    if (!no) return us_err_nomem(err);
    k->objs = no;
    const char **np = realloc((void *)k->paths, (k->n + 1) * sizeof *np);
    if (!np) return us_err_nomem(err);
    k->paths = np;
    k->objs[k->n] = o;
    k->paths[k->n++] = path;
    return 0;
}

int kube_cluster_from_list(const cJSON *list, kube_cluster *c, us_err *err) {
    static const struct {
        const char *kind;
        size_t off;
    } kinds[] = {{"Node", offsetof(kube_cluster, nodes)},
                 {"Pod", offsetof(kube_cluster, pods)},
                 {"Namespace", offsetof(kube_cluster, namespaces)},
                 {"Queue", offsetof(kube_cluster, queues)},
                 {"PodGroup", offsetof(kube_cluster, podgroups)},
                 {"PriorityClass", offsetof(kube_cluster, priorityclasses)}};
    const cJSON *kind = get(list, "kind"), *items = get(list, "items"), *it;
    int i = 0;
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(list)) return us_err_set(err, US_EINVAL, "(top level): must be an object (a List), not %s", tname(list));
    if (!cJSON_IsString(kind) || strlen(kind->valuestring) < 4 ||
        strcmp(kind->valuestring + strlen(kind->valuestring) - 4, "List") != 0)
        return us_err_set(err, US_EINVAL, "kind: must be \"List\" (what kubectl get -o json prints), not %s%s%s",
                          cJSON_IsString(kind) ? "\"" : "", cJSON_IsString(kind) ? kind->valuestring : tname(kind),
                          cJSON_IsString(kind) ? "\"" : "");
    if (!cJSON_IsArray(items))
        return us_err_set(err, US_EINVAL, "items: %s", items ? "must be an array" : "required field is missing");
    cJSON_ArrayForEach(it, items) {
        const cJSON *k = get(it, "kind");
        char *path = malloc(32);
        size_t which = sizeof kinds / sizeof kinds[0];
        if (!path) goto nomem;
        snprintf(path, 32, "items[%d]", i++);
        for (size_t j = 0; j < sizeof kinds / sizeof kinds[0]; j++)
            if (cJSON_IsString(k) && !strcmp(k->valuestring, kinds[j].kind)) which = j;
        if (which == sizeof kinds / sizeof kinds[0]) {
            us_err_set(err, US_EINVAL, "%s.kind: %s%s%s is not a kind understory reads (Node, Pod, Namespace, "
                       "Queue, PodGroup, PriorityClass)", path, cJSON_IsString(k) ? "\"" : "",
                       cJSON_IsString(k) ? k->valuestring : k ? tname(k) : "missing", cJSON_IsString(k) ? "\"" : "");
            free(path);
            kube_cluster_free(c);
            return -1;
        }
        if (push((kube_objs *)((char *)c + kinds[which].off), it, path, err) < 0) {
            free(path);
            kube_cluster_free(c);
            return -1;
        }
    }
    return 0;
nomem:
    kube_cluster_free(c);
    return us_err_nomem(err);
}

void kube_cluster_free(kube_cluster *c) {
    kube_objs *all[] = {&c->nodes, &c->pods, &c->namespaces, &c->queues, &c->podgroups, &c->priorityclasses};
    for (int k = 0; k < 6; k++) {
        for (size_t i = 0; i < all[k]->n; i++) free((void *)all[k]->paths[i]);
        free((void *)all[k]->paths);
        free(all[k]->objs);
        all[k]->objs = NULL;
        all[k]->paths = NULL;
        all[k]->n = 0;
    }
}
