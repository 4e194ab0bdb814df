/*
 * fuzz_watch.c — libFuzzer target: the decoding of a Kubernetes watch
 * stream as `understory serve` receives it (serve/watchstream.c; make fuzz;
 * docs/testing.md).
 *
 * The input is the stream: JSON lines of watch events, bookmarks and ERROR
 * events (410 Gone among them), or anything else.  It is decoded three
 * times: whole, and twice in pieces whose sizes are drawn from the input,
 * as HTTP chunks and TCP reads split it (once in pieces of 1 to 64 bytes,
 * once mostly of 1 to 16 with some up to 4 KB).  The three must decode the
 * same events in the same order (where the stream is split never matters),
 * each event must be well formed (a known type, an object, its line without
 * the newline, the resourceVersion the object holds), a 410 stops decoding
 * until the stream is reset, as the informer then lists again; and nothing
 * may crash, leak or read out of bounds (ASan + UBSan).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watchstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What one decoding saw: a digest of every event, in order. */
typedef struct seen {
    uint64_t digest;
    size_t events;
    bool gone;
} seen;

static void die(const char *what) {
    fprintf(stderr, "fuzz_watch: %s\n", what);
    abort();
}

static uint64_t mix(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211u;
    return h;
}

static bool on_event(void *ud, const sv_watch_event *ev) {
    seen *s = ud;
    unsigned char type = (unsigned char)ev->type;
    if (s->gone) die("an event after 410 Gone stopped the decoder");
    if (ev->type > SV_WATCH_OTHER) die("an unknown event type");
    if (!ev->object || !ev->line || !ev->line[0] || strchr(ev->line, '\n')) die("a malformed event");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(ev->object, "metadata");
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
    if (ev->type == SV_WATCH_GONE || ev->type == SV_WATCH_ERROR) {
        if (ev->rv) die("an error event with a resourceVersion");
    } else if (cJSON_IsString(rv) ? !ev->rv || strcmp(ev->rv, rv->valuestring) != 0 : ev->rv != NULL) {
        die("the resourceVersion is not the object's");
    }
    s->digest = mix(s->digest, &type, 1);
    s->digest = mix(s->digest, ev->line, strlen(ev->line) + 1);
    if (ev->rv) s->digest = mix(s->digest, ev->rv, strlen(ev->rv) + 1);
    s->events++;
    if (ev->type == SV_WATCH_GONE) s->gone = true;
    return ev->type != SV_WATCH_GONE;
}

/* Decode data whole (mode 0) or in pieces of sizes drawn from a generator
 * seeded by the input: 1 to 64 bytes (mode 1), mostly 1 to 16 with one in
 * four up to 4096 (mode 2).  (Every split point of a sample stream, and a
 * byte at a time, is tests/c/test_watchstream.c's: here that would cost
 * most of the run.) */
static seen decode(const uint8_t *data, size_t size, int mode) {
    sv_watchstream w;
    seen s = {1469598103934665603u, 0, false};
    uint64_t r = mix(1469598103934665603u + (uint64_t)mode, data, size) | 1;
    sv_watchstream_init(&w);
    for (size_t at = 0; at < size;) {
        size_t n = size;
        if (mode) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            n = 1 + (size_t)(r % (mode == 1 ? 64 : (r >> 32) % 4 ? 16 : 4096));
        }
        if (n > size - at) n = size - at;
        if (sv_watchstream_feed(&w, (const char *)data + at, n, on_event, &s) < 0) die("out of memory");
        if (sv_watchstream_stopped(&w) != s.gone) die("stopped other than at 410 Gone");
        at += n;
    }
    sv_watchstream_free(&w);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    seen whole = decode(data, size, 0), bytes = decode(data, size, 1), chunks = decode(data, size, 2);
    if (whole.digest != bytes.digest || whole.events != bytes.events || whole.digest != chunks.digest ||
        whole.events != chunks.events || whole.gone != bytes.gone || whole.gone != chunks.gone)
        die("the events depend on where the stream was split");
    return 0;
}
