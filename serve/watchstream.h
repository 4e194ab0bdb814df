/*
 * watchstream.h — the decoding of a Kubernetes watch stream: bytes as they
 * arrive, split anywhere (chunked transfer, TCP), into events.  The stream
 * is JSON lines {"type": ..., "object": {...}}; a line is decoded when its
 * newline arrives.  No I/O: the informer (informer.c) feeds it what its
 * request receives.  One decoder per watch; not thread-safe.
 */
#ifndef SV_WATCHSTREAM_H
#define SV_WATCHSTREAM_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum sv_watch_type {
    SV_WATCH_ADDED,
    SV_WATCH_MODIFIED,
    SV_WATCH_DELETED,
    SV_WATCH_BOOKMARK,
    SV_WATCH_GONE,   /* an ERROR event with code 410: the version is too old, list again */
    SV_WATCH_ERROR,  /* any other ERROR event */
    SV_WATCH_OTHER   /* a type this decoder does not know */
} sv_watch_type;

typedef struct sv_watch_event {
    sv_watch_type type;
    const cJSON *object; /* the event's "object", never NULL */
    const char *rv;      /* object.metadata.resourceVersion, NULL when absent (always for errors) */
    const char *line;    /* the whole line, for messages */
} sv_watch_event;

/* One event; everything it points to is valid during the call only, and
 * the call must not feed, reset or free the decoder.  Return false to
 * stop: the decoder then drops everything until sv_watchstream_reset (the
 * informer stops on 410 and lists again). */
typedef bool (*sv_watch_fn)(void *ud, const sv_watch_event *ev);

typedef struct sv_watchstream {
    char *line;      /* bytes since the last newline, owned */
    size_t len, cap;
    bool stopped;
} sv_watchstream;

/* An empty decoder; it owns nothing until fed. */
void sv_watchstream_init(sv_watchstream *w);
/* Decode n bytes: fn is called for each complete line that is an event
 * (lines that are not JSON objects with a string "type" and an "object"
 * are skipped).  0, or -1 when out of memory: the line is lost, so
 * the decoder stops as if fn had returned false. */
int sv_watchstream_feed(sv_watchstream *w, const char *buf, size_t n, sv_watch_fn fn, void *ud);
/* A new stream: drop a partial line, decode again after a stop. */
void sv_watchstream_reset(sv_watchstream *w);
/* Has it stopped (fn returned false, or out of memory)? */
bool sv_watchstream_stopped(const sv_watchstream *w);
void sv_watchstream_free(sv_watchstream *w);

#endif
