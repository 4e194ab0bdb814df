/*
 * backoff.h — the one retry rule of the API client (backoff.c): after the
 * n-th failure in a row, wait base × 2^n, at most cap, jittered into its
 * upper half so that clients that failed together do not retry together.
 * Used by serve/http.c (a request answered 429, 5xx or not at all) and
 * serve/informer.c (a list or watch that failed).  Plain data, one owner,
 * not thread-safe.
 */
#ifndef SV_BACKOFF_H
#define SV_BACKOFF_H

#include <stdint.h>

typedef struct sv_backoff {
    unsigned base_ms, cap_ms;
    uint64_t rng; /* xorshift state: the jitter's */
} sv_backoff;

/* base_ms >= 1, cap_ms >= base_ms; seed: any value (0 is replaced). */
void sv_backoff_init(sv_backoff *b, unsigned base_ms, unsigned cap_ms, uint64_t seed);

/* The wait in milliseconds after failure number attempt (0: the first):
 * within [d/2, d] where d = min(cap, base × 2^attempt). */
unsigned sv_backoff_delay(sv_backoff *b, unsigned attempt);

#endif
