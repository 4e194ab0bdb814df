/*
 * sort.c — heapsort with a comparator context (see sort.h): O(n log n),
 * in place, no allocation.
 */
#include "sort.h"

#include <string.h>

static void swap(unsigned char *a, unsigned char *b, size_t size) {
    while (size--) {
        unsigned char t = *a;
        *a++ = *b;
        *b++ = t;
    }
}

/* Restore the max-heap below root, over the first n elements. */
static void sift(unsigned char *base, size_t root, size_t n, size_t size, us_sort_cmp cmp, void *ctx) {
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && cmp(base + child * size, base + (child + 1) * size, ctx) < 0) child++;
        if (cmp(base + root * size, base + child * size, ctx) >= 0) return;
        swap(base + root * size, base + child * size, size);
        root = child;
    }
}

void us_sort(void *base, size_t n, size_t size, us_sort_cmp cmp, void *ctx) {
    unsigned char *b = base;
    if (n < 2) return;
    for (size_t i = n / 2; i-- > 0;) sift(b, i, n, size, cmp, ctx);
    for (size_t end = n - 1; end > 0; end--) {
        swap(b, b + end * size, size);
        sift(b, 0, end, size, cmp, ctx);
    }
}
