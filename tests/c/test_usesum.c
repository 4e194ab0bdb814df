/*
 * test_usesum.c — node uses added up through per-node sums (usesum.h)
 * come out byte for byte as adding every request in turn: the cycle's
 * physical use, the AI view and the re-offer's rooms are built that way,
 * and every decision reads them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "usesum.h"

static uint64_t rng = 12345;
static uint64_t next(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng >> 17;
}

/* A request as pods make them: mostly whole GPUs or none, some fractions
 * of one device, now and then one so large that sums saturate. */
static us_res request(void) {
    us_res r = {{0}};
    uint64_t k = next() % 20;
    if (k < 10) r.v[US_GPU] = (int64_t)(next() % 9) * US_GPU_UNIT;
    else if (k < 15) r.v[US_GPU] = 1 + (int64_t)(next() % (US_GPU_UNIT - 1));
    r.v[US_CPU] = (int64_t)(next() % 64000);
    r.v[US_MEM] = k == 19 ? INT64_MAX - (int64_t)(next() % 1000) : (int64_t)(next() % (1LL << 36));
    return r;
}

/* Random additions, in a random node order, to ntargets arrays that start
 * out different (as held, end and idle do), both ways. */
static int same_as_in_turn(int nnodes, int nadds, int ntargets) {
    us_node *nodes = calloc((size_t)nnodes, sizeof *nodes);
    us_use *by_sum[US_USESUM_MAX_TARGETS], *in_turn[US_USESUM_MAX_TARGETS];
    int ok = nodes != NULL;
    for (int t = 0; t < ntargets; t++) {
        by_sum[t] = calloc((size_t)nnodes, sizeof **by_sum);
        in_turn[t] = calloc((size_t)nnodes, sizeof **in_turn);
        ok = ok && by_sum[t] && in_turn[t];
    }
    for (int k = 0; ok && k < nnodes; k++) {
        nodes[k].gpus = (int)(next() % 9);
        nodes[k].cap = (us_res){{nodes[k].gpus * US_GPU_UNIT, 128000, 1LL << 40}};
        for (int t = 0; t < ntargets; t++)
            for (int j = (int)(next() % 4); j > 0; j--)
                us_use_add(&in_turn[t][k], &nodes[k], request(), -1);
    }
    for (int t = 0; ok && t < ntargets; t++)
        memcpy(by_sum[t], in_turn[t], (size_t)nnodes * sizeof **by_sum);
    us_usesum s;
    ok = ok && us_usesum_init(&s, (size_t)nnodes, by_sum, ntargets) == 0;
    for (int i = 0; ok && i < nadds; i++) {
        int k = (int)(next() % (uint64_t)nnodes);
        us_res r = request();
        /* a fractional pod on its recorded device, or on the one picked */
        int slot = us_req_is_fractional(r) && nodes[k].gpus && next() % 2
                       ? (int)(next() % (uint64_t)nodes[k].gpus) : -1;
        int want = us_use_add(&in_turn[0][k], &nodes[k], r, slot);
        for (int t = 1; t < ntargets; t++) us_use_add(&in_turn[t][k], &nodes[k], r, slot);
        if (us_usesum_add(&s, (size_t)k, &nodes[k], r, slot) != want) ok = 0;
    }
    if (ok) {
        us_usesum_flush_all(&s);
        for (int t = 0; t < ntargets; t++)
            if (memcmp(by_sum[t], in_turn[t], (size_t)nnodes * sizeof **by_sum) != 0) ok = 0;
        /* flushed sums start from nothing: a second flush adds nothing */
        us_usesum_flush_all(&s);
        for (int t = 0; t < ntargets; t++)
            if (memcmp(by_sum[t], in_turn[t], (size_t)nnodes * sizeof **by_sum) != 0) ok = 0;
    }
    us_usesum_free(&s);
    for (int t = 0; t < ntargets; t++) {
        free(by_sum[t]);
        free(in_turn[t]);
    }
    free(nodes);
    return ok;
}

TEST(one_target_comes_out_as_every_request_added_in_turn) {
    for (int round = 0; round < 50; round++) CHECK(same_as_in_turn(1 + round * 7, 4000, 1));
}

TEST(every_target_gets_every_request_the_same_way) {
    for (int round = 0; round < 30; round++) CHECK(same_as_in_turn(1 + round * 11, 4000, 3));
}

TEST(a_node_that_is_only_shared_out_keeps_its_slots_in_order) {
    /* fractions alone, all on one node: each picks its slot from what the
     * node holds, whole pods summed in between included */
    CHECK(same_as_in_turn(1, 20000, 2));
}

TEST(targets_beyond_the_limit_are_refused) {
    us_use *t[US_USESUM_MAX_TARGETS + 1] = {0};
    us_usesum s;
    CHECK(us_usesum_init(&s, 4, t, 0) == -1);
    CHECK(us_usesum_init(&s, 4, t, US_USESUM_MAX_TARGETS + 1) == -1);
    CHECK(s.sum == NULL);  /* nothing to free */
    us_usesum_free(&s);
}

int main(void) {
    RUN(one_target_comes_out_as_every_request_added_in_turn);
    RUN(every_target_gets_every_request_the_same_way);
    RUN(a_node_that_is_only_shared_out_keeps_its_slots_in_order);
    RUN(targets_beyond_the_limit_are_refused);
    return check_report();
}
