/*
 * json_agree.h — the two promises of the engine's JSON pieces, checked
 * against cJSON itself (shared by tests/c/test_jsonw.c and the libFuzzer
 * target tests/fuzz/fuzz_json.c):
 *
 *   - a text us_jsplit accepts is one cJSON accepts, every span is exactly
 *     one value, and the pieces parsed alone make the tree cJSON makes of
 *     the whole;
 *   - the writer's text sink prints a tree byte for byte as cJSON_Print.
 *
 * Each returns NULL when the promise holds (or cannot be judged: out of
 * memory), else what broke.
 */
#ifndef US_JSON_AGREE_H
#define US_JSON_AGREE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "jsonsplit.h"
#include "jsonw.h"

static const char *const agree_split_keys[] = {"nodes", "workloads", "a", NULL};

/* The value at span, which must be exactly one value. */
static cJSON *agree_piece(const char *text, us_jspan sp, const char **why) {
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(text + sp.off, sp.len, &end, 0);
    if (!v) *why = "a piece does not parse alone";
    else if (end != text + sp.off + sp.len) *why = "a span is not exactly one value";
    return v;
}

static const char *json_split_agrees(const char *text, size_t len) {
    us_jdoc d;
    const char *why = NULL;
    int rc = us_jsplit(text, len, agree_split_keys, &d);
    if (rc <= 0) return NULL; /* refused: cJSON parses it whole, nothing to compare */
    char *buf = malloc(len + 1), *a = NULL, *b = NULL;
    cJSON *whole = NULL, *rebuilt = cJSON_CreateObject();
    if (!buf || !rebuilt) goto out;
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (!(whole = cJSON_ParseWithOpts(buf, NULL, 1))) {
        why = "jsonsplit accepted a text cJSON refuses";
        goto out;
    }
    for (size_t k = 0; k < d.n && !why; k++) {
        const us_jmember *m = &d.members[k];
        cJSON *key = agree_piece(text, m->key, &why), *v = NULL;
        if (key && !cJSON_IsString(key)) why = "a key span is not a string";
        if (!why && m->split) {
            v = cJSON_CreateArray();
            for (size_t i = 0; v && i < m->nitems && !why; i++) {
                cJSON *it = agree_piece(text, m->items[i], &why);
                if (it) cJSON_AddItemToArray(v, it);
            }
            if (!why) {
                cJSON *check = agree_piece(text, m->value, &why);
                if (check && !cJSON_IsArray(check)) why = "a split member is not an array";
                cJSON_Delete(check);
            }
        } else if (!why) {
            v = agree_piece(text, m->value, &why);
        }
        if (!why && v && key) cJSON_AddItemToObject(rebuilt, key->valuestring, v);
        else cJSON_Delete(v);
        cJSON_Delete(key);
    }
    if (why) goto out;
    a = cJSON_PrintUnformatted(whole);
    b = cJSON_PrintUnformatted(rebuilt);
    if (a && b && strcmp(a, b) != 0) why = "the pieces make another tree than the whole";
out:
    free(a);
    free(b);
    cJSON_Delete(whole);
    cJSON_Delete(rebuilt);
    free(buf);
    us_jdoc_free(&d);
    return why;
}

static int agree_depth(const cJSON *v) {
    int most = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        int d = agree_depth(c);
        if (d > most) most = d;
    }
    return (cJSON_IsArray(v) || cJSON_IsObject(v)) + most;
}

static const char *json_print_agrees(const cJSON *tree) {
    char *ref = NULL, *text = NULL;
    size_t n = 0;
    const char *why = NULL;
    us_jw w;
    FILE *f = NULL;
    cJSON *copy = NULL;
    if (agree_depth(tree) > US_JW_DEPTH) return NULL; /* the writer refuses such depth */
    if (!(ref = cJSON_Print(tree)) || !(copy = cJSON_Duplicate(tree, 1)) ||
        !(f = open_memstream(&text, &n)))
        goto out;
    us_jw_text(&w, f);
    us_jw_take(&w, NULL, copy);
    copy = NULL;
    if (us_jw_finish(&w, NULL, NULL) < 0) {
        why = "the writer refused a tree cJSON prints";
        goto out;
    }
    int closed = fclose(f);
    f = NULL;
    if (closed != 0) goto out;
    if (strlen(ref) != n || memcmp(ref, text, n) != 0) why = "the writer printed other bytes than cJSON_Print";
out:
    if (f) fclose(f);
    cJSON_Delete(copy);
    free(text);
    free(ref);
    return why;
}

#endif
