/*
 * test_builtin.c — the built-in C policies against numbers worked out by
 * hand (KAI fair share: quota first, priority buckets, weights, demand and
 * limit caps, hierarchy; the bin-packing score; background re-offer).
 */
#include <math.h>
#include <string.h>

#include "builtin.h"
#include "check.h"

#define G(x) ((int64_t)((x) * 1000))  /* devices -> milli-devices */
#define NQ 16

/* ---- fair share fixtures ---------------------------------------------- */

static us_fs_queue qs[NQ];
static size_t nq;
static double fair[NQ * US_NRES];

static void reset(void) {
    memset(qs, 0, sizeof qs);
    nq = 0;
    for (size_t i = 0; i < NQ * US_NRES; i++) fair[i] = -1;
}

/* A queue with quota 0, no limit and weight 1 on every resource, no demand. */
static int queue(const char *name, int parent, int priority) {
    us_fs_queue *q = &qs[nq];
    q->name = name;
    q->parent = parent;
    q->priority = priority;
    for (int r = 0; r < US_NRES; r++) {
        q->res[r].quota = 0;
        q->res[r].limit = US_UNLIMITED;
        q->res[r].over_quota_weight = 1;
    }
    return (int)nq++;
}

/* gpu parameters of queue i, in devices */
static void gpu(int i, double quota, double weight, double demand) {
    qs[i].res[US_GPU].quota = quota < 0 ? US_UNLIMITED : G(quota);
    qs[i].res[US_GPU].over_quota_weight = weight;
    qs[i].demand.v[US_GPU] = G(demand);
}

static int run_fs(double cap_gpus, int64_t cap_cpu, int64_t cap_mem) {
    us_fs_input in = {"default", {{G(cap_gpus), cap_cpu, cap_mem}}, qs, nq};
    us_err err = {0};
    int rc = us_builtin_fairshare(&in, fair, &err);
    if (rc != 0) fprintf(stderr, "  fairshare: %s\n", err.msg);
    return rc;
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) + 1); }

#define FAIR_GPU(i, devices) CHECK(near(fair[(i) * US_NRES + US_GPU], (devices) * 1000.0))

TEST(fs_quota_then_weight) {
    /* 10 GPUs: quotas 4 + 2 + 0 leave 4, split 1:1:2 = 1, 1, 2; B's 1 is
     * exactly what its demand leaves room for. */
    reset();
    int a = queue("a", -1, 0), b = queue("b", -1, 0), c = queue("c", -1, 0);
    gpu(a, 4, 1, 8);
    gpu(b, 2, 1, 3);
    gpu(c, 0, 2, 10);
    CHECK(run_fs(10, 0, 0) == 0);
    FAIR_GPU(a, 5);
    FAIR_GPU(b, 3);
    FAIR_GPU(c, 2);
}

TEST(fs_waterfill_redistributes) {
    /* 12 GPUs, no quota, weights 1:1:2 -> 3, 3, 6; a wants only 1, so 2
     * go round again to b and c 1:2: offers of 2/3 and 4/3 give whole GPUs
     * only, 0 and 1; the GPU left goes to the larger part not given, b's
     * 2/3 -> a 1, b 4, c 7 (whole GPUs, as KAI hands them out). */
    reset();
    int a = queue("a", -1, 0), b = queue("b", -1, 0), c = queue("c", -1, 0);
    gpu(a, 0, 1, 1);
    gpu(b, 0, 1, 20);
    gpu(c, 0, 2, 20);
    CHECK(run_fs(12, 0, 0) == 0);
    FAIR_GPU(a, 1);
    FAIR_GPU(b, 4);
    FAIR_GPU(c, 7);
}

