/*
 * jsonw.c — a JSON document written value by value, as streamed text
 * formatted the way cJSON_Print formats a tree, or as a cJSON tree.
 *
 * The text format is cJSON 1.7's: an object is "{\n", its members each on
 * a line indented by one tab per open container as "key":<tab>value,
 * separated by ",\n", then a newline and the closing brace indented one tab
 * less ("{\n}" when empty at the top); an array stays on one line, "[a, b]".
 * Strings are escaped as cJSON escapes them; numbers are printed by cJSON
 * itself, so that every figure reads as it always did.
 */
#include "jsonw.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Beyond this magnitude cJSON would print an integral double with an
 * exponent ("%1.15g"), so such integers are kept as raw text. */
#define BIG_INT 1000000000000000LL

static void fail(us_jw *w, int code) {
    if (!w->failed) w->failed = code;
}

/* ---- text ------------------------------------------------------------------ */

static void flush(us_jw *w) {
    if (w->n && !w->failed && fwrite(w->buf, 1, w->n, w->f) != w->n) fail(w, US_EIO);
    w->n = 0;
}

static void put(us_jw *w, const char *s, size_t len) {
    if (w->failed) return;
    if (w->n + len > US_JW_BUF) {
        flush(w);
        if (len > US_JW_BUF) {
            if (!w->failed && fwrite(s, 1, len, w->f) != len) fail(w, US_EIO);
            return;
        }
    }
    memcpy(w->buf + w->n, s, len);
    w->n += len;
}

static void puts_(us_jw *w, const char *s) { put(w, s, strlen(s)); }

static void tabs(us_jw *w, int k) {
    static const char t[] = "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t";
    for (; k > 0; k -= 16) put(w, t, k < 16 ? (size_t)k : 16);
}

/* s as cJSON's print_string_ptr writes it: bytes above 31 as they are,
 * except the quote and the backslash; the rest escaped (\u00XX when no
 * short form).  NULL as the empty string. */
static void quoted(us_jw *w, const char *s) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)(s ? s : ""), *run = p;
    put(w, "\"", 1);
    for (; *p; p++) {
        char esc[7] = {'\\', 0};
        size_t k = 2;
        if (*p > 31 && *p != '"' && *p != '\\') continue;
        put(w, (const char *)run, (size_t)(p - run));
        run = p + 1;
        switch (*p) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[*p >> 4];
            esc[5] = hex[*p & 15];
            k = 6;
        }
        put(w, esc, k);
    }
    put(w, (const char *)run, (size_t)(p - run));
    put(w, "\"", 1);
}

/* What comes before a value: the separator from the one before it and,
 * in an object, the indented key. */
static void lead(us_jw *w, const char *key) {
    int d = w->depth - 1;
    if (d < 0) return;
    if (w->object[d]) {
        if (!key) {
            fail(w, US_EINVAL);
            return;
        }
        if (w->count[d]) put(w, ",\n", 2);
        tabs(w, w->depth);
        quoted(w, key);
        put(w, ":\t", 2);
    } else if (w->count[d]) {
        put(w, ", ", 2);
    }
    w->count[d]++;
}

static void text_open(us_jw *w, bool object) {
    put(w, object ? "{\n" : "[", object ? 2 : 1);
    if (w->depth < US_JW_DEPTH) {
        w->object[w->depth] = object;
        w->count[w->depth] = 0;
    }
}

static void text_close(us_jw *w) {
    int d = w->depth; /* after the pop: the closed container was at d */
    if (d >= US_JW_DEPTH) return;
    if (w->object[d]) {
        if (w->count[d]) put(w, "\n", 1);
        tabs(w, d);
        put(w, "}", 1);
    } else {
        put(w, "]", 1);
    }
}

/* A number exactly as cJSON prints it (its own code: the %d, %1.15g and
 * %1.17g choice and the "null" for NaN and infinities). */
