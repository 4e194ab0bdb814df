/*
 * usesum.c — node uses added up through small per-node sums (usesum.h).
 */
#include "usesum.h"

#include <stdlib.h>
#include <string.h>

struct us_usesum_node {
    us_res used;
    int whole;
};

int us_usesum_init(us_usesum *s, size_t n, us_use *const *targets, int ntargets) {
    memset(s, 0, sizeof *s);
    if (ntargets < 1 || ntargets > US_USESUM_MAX_TARGETS) return -1;
    if (!(s->sum = calloc(n ? n : 1, sizeof *s->sum))) return -1;
    memcpy(s->target, targets, (size_t)ntargets * sizeof *targets);
    s->ntargets = ntargets;
    s->n = n;
    return 0;
}

static void flush(us_usesum *s, size_t k) {
    struct us_usesum_node *x = &s->sum[k];
    if (x->whole == 0 && !x->used.v[US_GPU] && !x->used.v[US_CPU] && !x->used.v[US_MEM]) return;
    for (int t = 0; t < s->ntargets; t++) {
        us_use *u = &s->target[t][k];
        u->used = us_res_add(u->used, x->used);
        u->whole += x->whole;
    }
    memset(x, 0, sizeof *x);
}

int us_usesum_add(us_usesum *s, size_t k, const us_node *n, us_res req, int slot) {
    if (!us_req_is_fractional(req)) {
        s->sum[k].used = us_res_add(s->sum[k].used, req);
        s->sum[k].whole += us_req_whole_gpus(req);
        return -1;
    }
    flush(s, k);
    int got = us_use_add(&s->target[0][k], n, req, slot);
    for (int t = 1; t < s->ntargets; t++) us_use_add(&s->target[t][k], n, req, slot);
    return got;
}

void us_usesum_flush_all(us_usesum *s) {
    for (size_t k = 0; k < s->n; k++) flush(s, k);
}

void us_usesum_free(us_usesum *s) {
    free(s->sum);
    memset(s, 0, sizeof *s);
}