TEST(fs_priority_buckets) {
    /* 10 GPUs: quotas 2 + 1 + 1 leave 6.  Priority 1 first: h takes 4 more
     * (its demand is 6).  The 2 left go to priority 0 by weight 1:3, offers
     * of 0.5 and 1.5: l2 takes 1, and the GPU left goes to the larger part
     * not given (0.5 each: the queue created first, then by name, l1). */
    reset();
    int h = queue("h", -1, 1), l1 = queue("l1", -1, 0), l2 = queue("l2", -1, 0);
    gpu(h, 2, 1, 6);
    gpu(l1, 1, 1, 10);
    gpu(l2, 1, 3, 10);
    CHECK(run_fs(10, 0, 0) == 0);
    FAIR_GPU(h, 6);
    FAIR_GPU(l1, 2);
    FAIR_GPU(l2, 2);

    /* a higher priority takes everything it can, whatever the weights */
    reset();
    int hi = queue("hi", -1, 5), lo = queue("lo", -1, 0);
    gpu(hi, 0, 1, 100);
    gpu(lo, 0, 50, 100);
    CHECK(run_fs(10, 0, 0) == 0);
    FAIR_GPU(hi, 10);
    FAIR_GPU(lo, 0);
}

TEST(fs_limits) {
    /* a is capped at 3 by its limit; b takes the rest up to its demand.
     * c's quota 5 is above its limit 2: it gets 2, not 5. */
    reset();
    int a = queue("a", -1, 0), b = queue("b", -1, 0), c = queue("c", -1, 0);
    gpu(a, 0, 1, 10);
    qs[a].res[US_GPU].limit = G(3);
    gpu(b, 0, 1, 10);
    gpu(c, 5, 0, 10);
    qs[c].res[US_GPU].limit = G(2);
    CHECK(run_fs(12, 0, 0) == 0);
    FAIR_GPU(a, 3);
    FAIR_GPU(b, 7);
    FAIR_GPU(c, 2);
}

TEST(fs_zero_weights) {
    /* weight 0 everywhere: quotas only, the rest stays unassigned */
    reset();
    int a = queue("a", -1, 0), b = queue("b", -1, 0);
    gpu(a, 2, 0, 10);
    gpu(b, 1, 0, 10);
    CHECK(run_fs(10, 0, 0) == 0);
    FAIR_GPU(a, 2);
    FAIR_GPU(b, 1);

    /* a weight-0 queue next to a weighted one gets nothing beyond quota;
     * a bucket of weight 0 passes its leftovers to the lower priority */
    reset();
    int z = queue("z", -1, 3), w = queue("w", -1, 0), y = queue("y", -1, 0);
    gpu(z, 0, 0, 10);
    gpu(w, 0, 1, 4);
    gpu(y, 0, 0, 10);
    CHECK(run_fs(10, 0, 0) == 0);
    FAIR_GPU(z, 0);
    FAIR_GPU(w, 4);
    FAIR_GPU(y, 0);
}

TEST(fs_oversubscribed_quota) {
    /* quotas 6 + 3 do not fit in 6: each still gets its quota, as in KAI
     * (a quota is never scaled down), and nothing is left to share */
    reset();
    int a = queue("a", -1, 0), b = queue("b", -1, 0), c = queue("c", -1, 0);
    gpu(a, 6, 1, 6);
    gpu(b, 3, 1, 3);
    gpu(c, 0, 1, 5);
    CHECK(run_fs(6, 0, 0) == 0);
    FAIR_GPU(a, 6);
    FAIR_GPU(b, 3);
    FAIR_GPU(c, 0);
}

