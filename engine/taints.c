/*
 * taints.c — node taints and workload tolerations (see taints.h): their
 * JSON form, copies, and Kubernetes' matching rules.  It never looks at
 * resources, selectors or anything else about a node.
 */
#include "taints.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const us_effect_names[] = {"", "NoSchedule", "PreferNoSchedule", "NoExecute"};
#define NEFFECTS 4

bool us_toleration_matches(const us_toleration_item *t, const us_taint_item *x) {
    if (t->effect != US_EFFECT_ANY && t->effect != x->effect) return false;
    if (t->key[0] && strcmp(t->key, x->key) != 0) return false;
    return t->exists || strcmp(t->value, x->value) == 0;
}

bool us_tolerates(const us_tolerations *tol, const us_taints *taints, bool running) {
    for (size_t i = 0; i < taints->n; i++) {
        const us_taint_item *x = &taints->items[i];
        if (x->effect == US_EFFECT_PREFER_NO_SCHEDULE) continue;
        if (running && x->effect != US_EFFECT_NO_EXECUTE) continue;
        bool ok = false;
        for (size_t k = 0; k < tol->n && !ok; k++) ok = us_toleration_matches(&tol->items[k], x);
        if (!ok) return false;
    }
    return true;
}

bool us_taints_equal(const us_taints *a, const us_taints *b) {
    if (a->n != b->n) return false;
    for (size_t i = 0; i < a->n; i++) {
        const us_taint_item *x = &a->items[i], *y = &b->items[i];
        if (x->effect != y->effect || strcmp(x->key, y->key) || strcmp(x->value, y->value))
            return false;
    }
    return true;
}

bool us_tolerations_equal(const us_tolerations *a, const us_tolerations *b) {
    if (a->n != b->n) return false;
    for (size_t i = 0; i < a->n; i++) {
        const us_toleration_item *x = &a->items[i], *y = &b->items[i];
        if (x->effect != y->effect || x->exists != y->exists || strcmp(x->key, y->key) ||
            strcmp(x->value, y->value))
            return false;
    }
    return true;
}

void us_taints_free(us_taints *t) {
    for (size_t i = 0; i < t->n; i++) {
        free(t->items[i].key);
        free(t->items[i].value);
    }
    free(t->items);
    t->items = NULL;
    t->n = 0;
}

void us_tolerations_free(us_tolerations *t) {
    for (size_t i = 0; i < t->n; i++) {
        free(t->items[i].key);
        free(t->items[i].value);
    }
    free(t->items);
    t->items = NULL;
    t->n = 0;
}

/* Copy n (key, value) string pairs laid out like us_taint_item / us_toleration_item:
 * both types start with key and value, so one loop serves both. */
#define COPY_ITEMS(dst, src, type, free_fn)                                    \
    do {                                                                       \
        (dst)->items = NULL;                                                   \
        (dst)->n = 0;                                                          \
        if (!(src)->n) return 0;                                               \
        if (!((dst)->items = calloc((src)->n, sizeof(type)))) return -1;       \
        for (size_t i = 0; i < (src)->n; i++) {                                \
            type *d = &(dst)->items[(dst)->n++];                               \
            *d = (src)->items[i];                                              \
            d->key = strdup((src)->items[i].key);                              \
            d->value = strdup((src)->items[i].value);                          \
            if (!d->key || !d->value) {                                        \
                free_fn(dst);                                                  \
                return -1;                                                     \
            }                                                                  \
        }                                                                      \
        return 0;                                                              \
    } while (0)

int us_taints_copy(us_taints *dst, const us_taints *src) {
    COPY_ITEMS(dst, src, us_taint_item, us_taints_free);
}

int us_tolerations_copy(us_tolerations *dst, const us_tolerations *src) {
    COPY_ITEMS(dst, src, us_toleration_item, us_tolerations_free);
}

/* ---- JSON ------------------------------------------------------------------ */

