/*
 * backoff.c — jittered exponential backoff (see backoff.h).
 */
#include "backoff.h"

void sv_backoff_init(sv_backoff *b, unsigned base_ms, unsigned cap_ms, uint64_t seed) {
    b->base_ms = base_ms ? base_ms : 1;
    b->cap_ms = cap_ms < b->base_ms ? b->base_ms : cap_ms;
    b->rng = seed ? seed : 0x9e3779b97f4a7c15u;
}

static uint64_t next(sv_backoff *b) {
    uint64_t x = b->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return b->rng = x;
}

unsigned sv_backoff_delay(sv_backoff *b, unsigned attempt) {
    uint64_t d = b->base_ms;
    for (unsigned i = 0; i < attempt && d < b->cap_ms; i++) d *= 2;
    if (d > b->cap_ms) d = b->cap_ms;
    uint64_t half = d / 2;
    return (unsigned)(d - half + next(b) % (half + 1));
}