TEST(fs_whole_units_left_over) {
    /* 10 GPUs, three queues of weight 1 asking 10: 3 each, and the GPU
     * left goes to the queue created first (c), whatever the names */
    reset();
    int a = queue("a", -1, 0), b = queue("b", -1, 0), c = queue("c", -1, 0);
    gpu(a, 0, 1, 10);
    gpu(b, 0, 1, 10);
    gpu(c, 0, 1, 10);
    qs[c].created_at = -5;
    CHECK(run_fs(10, 0, 0) == 0);
    FAIR_GPU(a, 3);
    FAIR_GPU(b, 3);
    FAIR_GPU(c, 4);

    /* a unit left over never takes a queue past its demand: 2.6 GPUs for
     * two queues asking 1.5 -> 1 each, then a gets 0.5 (to 1.5), b 0.1 */
    reset();
    a = queue("a", -1, 0);
    b = queue("b", -1, 0);
    gpu(a, 0, 1, 1.5);
    gpu(b, 0, 1, 1.5);
    CHECK(run_fs(2.6, 0, 0) == 0);
    FAIR_GPU(a, 1.5);
    FAIR_GPU(b, 1.1);
}

/* A small deterministic generator, so a failure names its round. */
static unsigned seed_state = 12345;
static unsigned rnd(unsigned n) {
    seed_state = seed_state * 1103515245u + 12345u;
    return (seed_state >> 8) % n;
}

TEST(fs_whole_and_work_conserving) {
    /* The class: with whole-GPU capacity, quotas and demands, every share
     * is a whole number of GPUs, no queue gets less than its quota (capped
     * by its demand) nor more than its demand, and nothing is left over
     * while a queue of positive weight still asks: the group shares out
     * max(sum of quotas, min(capacity, sum of demands)). */
    for (int round = 0; round < 500; round++) {
        reset();
        size_t n = 2 + rnd(6);
        double cap = rnd(40), owed = 0, asked = 0;
        static const char *const names[] = {"q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7"};
        for (size_t i = 0; i < n; i++) {
            int x = queue(names[i], -1, (int)rnd(3));
            double quota = rnd(5) == 0 ? -1.0 : (double)rnd(9), demand = rnd(13);
            gpu(x, quota, 1 + rnd(3), demand);
            qs[x].created_at = rnd(3);
            owed += quota < 0 ? fmin(demand, cap) : fmin(quota, demand);
            asked += demand;
        }
        CHECK(run_fs(cap, 0, 0) == 0);
        double total = 0;
        for (size_t i = 0; i < n; i++) {
            double share = fair[i * US_NRES + US_GPU] / 1000.0, demand = qs[i].demand.v[US_GPU] / 1000.0;
            double quota = qs[i].res[US_GPU].quota == US_UNLIMITED ? fmin(demand, cap)
                                                                   : qs[i].res[US_GPU].quota / 1000.0;
            if (share != floor(share) || share < fmin(quota, demand) || share > demand) {
                fprintf(stderr, "  round %d: queue %zu gets %g (quota %g, demand %g)\n", round, i, share,
                        quota, demand);
                CHECK(false);
            }
            total += share;
        }
        double want = fmax(owed, fmin(cap, asked));
        if (total != want) {
            fprintf(stderr, "  round %d: %g shared out, %g expected\n", round, total, want);
            CHECK(false);
        }
    }
}

TEST(fs_unlimited_quota_and_no_demand) {
    /* unlimited quota: its demand first; a queue asking nothing gets 0 */
    reset();
    int a = queue("a", -1, 0), b = queue("b", -1, 0), c = queue("c", -1, 0);
    gpu(a, -1, 0, 5);
    gpu(b, 0, 1, 10);
    gpu(c, 4, 1, 0);
    CHECK(run_fs(10, 0, 0) == 0);
    FAIR_GPU(a, 5);
    FAIR_GPU(b, 5);
    FAIR_GPU(c, 0);
}

