/*
 * utf8.c — UTF-8 validity (utf8.h).
 *
 * It owns the one definition of valid UTF-8 the engine uses (RFC 3629: the
 * shortest form, no surrogates, at most U+10FFFF).  It never prints.
 */
#include "utf8.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid sequence at s[0..n), 0 when it is invalid, or -1
 * when it is a valid start cut short by the end of the text. */
static int seq_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    int len;
    unsigned char lo = 0x80, hi = 0xbf;  /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c < 0xc2) return 0;              /* continuation, or overlong 2-byte */
    if (c < 0xe0) len = 2;
    else if (c < 0xf0) {
        len = 3;
        if (c == 0xe0) lo = 0xa0;        /* overlong */
        if (c == 0xed) hi = 0x9f;        /* surrogates */
    } else if (c < 0xf5) {
        len = 4;
        if (c == 0xf0) lo = 0x90;        /* overlong */
        if (c == 0xf4) hi = 0x8f;        /* past U+10FFFF */
    } else {
        return 0;
    }
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return -1;
        unsigned char lo_i = i == 1 ? lo : 0x80, hi_i = i == 1 ? hi : 0xbf;
        if (s[i] < lo_i || s[i] > hi_i) return 0;
    }
    return len;
}

int us_utf8_seq_len(const char *s, size_t n) { return seq_len((const unsigned char *)s, n); }

long us_utf8_invalid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (u[i] < 0x80) { /* most names are ASCII: no call per byte */
            i++;
            continue;
        }
        int k = seq_len(u + i, n - i);
        if (k <= 0) return (long)i;
        i += (size_t)k;
    }
    return -1;
}

void us_text_escape(char *s, size_t cap) {
    size_t n = strlen(s), o = 0;
    char *in;
    if (cap == 0) return;
    /* the common case: nothing to do */
    bool plain = us_utf8_invalid(s, n) < 0;
    for (size_t i = 0; plain && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        plain = !((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ||
                  (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] < 0xa0));
    }
    if (plain || !(in = strdup(s))) return;
    const unsigned char *u = (const unsigned char *)in;
    for (size_t i = 0; i < n;) {
        int k = seq_len(u + i, n - i);
        char esc[8];
        size_t len;
        if (k < 0) break;  /* cut short at the end: dropped */
        if (k == 0 || (u[i] < 0x20 && u[i] != '\n' && u[i] != '\t') || u[i] == 0x7f) {
            len = (size_t)snprintf(esc, sizeof esc, "\\x%02x", u[i]);
            k = 1;
        } else if (k == 2 && u[i] == 0xc2 && u[i + 1] < 0xa0) {
            len = (size_t)snprintf(esc, sizeof esc, "\\u%04x", u[i + 1]);
        } else {
            len = (size_t)k;
            memcpy(esc, in + i, len);
        }
        if (o + len >= cap) break;
        memcpy(s + o, esc, len);
        o += len;
        i += (size_t)k;
    }
    s[o] = '\0';
    free(in);
}

char *us_utf8_dup_valid(const char *s) {
    size_t n = strlen(s), o = 0;
    const unsigned char *u = (const unsigned char *)s;
    if (us_utf8_invalid(s, n) < 0) return strdup(s);
    char *out = malloc(4 * n + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        int k = seq_len(u + i, n - i);
        if (k < 0) break;  /* cut short at the end: dropped */
        if (k == 0) {
            snprintf(out + o, 5, "\\x%02x", u[i]);
            o += 4;
            i++;
            continue;
        }
        memcpy(out + o, s + i, (size_t)k);
        o += (size_t)k;
        i += (size_t)k;
    }
    out[o] = '\0';
    return out;
}
