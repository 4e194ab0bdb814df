/*
 * use.c — how full one node is (see use.h).
 */
#include "use.h"

static int shared_in_use(const us_use *u, int gpus) {
    int n = 0;
    for (int i = 0; i < gpus; i++)
        if (u->shared[i]) n++;
    return n;
}

int us_use_free_gpus(const us_use *u, const us_node *n) {
    return n->gpus - u->whole - shared_in_use(u, n->gpus);
}

/* The shared slot a fractional request would take: the fullest one with
 * room (packing fractions keeps whole devices free), else the lowest
 * unused one when a device is free; -1 when none. */
static int pick_slot(const us_use *u, const us_node *n, int64_t milli) {
    int best = -1;
    for (int i = 0; i < n->gpus; i++)
        if (u->shared[i] && u->shared[i] + milli <= US_GPU_UNIT &&
            (best < 0 || u->shared[i] > u->shared[best]))
            best = i;
    if (best >= 0) return best;
    if (us_use_free_gpus(u, n) < 1) return -1;
    for (int i = 0; i < n->gpus; i++)
        if (!u->shared[i]) return i;
    return -1;
}

bool us_use_fits(const us_use *u, const us_node *n, us_res req, int slot) {
    if (req.v[US_CPU] > n->cap.v[US_CPU] - u->used.v[US_CPU]) return false;
    if (req.v[US_MEM] > n->cap.v[US_MEM] - u->used.v[US_MEM]) return false;
    /* more than one GPU but not whole ones (a rule-breaking background
     * workload may ask so) has no arrangement on devices: it fits nowhere,
     * so no report can put such a pod on a node (found by fuzz_api) */
    if (us_req_is_fractional(req) && req.v[US_GPU] > US_GPU_UNIT) return false;
    if (us_req_is_fractional(req)) {
        int64_t m = req.v[US_GPU];
        if (slot < 0) return pick_slot(u, n, m) >= 0;
        if (slot >= n->gpus) return false;
        if (u->shared[slot]) return u->shared[slot] + m <= US_GPU_UNIT;
        return us_use_free_gpus(u, n) >= 1;
    }
    return us_req_whole_gpus(req) <= us_use_free_gpus(u, n);
}

int us_use_add(us_use *u, const us_node *n, us_res req, int slot) {
    u->used = us_res_add(u->used, req);
    if (!us_req_is_fractional(req)) {
        u->whole += us_req_whole_gpus(req);
        return -1;
    }
    if (slot < 0) slot = pick_slot(u, n, req.v[US_GPU]);
    /* an over-full node still gets counted so that later checks see it */
    if (slot < 0 || slot >= US_MAX_GPUS) slot = 0;
    u->shared[slot] = (uint16_t)(u->shared[slot] + req.v[US_GPU]);
    if (slot >= u->top) u->top = (uint8_t)(slot + 1);
    return slot;
}

void us_use_remove(us_use *u, us_res req, int slot) {
    u->used = us_res_sub(u->used, req);
    if (!us_req_is_fractional(req)) {
        u->whole -= us_req_whole_gpus(req);
        return;
    }
    if (slot >= 0 && slot < US_MAX_GPUS) u->shared[slot] = (uint16_t)(u->shared[slot] - req.v[US_GPU]);
    while (u->top > 0 && u->shared[u->top - 1] == 0) u->top--;
}