TEST(fs_hierarchy) {
    /* 16 GPUs between r1 (quota 8, demand 12) and r2 (quota 4, demand 20):
     * 8 + 4, the 4 left 1:1 -> r1 10, r2 6.  r1's 10 between x (quota 4,
     * weight 2, demand 10) and y (quota 2, demand 2): 4 + 2, the 4 left all
     * to x (y is satisfied) -> x 8, y 2.  z under x takes all of x's 8
     * up to its demand 7; z2 under x has weight 0 and no quota. */
    reset();
    int r1 = queue("r1", -1, 0), r2 = queue("r2", -1, 0);
    int y = queue("y", r1, 0), x = queue("x", r1, 0);
    int z = queue("z", x, 0), z2 = queue("z2", x, 0);
    gpu(r1, 8, 1, 12);
    gpu(r2, 4, 1, 20);
    gpu(x, 4, 2, 10);
    gpu(y, 2, 1, 2);
    gpu(z, 0, 1, 7);
    gpu(z2, 0, 0, 3);
    CHECK(run_fs(16, 0, 0) == 0);
    FAIR_GPU(r1, 10);
    FAIR_GPU(r2, 6);
    FAIR_GPU(x, 8);
    FAIR_GPU(y, 2);
    FAIR_GPU(z, 7);
    FAIR_GPU(z2, 0);
}

TEST(fs_resources_independent) {
    /* cpu: a quota 8 cores (demand 16), b no quota (demand 100): 56 cores
     * left, 28 each; a is capped at 8 more, b takes the other 20 as well.
     * memory: a unlimited quota (demand 100 GiB) first, b the rest. */
    reset();
    int a = queue("a", -1, 0), b = queue("b", -1, 0);
    qs[a].res[US_CPU].quota = 8000;
    qs[a].demand.v[US_CPU] = 16000;
    qs[b].demand.v[US_CPU] = 100000;
    qs[a].res[US_MEM].quota = US_UNLIMITED;
    qs[a].demand.v[US_MEM] = (int64_t)100 << 30;
    qs[b].demand.v[US_MEM] = (int64_t)1 << 40;
    gpu(a, 0, 1, 4);
    CHECK(run_fs(2, 64000, (int64_t)512 << 30) == 0);
    CHECK(near(fair[a * US_NRES + US_CPU], 16000));
    CHECK(near(fair[b * US_NRES + US_CPU], 48000));
    CHECK(near(fair[a * US_NRES + US_MEM], (double)((int64_t)100 << 30)));
    CHECK(near(fair[b * US_NRES + US_MEM], (double)((int64_t)412 << 30)));
    FAIR_GPU(a, 2);
    FAIR_GPU(b, 0);
}

TEST(fs_bad_input) {
    us_err err = {0};
    reset();
    queue("a", 5, 0);
    us_fs_input in = {"default", {{0, 0, 0}}, qs, nq};
    CHECK(us_builtin_fairshare(&in, fair, &err) == -1);
    CHECK(err.code == US_EINVAL);
    CHECK_HAS(err.msg, "\"a\"");

    in.nqueues = 0;
    CHECK(us_builtin_fairshare(&in, fair, &err) == 0);
}

/* ---- score ------------------------------------------------------------- */

static us_node mknode(char *name, int gpus, int64_t cpu, int64_t mem) {
    us_node n;
    memset(&n, 0, sizeof n);
    n.name = name;
    n.pool = "default";
    n.gpus = gpus;
    n.cap.v[US_GPU] = (int64_t)gpus * US_GPU_UNIT;
    n.cap.v[US_CPU] = cpu;
    n.cap.v[US_MEM] = mem;
    return n;
}

static us_workload mkwl(char *name, int64_t gpu_milli, int64_t cpu, int64_t mem) {
    us_workload w;
    memset(&w, 0, sizeof w);
    w.name = name;
    w.request.v[US_GPU] = gpu_milli;
    w.request.v[US_CPU] = cpu;
    w.request.v[US_MEM] = mem;
    return w;
}

static us_pod mkpod(char *name) {
    us_pod p;
    memset(&p, 0, sizeof p);
    p.name = name;
    p.node = -1;
    p.pin = -1;
    p.shared_dev = -1;
    return p;
}

