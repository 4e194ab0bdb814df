/*
 * strmap.h — strings to ints: an open-addressing hash map over strings the
 * caller owns (names of pods, queues...), for lookups by name that a sort
 * or a scan would make n log n or quadratic on a large cluster.
 *
 * Each slot keeps part of its key's hash, so a probe compares strings only
 * when the hashes match: the keys live elsewhere in memory, and reaching
 * one is a cache miss.  16 bytes a slot, at most three quarters full: a
 * map of every pod's name at 1.2 million pods takes 32 MB.  Keys are borrowed: they must outlive the map and not
 * change.  Not thread-safe; a map is a plain value (zero it to start).
 */
#ifndef US_STRMAP_H
#define US_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct us_strmap_slot {
    const char *key;   /* NULL: empty */
    uint32_t hash;     /* its high half: the low one picks the slot */
    int value;
} us_strmap_slot;

typedef struct us_strmap {
    us_strmap_slot *slot;  /* power-of-two count, at most three quarters full */
    size_t cap, n;
    size_t ntomb;          /* slots of removed keys, reused or freed by a rebuild */
} us_strmap;

/* The engine's hash of a name (FNV-1a, mixed so that every bit counts):
 * every table of names uses it. */
uint64_t us_name_hash(const char *s);

/* Room for n keys in all without growing.  0, or -1 when memory runs out
 * (the map unchanged). */
int us_strmap_reserve(us_strmap *m, size_t n);
/* key -> value, unless key is there already: then 0 and its value stays.
 * 1 when added, -1 when memory runs out. */
int us_strmap_add(us_strmap *m, const char *key, int value);
/* key -> value whether or not key was there (then the map keeps this key
 * string, which must equal the old).  0, or -1 when memory runs out. */
int us_strmap_set(us_strmap *m, const char *key, int value);
/* key's value, or -1 when it is not there. */
int us_strmap_get(const us_strmap *m, const char *key);
/* key removed; false when it was not there. */
bool us_strmap_del(us_strmap *m, const char *key);
void us_strmap_free(us_strmap *m);

#endif
