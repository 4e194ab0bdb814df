/*
 * watchstream.c — watch-stream lines into events (see watchstream.h).
 * Only a line whose newline has arrived is parsed, so where the stream is
 * split never changes what is decoded.
 */
#include "watchstream.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void sv_watchstream_init(sv_watchstream *w) { memset(w, 0, sizeof *w); }

static const char *str_at(const cJSON *o, const char *a, const char *b) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    x = b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

static sv_watch_type type_of(const char *type, const cJSON *obj) {
    static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"};
    if (strcmp(type, "ERROR") == 0) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
        return cJSON_IsNumber(code) && code->valuedouble == 410 ? SV_WATCH_GONE : SV_WATCH_ERROR;
    }
    for (int i = 0; i < 4; i++)
        if (strcmp(type, names[i]) == 0) return (sv_watch_type)i;
    return SV_WATCH_OTHER;
}

/* One line: {"type": ..., "object": {...}}.  false: stop. */
static bool decode_line(const char *line, sv_watch_fn fn, void *ud) {
    cJSON *doc = cJSON_Parse(line);
    const char *type = str_at(doc, "type", NULL);
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(doc, "object");
    bool go = true;
    if (type && obj) {
        sv_watch_event ev = {type_of(type, obj), obj, NULL, line};
        if (ev.type != SV_WATCH_GONE && ev.type != SV_WATCH_ERROR)
            ev.rv = str_at(obj, "metadata", "resourceVersion");
        go = fn(ud, &ev);
    }
    cJSON_Delete(doc);
    return go;
}

/* Room for k more bytes and a terminator; -1 when out of memory. */
static int room(sv_watchstream *w, size_t k) {
    if (k >= SIZE_MAX / 4 - w->len) return -1;
    size_t need = w->len + k + 1, ncap = w->cap ? w->cap : 8192; /* most objects' lines fit */
    if (need <= w->cap) return 0;
    while (ncap < need) ncap *= 2;
    char *l = realloc(w->line, ncap);
    if (!l) return -1;
    w->line = l;
    w->cap = ncap;
    return 0;
}

int sv_watchstream_feed(sv_watchstream *w, const char *buf, size_t n, sv_watch_fn fn, void *ud) {
    while (n && !w->stopped) {
        /* a line's bytes are copied as a run, not one by one */
        const char *nl = memchr(buf, '\n', n);
        size_t k = nl ? (size_t)(nl - buf) : n;
        if (room(w, k) < 0) {
            w->stopped = true;
            return -1;
        }
        memcpy(w->line + w->len, buf, k);
        w->len += k;
        if (!nl) break;
        buf = nl + 1;
        n -= k + 1;
        if (w->len) {
            w->line[w->len] = '\0';
            w->len = 0;
            if (!decode_line(w->line, fn, ud)) w->stopped = true;
        }
    }
    return 0;
}

void sv_watchstream_reset(sv_watchstream *w) {
    w->len = 0;
    w->stopped = false;
}

bool sv_watchstream_stopped(const sv_watchstream *w) { return w->stopped; }

void sv_watchstream_free(sv_watchstream *w) {
    free(w->line);
    sv_watchstream_init(w);
}