TEST(score_bin_packing) {
    us_node n8 = mknode("n8", 8, 64000, 0), cpu = mknode("cpu", 0, 32000, 0);
    us_workload w = mkwl("w", 1000, 8000, 0);
    us_pod pod = mkpod("w-0");
    us_pod_view pv = {&pod, &w, "q"};

    /* (2 + 1) / 8 GPUs and (16 + 8) / 64 cores: 1000 * 0.375 + 0.375 */
    us_node_view a = {&n8, {{2000, 16000, 0}}, 6, NULL};
    CHECK(us_builtin_score(&pv, &a) == 375.375);
    /* an emptier node of the same size scores lower */
    us_node_view b = {&n8, {{0, 0, 0}}, 8, NULL};
    CHECK(us_builtin_score(&pv, &b) == 125.125);
    /* no GPUs: only the CPU fraction counts */
    us_workload wc = mkwl("wc", 0, 8000, 0);
    us_pod_view pc = {&pod, &wc, "q"};
    us_node_view c = {&cpu, {{0, 8000, 0}}, 0, NULL};
    CHECK(us_builtin_score(&pc, &c) == 0.5);
    /* a fractional GPU counts as a fraction of a device */
    us_workload wf = mkwl("wf", 500, 0, 0);
    us_pod_view pf = {&pod, &wf, "q"};
    CHECK(us_builtin_score(&pf, &b) == 1000 * (0.5 / 8));
}

/* The re-offer's two other rooms, as the engine derives them: once the AI
 * plan ends (here: no transition, the same as free) and idle (free less
 * every offered running pod on the node, kept or not). */
static void bg_rooms(us_bg_node *nodes, size_t n, const us_bg_pod *running, size_t nr) {
    for (size_t k = 0; k < n; k++) {
        nodes[k].free_at_end = nodes[k].free;
        nodes[k].free_gpus_at_end = nodes[k].free_gpus;
        nodes[k].idle = nodes[k].free;
        nodes[k].idle_gpus = nodes[k].free_gpus;
    }
    for (size_t i = 0; i < nr; i++) {
        us_bg_node *bn = &nodes[running[i].node];
        bn->idle = us_res_sub(bn->idle, running[i].wl->request);
        bn->idle_gpus -= (int)((running[i].wl->request.v[US_GPU] + US_GPU_UNIT - 1) / US_GPU_UNIT);
    }
}

/* ---- background re-offer ---------------------------------------------- */

