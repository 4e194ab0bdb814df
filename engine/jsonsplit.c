/*
 * jsonsplit.c — a strict JSON checker that notes where the top-level
 * members and the elements of chosen arrays lie.
 *
 * Recursive descent over the text, building nothing but the spans.  The
 * grammar is deliberately narrower than cJSON's (which takes leading zeros,
 * any byte below 33 as whitespace, raw control characters in strings and
 * bad \u digits): whatever is refused here goes to cJSON whole, so being
 * narrow costs a document only the old way of loading, never a verdict.
 */
#include "jsonsplit.h"

#include <stdlib.h>
#include <string.h>

#include "utf8.h"

typedef struct P {
    const char *s;
    size_t len, i;
} P;

static void ws(P *p) {
    while (p->i < p->len &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static bool lit(P *p, const char *w) {
    size_t k = strlen(w);
    if (p->len - p->i < k || memcmp(p->s + p->i, w, k) != 0) return false;
    p->i += k;
    return true;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* \uXXXX at p->i (the backslash); its code unit, or -1. */
static long hex4(P *p) {
    long v = 0;
    if (p->len - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') return -1;
    for (int k = 2; k < 6; k++) {
        int h = hexval(p->s[p->i + (size_t)k]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    p->i += 6;
    return v;
}

/* A string; *plain is set when it holds no escape. */
static bool string(P *p, bool *plain) {
    if (p->i >= p->len || p->s[p->i] != '"') return false;
    p->i++;
    if (plain) *plain = true;
    while (p->i < p->len) {
        unsigned char ch = (unsigned char)p->s[p->i];
        if (ch == '"') {
            p->i++;
            return true;
        }
        if (ch < 0x20) return false;
        if (ch >= 0x80) { /* UTF-8, by the loader's rule */
            int k = us_utf8_seq_len(p->s + p->i, p->len - p->i);
            if (k <= 0) return false;
            p->i += (size_t)k;
            continue;
        }
        if (ch != '\\') {
            p->i++;
            continue;
        }
        if (plain) *plain = false;
        if (p->i + 1 >= p->len) return false;
        switch (p->s[p->i + 1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p->i += 2;
            break;
        case 'u': {
            long u = hex4(p);
            if (u < 0 || (u >= 0xDC00 && u <= 0xDFFF)) return false;
            if (u >= 0xD800 && u <= 0xDBFF) {
                long lo = hex4(p);
                if (lo < 0xDC00 || lo > 0xDFFF) return false;
            }
            break;
        }
        default:
            return false;
        }
    }
    return false;
}

static bool digits(P *p) {
    size_t start = p->i;
    while (p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    return p->i > start;
}

static bool number(P *p) {
    size_t start = p->i;
    if (p->i < p->len && p->s[p->i] == '-') p->i++;
    if (p->i < p->len && p->s[p->i] == '0') p->i++;
    else if (!digits(p)) return false;
    if (p->i < p->len && p->s[p->i] == '.') {
        p->i++;
        if (!digits(p)) return false;
    }
    if (p->i < p->len && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->len && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (!digits(p)) return false;
    }
    /* cJSON reads at most 63 characters of a number */
    return p->i - start <= 63;
}

static bool value(P *p, int depth);

/* The members or elements of the container at p->i ('{' or '['). */
static bool container(P *p, int depth) {
    bool obj = p->s[p->i] == '{';
    char close = obj ? '}' : ']';
    if (depth >= US_JSPLIT_DEPTH) return false;
    p->i++;
    ws(p);
    if (p->i < p->len && p->s[p->i] == close) {
        p->i++;
        return true;
    }
    for (;;) {
        if (obj) {
            if (!string(p, NULL)) return false;
            ws(p);
            if (p->i >= p->len || p->s[p->i] != ':') return false;
            p->i++;
            ws(p);
        }
        if (!value(p, depth + 1)) return false;
        ws(p);
        if (p->i >= p->len) return false;
        if (p->s[p->i] == close) {
            p->i++;
            return true;
        }
        if (p->s[p->i] != ',') return false;
        p->i++;
        ws(p);
    }
}

static bool value(P *p, int depth) {
    if (p->i >= p->len) return false;
    switch (p->s[p->i]) {
    case '{': case '[': return container(p, depth);
    case '"': return string(p, NULL);
    case 't': return lit(p, "true");
    case 'f': return lit(p, "false");
    case 'n': return lit(p, "null");
    default: return number(p);
    }
}

static bool grow(void **a, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return true;
    size_t nc = *cap ? *cap * 2 : 16;
    void *na = realloc(*a, nc * elem);
    if (!na) return false;
    *a = na;
    *cap = nc;
    return true;
}

/* The elements of the array at p->i, noted in m.  0, -1 out of memory,
 * 1 not strict JSON. */
static int split_array(P *p, us_jmember *m) {
    size_t cap = 0;
    p->i++;
    ws(p);
    if (p->i < p->len && p->s[p->i] == ']') {
        p->i++;
        return 0;
    }
    for (;;) {
        size_t start = p->i;
        if (!value(p, 2)) return 1;
        if (!grow((void **)&m->items, &cap, m->nitems, sizeof *m->items)) return -1;
        m->items[m->nitems++] = (us_jspan){start, p->i - start};
        ws(p);
        if (p->i >= p->len) return 1;
        if (p->s[p->i] == ']') {
            p->i++;
            return 0;
        }
        if (p->s[p->i] != ',') return 1;
        p->i++;
        ws(p);
    }
}

static bool named(const char *s, us_jspan key, const char *const *split) {
    for (; split && *split; split++)
        if (strlen(*split) == key.len - 2 && memcmp(s + key.off + 1, *split, key.len - 2) == 0) return true;
    return false;
}

static int members(P *p, const char *const *split, us_jdoc *out) {
    size_t cap = 0;
    ws(p);
    if (p->i >= p->len || p->s[p->i] != '{') return 1;
    p->i++;
    ws(p);
    if (p->i < p->len && p->s[p->i] == '}') {
        p->i++;
        return 0;
    }
    for (;;) {
        us_jmember m = {0};
        bool plain;
        int rc = 0;
        m.key.off = p->i;
        if (!string(p, &plain)) return 1;
        m.key.len = p->i - m.key.off;
        ws(p);
        if (p->i >= p->len || p->s[p->i] != ':') return 1;
        p->i++;
        ws(p);
        if (!grow((void **)&out->members, &cap, out->n, sizeof *out->members)) return -1;
        m.value.off = p->i;
        m.split = plain && p->i < p->len && p->s[p->i] == '[' && named(p->s, m.key, split);
        if (m.split) rc = split_array(p, &m);
        else if (!value(p, 1)) rc = 1;
        m.value.len = p->i - m.value.off;
        out->members[out->n++] = m; /* owned by out from here, even on failure */
        if (rc) return rc;
        ws(p);
        if (p->i >= p->len) return 1;
        if (p->s[p->i] == '}') {
            p->i++;
            return 0;
        }
        if (p->s[p->i] != ',') return 1;
        p->i++;
        ws(p);
    }
}

int us_jsplit(const char *text, size_t len, const char *const *split, us_jdoc *out) {
    P p = {text, len, 0};
    memset(out, 0, sizeof *out);
    int rc = members(&p, split, out);
    if (rc == 0) {
        ws(&p);
        if (p.i != len) rc = 1;
    }
    if (rc != 0) us_jdoc_free(out);
    return rc == 0 ? 1 : rc < 0 ? -1 : 0;
}

void us_jdoc_free(us_jdoc *d) {
    for (size_t k = 0; k < d->n; k++) free(d->members[k].items);
    free(d->members);
    memset(d, 0, sizeof *d);
}