static void text_number(us_jw *w, const cJSON *it) {
    char b[64];
    double d = it->valuedouble;
    /* a whole number below 1e15 is its digits, as "%1.15g" prints it
     * ("-0" for -0): cJSON's printf and sscanf back per number were most of
     * the cost of printing a state document */
    if (d > -BIG_INT && d < BIG_INT && d == (double)(int64_t)d) {
        int64_t v = (int64_t)d;
        uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
        char t[24];
        size_t n = 0, k = 0;
        if (v < 0 || (v == 0 && signbit(d))) b[k++] = '-';
        do t[n++] = (char)('0' + u % 10);
        while ((u /= 10) > 0);
        while (n) b[k++] = t[--n];
        put(w, b, k);
        return;
    }
    if (!cJSON_PrintPreallocated((cJSON *)it, b, (int)sizeof b, 0)) {
        fail(w, US_ENOMEM);
        return;
    }
    puts_(w, b);
}

static void text_item(us_jw *w, const char *key, const cJSON *it);

static void text_children(us_jw *w, const cJSON *it) {
    for (const cJSON *c = it->child; c && !w->failed; c = c->next) text_item(w, c->string, c);
}

static void open_(us_jw *w, const char *key, bool object);

/* A cJSON value as cJSON_Print would print it at this depth. */
static void text_item(us_jw *w, const char *key, const cJSON *it) {
    if (w->failed) return;
    if (cJSON_IsObject(it) || cJSON_IsArray(it)) {
        open_(w, key, cJSON_IsObject(it));
        text_children(w, it);
        us_jw_end(w);
        return;
    }
    lead(w, key);
    if (cJSON_IsString(it)) quoted(w, it->valuestring);
    else if (cJSON_IsNumber(it)) text_number(w, it);
    else if (cJSON_IsRaw(it) && it->valuestring) puts_(w, it->valuestring);
    else if (cJSON_IsTrue(it)) put(w, "true", 4);
    else if (cJSON_IsFalse(it)) put(w, "false", 5);
    else if (cJSON_IsNull(it)) put(w, "null", 4);
    else fail(w, US_EINVAL); /* cJSON_Print fails on these too */
}

/* ---- tree ------------------------------------------------------------------ */

static void attach(us_jw *w, const char *key, cJSON *it) {
    cJSON *parent = w->depth > 0 && w->depth <= US_JW_DEPTH ? w->open[w->depth - 1] : NULL;
    if (!it) {
        fail(w, US_ENOMEM);
        return;
    }
    if (w->failed) {
        cJSON_Delete(it);
        return;
    }
    if (w->depth == 0) {
        if (w->root) {
            cJSON_Delete(it);
            fail(w, US_EINVAL);
            return;
        }
        w->root = it;
        return;
    }
    if (cJSON_IsObject(parent) ? !key || !cJSON_AddItemToObject(parent, key, it)
                               : !cJSON_AddItemToArray(parent, it)) {
        cJSON_Delete(it);
        fail(w, key || !cJSON_IsObject(parent) ? US_ENOMEM : US_EINVAL);
    }
}

/* ---- both ------------------------------------------------------------------ */

void us_jw_text(us_jw *w, FILE *f) {
    memset(w, 0, sizeof *w);
    w->f = f;
    if (!(w->buf = malloc(US_JW_BUF))) fail(w, US_ENOMEM);
}

void us_jw_tree(us_jw *w) { memset(w, 0, sizeof *w); }

static void open_(us_jw *w, const char *key, bool object) {
    if (w->depth >= US_JW_DEPTH) fail(w, US_EINVAL);
    if (w->f) {
        lead(w, key);
        text_open(w, object);
    } else if (!w->failed) {
        cJSON *c = object ? cJSON_CreateObject() : cJSON_CreateArray();
        attach(w, key, c);
        if (!w->failed && w->depth < US_JW_DEPTH) w->open[w->depth] = c;
    }
    w->depth++;
}

