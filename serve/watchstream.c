/*
 * watchstream.c — watch-stream lines into events (see watchstream.h).
 * Only a line whose newline has arrived is parsed, so where the stream is
 * split never changes what is decoded.
 */
#include "watchstream.h"

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

int sv_watchstream_feed(sv_watchstream *w, const char *buf, size_t n, sv_watch_fn fn, void *ud) {
    for (size_t i = 0; i < n && !w->stopped; i++) {
        if (buf[i] == '\n') {
            if (w->len) {
                w->line[w->len] = '\0';
                w->len = 0;
                if (!decode_line(w->line, fn, ud)) w->stopped = true;
            }
            continue;
        }
        if (w->len + 2 > w->cap) {
            size_t ncap = w->cap ? w->cap * 2 : 65536;
            char *l = realloc(w->line, ncap);
            if (!l) {
                w->stopped = true;
                return -1;
            }
            w->line = l;
            w->cap = ncap;
        }
        w->line[w->len++] = buf[i];
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
