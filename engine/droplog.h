/*
 * droplog.h — where pods went when compactions dropped some, so that an
 * index of pod positions kept outside the state (the API's pod name index)
 * follows the compactions instead of being built again after each.
 *
 * A compaction drops the pods marked gone and moves every later pod down,
 * keeping their order: a pod at position p moves to p minus the number of
 * positions dropped before it.  The log keeps, for each of the last
 * US_DROPLOG_KEEP compactions, the positions it dropped (ascending, as
 * numbered before it) and the state generation it moved to.  A follower
 * that numbered positions at generation g maps them to now through the
 * compactions after g, while the log still reaches back to g; else it
 * builds again.  A generation that moves without a record (an undone
 * append, memory short while recording) clears the log: every follower
 * builds again.
 *
 * Owned by the state (us_state.drops); a zeroed log is an empty one.  Not
 * thread-safe: the state's one writer.
 */
#ifndef US_DROPLOG_H
#define US_DROPLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define US_DROPLOG_KEEP 16

typedef struct us_drops {
    uint64_t gen;   /* the generation the compaction moved to */
    int *pos;       /* positions dropped, ascending, as numbered before it */
    size_t n, cap;
} us_drops;

typedef struct us_droplog {
    us_drops seg[US_DROPLOG_KEEP];  /* a ring: the oldest at first */
    size_t first, n;
    us_drops open;                  /* the compaction recording now */
    bool failed;                    /* memory ran out recording it */
} us_droplog;

void us_droplog_free(us_droplog *l);
/* Forget every compaction: the generation moved without a record. */
void us_droplog_clear(us_droplog *l);

/* A compaction records what it drops: begin, then each dropped position in
 * ascending order, then end with the generation it moved to (dropped) or
 * without (nothing dropped: the generation stays, nothing is kept). */
void us_droplog_begin(us_droplog *l);
void us_droplog_add(us_droplog *l, size_t pos);
void us_droplog_end(us_droplog *l, bool dropped, uint64_t gen);

/* Does the log hold every compaction after generation from, up to now
 * (generation now)?  True when from is now. */
bool us_droplog_reaches(const us_droplog *l, uint64_t from, uint64_t now);

/* Position pos numbered at generation from (us_droplog_reaches), as
 * numbered now: -1 when a compaction since dropped it.  A position past
 * the array at a compaction (a pod appended later) moves down by all that
 * compaction dropped. */
long us_droplog_forward(const us_droplog *l, uint64_t from, long pos);
/* The end of a range: how many of the first pos positions at generation
 * from are still there now (none of them is -1: dropped ones are not
 * counted). */
long us_droplog_forward_end(const us_droplog *l, uint64_t from, long pos);
/* Position pos numbered now, as generation from would number it: the
 * inverse of us_droplog_forward (a pod appended since from numbers as if
 * appended then). */
long us_droplog_back(const us_droplog *l, uint64_t from, long pos);

#endif