TEST(reoffer_keep_then_place) {
    us_node n1 = mknode("n1", 8, 64000, (int64_t)64 << 30);
    us_node n2 = mknode("n2", 8, 64000, (int64_t)64 << 30);
    us_node n3 = mknode("n3", 8, 64000, (int64_t)64 << 30);
    /* n1: 2 GPUs idle; n2: 6 idle; n3: all idle but not a candidate of p2 */
    us_bg_node nodes[3] = {{.node = &n1, .free = {{2000, 8000, (int64_t)8 << 30}}, .free_gpus = 2},
                           {.node = &n2, .free = {{6000, 32000, (int64_t)32 << 30}}, .free_gpus = 6},
                           {.node = &n3, .free = {{8000, 64000, (int64_t)64 << 30}}, .free_gpus = 8}};
    us_workload g1 = mkwl("g1", 1000, 100, 1 << 20), g2 = mkwl("g2", 2000, 100, 1 << 20);
    us_workload big = mkwl("big", 16000, 100, 0), c = mkwl("c", 0, 9000, 0);
    us_pod ra = mkpod("ra"), rb = mkpod("rb"), rc = mkpod("rc");
    us_pod p1 = mkpod("p1"), p2 = mkpod("p2"), p3 = mkpod("p3"), p4 = mkpod("p4");
    int all[] = {0, 1, 2}, first2[] = {0, 1};
    /* ra (1 GPU on n1) fits: n1 has 1 left; rb (2 GPUs on n1) no longer
     * does; rc (9 cores on n1) does not either (8 idle). */
    us_bg_pod running[3] = {{&ra, &g1, 0, NULL, 0}, {&rb, &g2, 0, NULL, 0}, {&rc, &c, 0, NULL, 0}};
    /* Pending pods take idle room only: n1's is held by ra, rb and rc
     * (kept or evicted, they hold it now).  p1 (1 GPU): n2 is fullest
     * (2/8 used -> 3/8).  p2 (1 GPU, n1 or n2): n2.  p3 (16 GPUs):
     * nowhere.  p4 (2 GPUs, any node): n2 (4 used -> 6/8) beats n3. */
    us_bg_pod pending[4] = {{&p1, &g1, -1, all, 3}, {&p2, &g1, -1, first2, 2},
                            {&p3, &big, -1, all, 3}, {&p4, &g2, -1, all, 3}};
    bg_rooms(nodes, 3, running, 3);
    us_bg_input in = {nodes, 3, running, 3, pending, 4};
    bool keep[3];
    int place[4];
    us_err err = {0};
    CHECK(us_builtin_reoffer(&in, keep, place, &err) == 0);
    CHECK(keep[0] && !keep[1] && !keep[2]);
    CHECK(place[0] == 1);
    CHECK(place[1] == 1);
    CHECK(place[2] == -1);
    CHECK(place[3] == 1);

    /* Keeping is judged against the AI end state, placing against idle
     * room: with 3 GPUs free once the plan ends, rb stays too; p1 still
     * may not take n1's room, which the running pods hold now. */
    nodes[0].free_at_end.v[US_GPU] = 3000;
    nodes[0].free_gpus_at_end = 3;
    nodes[0].free_at_end.v[US_CPU] = 9200;
    CHECK(us_builtin_reoffer(&in, keep, place, &err) == 0);
    CHECK(keep[0] && keep[1] && keep[2]);
    CHECK(place[0] == 1);
}

TEST(reoffer_ties_and_bad_input) {
    us_node a = mknode("a", 4, 16000, 1 << 30), b = mknode("b", 4, 16000, 1 << 30);
    us_bg_node nodes[2] = {{.node = &a, .free = {{4000, 16000, 1 << 30}}, .free_gpus = 4},
                           {.node = &b, .free = {{4000, 16000, 1 << 30}}, .free_gpus = 4}};
    bg_rooms(nodes, 2, NULL, 0);
    us_workload w = mkwl("w", 1000, 1000, 0);
    us_pod p = mkpod("p"), q = mkpod("q");
    int both[] = {0, 1}, bad[] = {0, 7};
    us_bg_pod pending[2] = {{&p, &w, -1, both, 2}, {&q, &w, -1, both, 2}};
    us_bg_input in = {nodes, 2, NULL, 0, pending, 2};
    int place[2];
    us_err err = {0};
    /* identical nodes: the lower index; then the pod follows the first */
    CHECK(us_builtin_reoffer(&in, NULL, place, &err) == 0);
    CHECK(place[0] == 0 && place[1] == 0);

    pending[1].candidates = bad;
    CHECK(us_builtin_reoffer(&in, NULL, place, &err) == -1);
    CHECK(err.code == US_EINVAL);
    CHECK_HAS(err.msg, "\"q\"");
}

int main(void) {
    RUN(fs_quota_then_weight);
    RUN(fs_waterfill_redistributes);
    RUN(fs_priority_buckets);
    RUN(fs_limits);
    RUN(fs_zero_weights);
    RUN(fs_oversubscribed_quota);
    RUN(fs_whole_units_left_over);
    RUN(fs_whole_and_work_conserving);
    RUN(fs_unlimited_quota_and_no_demand);
    RUN(fs_hierarchy);
    RUN(fs_resources_independent);
    RUN(fs_bad_input);
    RUN(score_bin_packing);
    RUN(reoffer_keep_then_place);
    RUN(reoffer_ties_and_bad_input);
    return check_report();
}
