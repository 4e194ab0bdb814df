/*
 * sort.h — sorting with a context pointer for the comparator, and
 * searching what is sorted.
 *
 * C's qsort has no context argument, which pushes comparators towards
 * file-scope variables: two engines sorting at once in two threads would
 * then race.  us_sort passes ctx through instead.  It cannot fail (without
 * memory for a merge sort it sorts in place); it is stable only when it
 * has that memory, so comparators must be total orders (every engine
 * comparator ends on a name or an index).  Thread-safe.
 */
#ifndef US_SORT_H
#define US_SORT_H

#include <stddef.h>

typedef int (*us_sort_cmp)(const void *a, const void *b, void *ctx);

void us_sort(void *base, size_t n, size_t size, us_sort_cmp cmp, void *ctx);

/* Natural order of names: runs of digits compare as numbers, so
 * "gpu-burn-2" < "gpu-burn-10"; the rest byte by byte.  Names equal as
 * numbers ("a-01", "a-1") fall back to strcmp, so the order is total. */
int us_natcmp(const char *a, const char *b);

/* The n ints at a in ascending order (pod or node indices: a list kept in
 * no order read back in index order).  Thread-safe. */
void us_sort_ints(int *a, size_t n);

/* How many of the n ascending ints at a are below key: where key is, or
 * would go (a binary search).  Thread-safe. */
size_t us_ints_below(const int *a, size_t n, long key);

#endif
