/*
 * hashidx.h — ids by hash: an open-addressing table from a 64-bit hash to
 * the ids (ints >= 0) of keys that live elsewhere, with the caller's
 * equality, and the hashes of the engine's keys (labels, taints,
 * tolerations, plain bytes).  It replaces the "is this shape one I have
 * seen?" scan of a list, which is quadratic once the shapes are many:
 * pod classes, the failed victim searches of a cycle, the re-offer's
 * candidate lists.
 *
 * Each slot keeps its key's whole hash, so equality runs only when the
 * hashes match.  Emptying the table (us_hashidx_clear) is constant time:
 * slots carry the table's epoch, and a slot of an older epoch is empty.
 * Not thread-safe; a table is a plain value (zero it to start).
 */
#ifndef US_HASHIDX_H
#define US_HASHIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"
#include "taints.h"

typedef struct us_hashidx_slot {
    uint64_t hash;
    uint32_t epoch;  /* the table's epoch when written; any other: empty */
    int id;
} us_hashidx_slot;

typedef struct us_hashidx {
    us_hashidx_slot *slot;  /* power-of-two count, at most half full */
    size_t cap, n;
    uint32_t epoch;         /* 0 in a zeroed table: slots start empty at 1 */
} us_hashidx;

/* Is the key of id the key looked for? */
typedef bool (*us_hashidx_eq)(int id, const void *key, void *ctx);

/* The id of a key equal to key (eq) among those added with hash, or -1. */
int us_hashidx_find(const us_hashidx *t, uint64_t hash, us_hashidx_eq eq, const void *key, void *ctx);
/* id added under hash (the caller knows no equal key is there).  0, or -1
 * when memory runs out (the table unchanged). */
int us_hashidx_add(us_hashidx *t, uint64_t hash, int id);
/* Every id gone, in constant time; the memory stays for reuse. */
void us_hashidx_clear(us_hashidx *t);
void us_hashidx_free(us_hashidx *t);

/* Hashes, chained: start from US_HASH_SEED, mix the parts of a key, and
 * finish.  Equal keys hash the same; the parts are mixed in order. */
#define US_HASH_SEED 0xcbf29ce484222325ULL
uint64_t us_hash_bytes(uint64_t h, const void *data, size_t n);
/* Plain data a word at a time (padding must be zeroed, or not hashed). */
uint64_t us_hash_words(uint64_t h, const void *data, size_t n);
uint64_t us_hash_str(uint64_t h, const char *s);
uint64_t us_hash_labels(uint64_t h, const us_labels *l);
uint64_t us_hash_taints(uint64_t h, const us_taints *t);
uint64_t us_hash_tolerations(uint64_t h, const us_tolerations *t);
/* Every bit of h reaches the low ones (a table's slot is the low bits). */
uint64_t us_hash_finish(uint64_t h);

#endif