static int bad(us_err *err, const char *path, size_t i, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int bad(us_err *err, const char *path, size_t i, const char *key, const char *fmt, ...) {
    char m[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    if (key) return us_err_set(err, US_EINVAL, "%.300s[%zu].%s: %s", path, i, key, m);
    return us_err_set(err, US_EINVAL, "%.300s[%zu]: %s", path, i, m);
}

static const char *tname(const cJSON *v) {
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    return "null";
}

/* s quoted, cut after 60 characters, with quotes and backslashes escaped
 * and control characters shown as '?'. */
static const char *quoted(char buf[200], const char *s) {
    size_t n = 0;
    buf[n++] = '"';
    for (size_t i = 0; s[i] && i < 60; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') buf[n++] = '\\';
        buf[n++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    if (strlen(s) > 60) n += (size_t)snprintf(buf + n, 4, "...");
    buf[n++] = '"';
    buf[n] = '\0';
    return buf;
}

/* Field key of object o: NULL when absent or JSON null. */
static const cJSON *field(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* Item i (an object with only the allowed fields) of the array at path. */
static int check_item(const cJSON *o, const char *path, size_t i, const char *const *allowed,
                      us_err *err) {
    if (!cJSON_IsObject(o)) return bad(err, path, i, NULL, "must be an object, not %s", tname(o));
    for (const cJSON *f = o->child; f; f = f->next) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++) ok = strcmp(f->string, *a) == 0;
        if (!ok) {
            char q[200];
            return bad(err, path, i, NULL, "%s is an unknown field", quoted(q, f->string));
        }
        for (const cJSON *g = o->child; g != f; g = g->next)
            if (strcmp(g->string, f->string) == 0) return bad(err, path, i, f->string, "duplicate field");
    }
    return 0;
}

/* String field key of item i: "" when absent; copied into *out. */
static int get_string(const cJSON *o, const char *path, size_t i, const char *key, char **out,
                      us_err *err) {
    const cJSON *v = field(o, key);
    if (v && !cJSON_IsString(v))
        return bad(err, path, i, key, "must be a string, not %s", tname(v));
    if (!(*out = strdup(v ? v->valuestring : ""))) return us_err_nomem(err);
    return 0;
}

/* Effect field of item i; absent or "" is US_EFFECT_ANY, allowed only when
 * any is true (tolerations). */
static int get_effect(const cJSON *o, const char *path, size_t i, bool any, us_taint_effect *out,
                      us_err *err) {
    const cJSON *v = field(o, "effect");
    char q[200];
    if (v && !cJSON_IsString(v))
        return bad(err, path, i, "effect", "must be a string, not %s", tname(v));
    const char *s = v ? v->valuestring : "";
    for (int e = any ? 0 : 1; e < NEFFECTS; e++)
        if (strcmp(s, us_effect_names[e]) == 0) {
            *out = (us_taint_effect)e;
            return 0;
        }
    if (!v) return bad(err, path, i, "effect", "required field is missing");
    return bad(err, path, i, "effect", "%s is not NoSchedule, PreferNoSchedule or NoExecute%s",
               quoted(q, s), any ? " (or empty: every effect)" : "");
}

static int array_of(const cJSON *v, const char *path, size_t size, void **items, us_err *err) {
    *items = NULL;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsArray(v))
        return us_err_set(err, US_EINVAL, "%.300s: must be an array, not %s", path, tname(v));
    int n = cJSON_GetArraySize(v);
    if (n > 0 && !(*items = calloc((size_t)n, size))) return us_err_nomem(err);
    return 0;
}

int us_taints_parse(const cJSON *v, const char *path, us_taints *out, us_err *err) {
    static const char *const fields[] = {"key", "value", "effect", NULL};
    us_taints t = {NULL, 0};
    const cJSON *o;
    out->items = NULL;
    out->n = 0;
    if (array_of(v, path, sizeof *t.items, (void **)&t.items, err) < 0) return -1;
    if (!t.items) return 0;
    cJSON_ArrayForEach(o, v) {
        size_t i = t.n;
        us_taint_item *x = &t.items[t.n++];
        if (check_item(o, path, i, fields, err) < 0 || get_string(o, path, i, "key", &x->key, err) < 0 ||
            get_string(o, path, i, "value", &x->value, err) < 0 ||
            get_effect(o, path, i, false, &x->effect, err) < 0)
            goto fail;
        if (!x->key[0]) {
            bad(err, path, i, "key", "%s", field(o, "key") ? "must not be empty" : "required field is missing");
            goto fail;
        }
        /* Kubernetes: at most one taint per key and effect */
        for (size_t k = 0; k < i; k++)
            if (t.items[k].effect == x->effect && strcmp(t.items[k].key, x->key) == 0) {
                char q[200];
                bad(err, path, i, NULL, "a second taint with key %s and effect %s", quoted(q, x->key),
                    us_effect_names[x->effect]);
                goto fail;
            }
    }
    *out = t;
    return 0;
fail:
    us_taints_free(&t);
    return -1;
}

int us_tolerations_parse(const cJSON *v, const char *path, us_tolerations *out, us_err *err) {
    static const char *const fields[] = {"key", "operator", "value", "effect", NULL};
    us_tolerations t = {NULL, 0};
    const cJSON *o, *op;
    char q[200];
    out->items = NULL;
    out->n = 0;
    if (array_of(v, path, sizeof *t.items, (void **)&t.items, err) < 0) return -1;
    if (!t.items) return 0;
    cJSON_ArrayForEach(o, v) {
        size_t i = t.n;
        us_toleration_item *x = &t.items[t.n++];
        if (check_item(o, path, i, fields, err) < 0 || get_string(o, path, i, "key", &x->key, err) < 0 ||
            get_string(o, path, i, "value", &x->value, err) < 0 ||
            get_effect(o, path, i, true, &x->effect, err) < 0)
            goto fail;
        if ((op = field(o, "operator")) && !cJSON_IsString(op)) {
            bad(err, path, i, "operator", "must be a string, not %s", tname(op));
            goto fail;
        }
        if (op && strcmp(op->valuestring, "Exists") == 0) {
            x->exists = true;
        } else if (op && strcmp(op->valuestring, "Equal") != 0 && op->valuestring[0]) {
            bad(err, path, i, "operator", "%s is not Equal or Exists", quoted(q, op->valuestring));
            goto fail;
        }
        if (x->exists && x->value[0]) {
            bad(err, path, i, "value", "must be empty with operator Exists");
            goto fail;
        }
        if (!x->exists && !x->key[0]) {
            bad(err, path, i, "key", "may be empty only with operator Exists (which tolerates every taint)");
            goto fail;
        }
    }
    *out = t;
    return 0;
fail:
    us_tolerations_free(&t);
    return -1;
}