void us_jw_begin_object(us_jw *w, const char *key) { open_(w, key, true); }
void us_jw_begin_array(us_jw *w, const char *key) { open_(w, key, false); }

void us_jw_end(us_jw *w) {
    if (w->depth == 0) {
        fail(w, US_EINVAL);
        return;
    }
    w->depth--;
    if (w->f) text_close(w);
}

void us_jw_string(us_jw *w, const char *key, const char *s) {
    if (w->f) {
        lead(w, key);
        if (s) quoted(w, s);
        else put(w, "null", 4);
    } else if (!w->failed) {
        attach(w, key, s ? cJSON_CreateString(s) : cJSON_CreateNull());
    }
}

void us_jw_number(us_jw *w, const char *key, double v) {
    if (w->failed) return;
    cJSON *it = cJSON_CreateNumber(v);
    if (w->f) {
        lead(w, key);
        if (!it) fail(w, US_ENOMEM);
        else text_number(w, it);
        cJSON_Delete(it);
    } else {
        attach(w, key, it);
    }
}

cJSON *us_jw_int_item(int64_t v) {
    if (v > -BIG_INT && v < BIG_INT) return cJSON_CreateNumber((double)v);
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, v);
    cJSON *it = cJSON_CreateRaw(b);
    if (it) {
        it->valuedouble = (double)v;
        it->valueint = v > 0 ? INT32_MAX : INT32_MIN;
    }
    return it;
}

void us_jw_int(us_jw *w, const char *key, int64_t v) {
    if (w->f) {
        /* below 1e15 cJSON prints the double's integer digits, above it
         * the tree holds them raw: the same digits either way */
        char b[32];
        lead(w, key);
        put(w, b, (size_t)snprintf(b, sizeof b, "%" PRId64, v));
    } else if (!w->failed) {
        attach(w, key, us_jw_int_item(v));
    }
}

void us_jw_bool(us_jw *w, const char *key, bool v) {
    if (w->f) {
        lead(w, key);
        puts_(w, v ? "true" : "false");
    } else if (!w->failed) {
        attach(w, key, cJSON_CreateBool(v));
    }
}

void us_jw_null(us_jw *w, const char *key) { us_jw_string(w, key, NULL); }

void us_jw_take(us_jw *w, const char *key, cJSON *item) {
    if (!item) {
        fail(w, US_ENOMEM);
        return;
    }
    if (w->f) {
        text_item(w, key, item);
        cJSON_Delete(item);
    } else {
        attach(w, key, item);
    }
}

int us_jw_finish(us_jw *w, cJSON **tree, us_err *err) {
    if (tree) *tree = NULL;
    if (w->depth != 0) fail(w, US_EINVAL);
    if (w->f) flush(w);
    free(w->buf);
    w->buf = NULL;
    if (!w->f && !w->failed && !w->root) fail(w, US_EINVAL);
    if (w->failed) {
        cJSON_Delete(w->root);
        w->root = NULL;
        if (w->failed == US_ENOMEM) return us_err_nomem(err);
        if (w->failed == US_EIO) return us_err_set(err, US_EIO, "cannot write the output");
        return us_err_set(err, US_EINVAL, "output: the document is not well formed (an internal error)");
    }
    if (tree) *tree = w->root;
    else cJSON_Delete(w->root);
    w->root = NULL;
    return 0;
}

/* ---- a whole tree ------------------------------------------------------------ */

char *us_jw_print(const cJSON *tree) {
    char *text = NULL;
    size_t len = 0;
    us_jw w;
    us_err err = {0};
    FILE *f;
    if (!tree || !(f = open_memstream(&text, &len))) return NULL;
    us_jw_text(&w, f);
    text_item(&w, NULL, tree);
    int rc = us_jw_finish(&w, NULL, &err);
    if (fclose(f) != 0 || rc < 0) {
        free(text);
        return NULL;
    }
    return text;
}
