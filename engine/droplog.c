/*
 * droplog.c — where pods went when compactions dropped some.  See
 * droplog.h.
 */
#include "droplog.h"

#include "sort.h"

#include <stdlib.h>
#include <string.h>

void us_droplog_clear(us_droplog *l) {
    for (size_t k = 0; k < US_DROPLOG_KEEP; k++) {
        free(l->seg[k].pos);
        l->seg[k] = (us_drops){0};
    }
    l->first = l->n = 0;
}

void us_droplog_free(us_droplog *l) {
    us_droplog_clear(l);
    free(l->open.pos);
    memset(l, 0, sizeof *l);
}

void us_droplog_begin(us_droplog *l) {
    l->open.n = 0;
    l->failed = false;
}

void us_droplog_add(us_droplog *l, size_t pos) {
    us_drops *d = &l->open;
    if (l->failed) return;
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64;
        int *p = realloc(d->pos, cap * sizeof *p);
        if (!p) {
            l->failed = true;
            return;
        }
        d->pos = p;
        d->cap = cap;
    }
    d->pos[d->n++] = (int)pos;
}

void us_droplog_end(us_droplog *l, bool dropped, uint64_t gen) {
    if (!dropped) return;
    if (l->failed) {
        us_droplog_clear(l);
        return;
    }
    /* the open record joins the ring (the oldest leaves when it is full);
     * its arrays swap with the slot's, so neither is allocated again */
    size_t at = (l->first + l->n) % US_DROPLOG_KEEP;
    if (l->n == US_DROPLOG_KEEP) {
        l->first = (l->first + 1) % US_DROPLOG_KEEP;
        l->n--;
    }
    us_drops old = l->seg[at];
    l->open.gen = gen;
    l->seg[at] = l->open;
    l->open = (us_drops){.pos = old.pos, .cap = old.cap};
    l->n++;
}

/* The k-th record kept, oldest first. */
static const us_drops *seg_at(const us_droplog *l, size_t k) {
    return &l->seg[(l->first + k) % US_DROPLOG_KEEP];
}

bool us_droplog_reaches(const us_droplog *l, uint64_t from, uint64_t now) {
    if (from == now) return true;
    if (from > now || l->n == 0) return false;
    /* records have consecutive generations (a gap clears the log) */
    return seg_at(l, 0)->gen <= from + 1 && seg_at(l, l->n - 1)->gen == now;
}

/* Positions in d below pos. */
static size_t below(const us_drops *d, long pos) { return us_ints_below(d->pos, d->n, pos); }

long us_droplog_forward(const us_droplog *l, uint64_t from, long pos) {
    for (size_t k = 0; k < l->n; k++) {
        const us_drops *d = seg_at(l, k);
        if (d->gen <= from) continue;
        size_t b = below(d, pos);
        if (b < d->n && d->pos[b] == pos) return -1;
        pos -= (long)b;
    }
    return pos;
}

long us_droplog_forward_end(const us_droplog *l, uint64_t from, long pos) {
    for (size_t k = 0; k < l->n; k++) {
        const us_drops *d = seg_at(l, k);
        if (d->gen > from) pos -= (long)below(d, pos);
    }
    return pos;
}

long us_droplog_back(const us_droplog *l, uint64_t from, long pos) {
    for (size_t k = l->n; k-- > 0;) {
        const us_drops *d = seg_at(l, k);
        if (d->gen <= from) break;
        /* the position x before it with x - (dropped below x) == pos and x
         * not dropped: x = pos + j for the first j with pos[j] - j > pos
         * (pos[j] - j never falls: the positions are distinct, ascending) */
        size_t lo = 0, hi = d->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if ((long)d->pos[mid] - (long)mid <= pos) lo = mid + 1;
            else hi = mid;
        }
        pos += (long)lo;
    }
    return pos;
}
