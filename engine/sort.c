/*
 * sort.c — sorting with a comparator context (see sort.h).
 *
 * A merge sort when a buffer the size of the array can be had (fewer
 * comparisons and friendlier to the cache: comparators here compare
 * strings), else a heapsort in place, so sorting never fails.  The merge
 * sort is adaptive: an array already in order costs n - 1 comparisons.
 */
#include "sort.h"

#include <stdbool.h>
#include <stdlib.h>
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

static void heapsort_ctx(unsigned char *b, size_t n, size_t size, us_sort_cmp cmp, void *ctx) {
    for (size_t i = n / 2; i-- > 0;) sift(b, i, n, size, cmp, ctx);
    for (size_t end = n - 1; end > 0; end--) {
        swap(b, b + end * size, size);
        sift(b, 0, end, size, cmp, ctx);
    }
}

/* Bottom-up merge sort, runs of width w merged from src into dst. */
static void mergesort_ctx(unsigned char *b, unsigned char *tmp, size_t n, size_t size,
                          us_sort_cmp cmp, void *ctx) {
    unsigned char *src = b, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            /* runs already in order are copied whole: sorted input costs
             * one comparison per run, which is what makes order hints
             * (order.h) pay */
            if (mid < hi && cmp(src + (mid - 1) * size, src + mid * size, ctx) <= 0) {
                memcpy(dst + lo * size, src + lo * size, (hi - lo) * size);
                continue;
            }
            while (i < mid && j < hi) {
                /* <= keeps equal elements in order (stable) */
                if (cmp(src + i * size, src + j * size, ctx) <= 0) memcpy(dst + k++ * size, src + i++ * size, size);
                else memcpy(dst + k++ * size, src + j++ * size, size);
            }
            memcpy(dst + k * size, src + i * size, (mid - i) * size);
            k += mid - i;
            memcpy(dst + k * size, src + j * size, (hi - j) * size);
        }
        unsigned char *t = src;
        src = dst;
        dst = t;
    }
    if (src != b) memcpy(b, src, n * size);
}

void us_sort(void *base, size_t n, size_t size, us_sort_cmp cmp, void *ctx) {
    if (n < 2) return;
    unsigned char *tmp = malloc(n * size);
    if (tmp) {
        mergesort_ctx(base, tmp, n, size, cmp, ctx);
        free(tmp);
    } else {
        heapsort_ctx(base, n, size, cmp, ctx);
    }
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

int us_natcmp(const char *a, const char *b) {
    const char *x = a, *y = b;
    while (*x && *y) {
        if (is_digit(*x) && is_digit(*y)) {
            /* compare the runs as numbers: skip leading zeros, then the
             * longer run is larger, else the first differing digit */
            while (*x == '0' && is_digit(x[1])) x++;
            while (*y == '0' && is_digit(y[1])) y++;
            size_t lx = 0, ly = 0;
            while (is_digit(x[lx])) lx++;
            while (is_digit(y[ly])) ly++;
            if (lx != ly) return lx < ly ? -1 : 1;
            int c = memcmp(x, y, lx);
            if (c) return c < 0 ? -1 : 1;
            x += lx;
            y += ly;
        } else {
            if (*x != *y) return (unsigned char)*x < (unsigned char)*y ? -1 : 1;
            x++;
            y++;
        }
    }
    if (*x || *y) return *x ? 1 : -1;
    int c = strcmp(a, b);
    return c < 0 ? -1 : c > 0;
}

static int int_order(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void us_sort_ints(int *a, size_t n) { qsort(a, n, sizeof *a, int_order); }

size_t us_ints_below(const int *a, size_t n, long key) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}
