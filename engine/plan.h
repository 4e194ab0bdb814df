/*
 * plan.h — the working plan of one cycle on one node pool: how full every
 * node is in the AI planning view (background pods invisible, releasing pods
 * already gone), which pods the cycle has placed or evicted so far, and each
 * queue's allocation.  Every tentative change goes through an undo log, so
 * an all-or-nothing gang or a victim search can be rolled back exactly.
 *
 * The plan never changes us_state; commit.c turns a finished plan into
 * state changes and decisions.  Owned by cycle.c for the length of a cycle.
 */
#ifndef US_PLAN_H
#define US_PLAN_H

#include "cycle.h"
#include "events.h"
#include "hashidx.h"
#include "policy.h"
#include "podview.h"
#include "poolpods.h"
#include "state.h"
#include "use.h"


enum {
    US_PF_NEW = 1,       /* placed by this cycle */
    US_PF_VICTIM = 2,    /* evicted by this cycle (reclaim/preempt) */
    US_PF_HELD = 4       /* counted in the AI view at snapshot (running/pipelined AI) */
};

/* What holds room on a node at snapshot, for the tie-break (us_plan.node_kind). */
enum {
    US_NODE_HOLDS_AI = 1,  /* a pod that is not background runs or is pipelined
                              there, or one nothing may move (us_plan_holds_fixed) */
    US_NODE_RUNS_BG = 2    /* a background pod runs there */
};

/* The time budget of one cycle (us_cycle_opts.cycle_budget), shared by
 * the plans of its pools. */
typedef struct us_cycle_budget {
    double seconds;      /* 0: none */
    double deadline;     /* us_cycle_clock() time it runs out */
    bool spent;          /* said so: no policy is asked again this cycle */
} us_cycle_budget;

typedef struct us_undo {
    int pod;
    int flag;            /* US_PF_NEW or US_PF_VICTIM */
} us_undo;

typedef struct us_plan {
    us_state *st;
    const char *pool;
    double now;
    us_policy *pol;
    const us_cycle_opts *opts;
    us_cycle_log *log;

    int *nodes;          /* pool nodes present, sorted by name */
    size_t nnodes;
    int *pos;            /* [st->nnodes] node index -> position in nodes, or -1 */
    us_use *ai;          /* [nnodes] the AI planning view */
    size_t nai;          /* uses in ai (and bg_total), st->nnodes at snapshot */
    /* [nai] or NULL (no hints): per position, the ledger's stamp of what ai
     * and bg_total hold there as copied from it, 0 once the plan changed it
     * or when not copied (us_ledger_views); handed to the pool's next plan
     * with ai, for the nodes list of state node version ai_nodes_version */
    uint64_t *ai_held;
    uint64_t ai_nodes_version;
    struct us_nodelabels *labels;  /* [nnodes] the labels that matter (nodelabels.h) */

    /* per pod [npods at snapshot] */
    size_t npods;
    uint8_t *flags;
    int *pnode;          /* planned node for US_PF_NEW pods */
    int *pslot;
    uint8_t *pact;       /* us_action that placed or evicted it */
    int *evictor;        /* victims: the workload that needed the room */
    int *placed;         /* US_PF_NEW pods in placement order */
    size_t nplaced;

    /* What the snapshot read from the pods (podview.h): kept in the pool's
     * hints across cycles, or the plan's own (own_view) without a cache.
     * Per node position, the pods holding room on it at snapshot (any
     * kind, any holding state), in pod order: us_plan_node_pods.  Per
     * workload, its pending pods: us_gang_pending.  Read only. */
    struct us_podview *view, *own_view;
    /* read by the re-offer (reoffer.c), from the same record (lists of
     * the view): pending placeable pods of the background work it offers
     * (wl_bg) and its running pods on the pool's nodes, in pod order; what
     * they take on each node (bg_total); and pods terminating on the
     * pool's nodes (any kind), in pod order */
    const int *bg_pending;
    size_t nbg_pending;
    const int *bg_running;
    size_t nbg_running;
    us_bg_total *bg_total;  /* [nnodes] (use.h) */
    const int *terminating;
    size_t nterminating;
    /* read by the tie-break (ties.c), from the same record: what holds room
     * on each node at snapshot (its pods) */
    const uint8_t *node_kind;  /* [nnodes] US_NODE_HOLDS_AI, US_NODE_RUNS_BG */

    /* per workload [st->nworkloads] */
    int *held;           /* AI pods running/pipelined/new and not victims */
    bool *wl_ai;         /* the workload is an AI job of this pool (us_gang_is_job) */
    bool *wl_bg;         /* the workload is background work of this pool the
                            re-offer offers: active and breaking no rule (a
                            blocked one's running pods hold their room in
                            the AI view, us_plan_holds_fixed) */
    int *wl_terminating; /* its pods still terminating: releasing at snapshot, or
                            victims of this plan that will be (grace > 0) */
    int *wl_placed;      /* [nworkloads] how many of its pending pods the plan
                            placed: always the first (us_plan_place, us_gang_pending) */

    /* per queue [st->nqueues]; parents include their children */
    us_res *alloc;       /* AI allocation */
    us_res *alloc_np;    /* of which non-preemptible */
    us_res *demand;
    double *fair;        /* [nqueues * US_NRES] */

    us_undo *undo;
    size_t nundo, cap_undo;

    /* victims.c: jobs whose victim search failed since the plan last
     * changed for good; a job just like one of them fails the same way */
    /* queueserve.c, while it serves jobs: the queues whose allocation
     * changed since the round began (NULL otherwise) */
    bool *qtouched;        /* [nqueues] */
    int *qtouch;           /* the same, listed */
    size_t nqtouch;
    int *failed_jobs;      /* [2 * nfailed]: job, pods needed */
    size_t nfailed, cap_failed;
    us_hashidx failed;     /* their indices, by hash (hashidx.h) */
    /* victims.c: AI pods that may ever be victims, by queue, each queue's
     * in the order they give (built on the first search): [nqueues + 1]
     * offsets into victim_pods; and a search's scratch, sized by them */
    int *victim_first;
    int *victim_pods;
    int *victim_wl_first;  /* [nworkloads + 1] offsets into victim_wl_pods */
    int *victim_wl_pods;   /* the same pods by workload, in pod order */
    int *victim_cands, *victim_units, *victim_queues;
    int *victim_skip;    /* [nqueues] leading entries known to be victims */
    int *victim_low;     /* [nqueues] lowest priority of its preemptible AI workloads
                            holding pods (victims.c, queue_summary); INT_MAX: none */
    bool *victim_sorted; /* [nqueues] its entries are grouped in priority bands */
    int *victim_band;    /* an entry's band's end (victims.c, group_queue) */
    bool *victim_done;   /* the entry's band is in the order it gives */
    bool *victim_drop;
    struct us_classes *classes;  /* node and pod classes (nodeclass.h), built on first use */
    bool oom;                 /* memory ran out keeping the classes current */
    us_policy *score_pol;     /* placement version in use this cycle (NULL: built-in);
                                 moves to the previous version when one fails */
    us_cycle_budget *budget;  /* the cycle's time budget; NULL: none */
    struct us_pool_hints *hints;  /* orders the last cycle left (cyclecache.h); NULL: none */
    const char *broken;       /* checking builds: the invariant the snapshot found broken */

    /* placement.c's scratch, grown as needed and reused pod after pod: the
     * candidate classes, their members, scores, the ones not cached yet */
    struct us_place_scratch {
        int *cls, *rep, *need, *need_rep;
        double *score, *fresh;
        struct us_node_view *views;
        size_t cap;
    } scratch;
} us_plan;

/* Snapshot pool at time now: its nodes in name order and the pods on
 * each, and virtual eviction in the same pass over the pods: the AI view
 * and queue figures built from AI pods only.  What the pods say is kept
 * across cycles with the pool's hints and followed through the pods changed
 * (podview.h); when it is read afresh, the pass reads the pods of set
 * (poolpods.h: the pool's workloads' and those on its nodes), or every
 * pod when set is NULL; any other pod says nothing about the pool.  0; -1
 * (out of memory, p freed); -2 in checking builds when the node list kept
 * from the last cycle is not the list, or set leaves out a pod of the pool
 * (p freed, p->broken says which invariant). */
int us_plan_snapshot(us_plan *p, us_state *st, const char *pool, double now, us_policy *pol,
                     const us_cycle_opts *o, us_cycle_log *log, const us_pod_set *set);
void us_plan_free(us_plan *p);

/* Is the pod an AI pod of an active, schedulable workload in this pool? */
bool us_plan_is_ai(const us_plan *p, int pod);
/* Does the pod hold room in the AI view that nothing may move or evict?
 * Running and pipelined pods of an external workload (another scheduler
 * placed them) and of an active workload that breaks a rule (never
 * scheduled, AI or background alike), on a node of the pool.  Placement
 * plans around them, the tie-break never swaps their node's bundle, and
 * the re-offer never offers them. */
bool us_plan_holds_fixed(const us_plan *p, int pod);
/* Node the pod occupies in the AI view (its own node or planned node), or -1. */
int us_plan_node_of(const us_plan *p, int pod);
/* The pods holding room on the node at position pos at snapshot (running,
 * pipelined, terminating; any kind), in pod order: *n of them. */
static inline const int *us_plan_node_pods(const us_plan *p, size_t pos, size_t *n) {
    return us_pv_list_of(p->view, us_pv_node_list(pos), n);
}

/* The ledger's stamp of the views node position pos holds (ai and
 * bg_total as copied from the ledger, ai_held), or 0 when not known: no
 * hints, not copied from the ledger, patched with journal entries since
 * its sync, or changed by the plan.  A node with the same nonzero stamp in
 * a later plan of the pool has the same views at its snapshot (ledger.h). */
static inline uint64_t us_plan_view_stamp(const us_plan *p, size_t pos) {
    return p->ai_held ? p->ai_held[pos] : 0;
}

/* Tentative changes; both 0 or -1 (out of memory).  A pod placed is the
 * first of its job's pending pods not placed yet (us_gang_pending). */
int us_plan_place(us_plan *p, int pod, int node, us_action act);
int us_plan_evict(us_plan *p, int pod, us_action act, int evictor);
size_t us_plan_mark(const us_plan *p);
void us_plan_rollback(us_plan *p, size_t mark);

/* Would a queue (and every ancestor) stay within its limit, and for a
 * non-preemptible workload within its quota, after adding req?  US_WHY_NONE
 * when it would; else why not, and *blocker (if non-NULL) the queue. */
us_why us_plan_queue_admits(const us_plan *p, int q, us_res req, bool nonpreemptible, int *blocker);

/* Version pol of a policy failed (reason "PolicyFailed": an error or a
 * budget) or its result was rejected ("PolicyRejected": it broke an
 * invariant); the cycle goes on with pol's previous version, or the
 * built-in policy when there is none.  Emits a Warning event on the policy
 * file naming the version and what the cycle uses instead. */
int us_plan_policy_event(us_plan *p, us_policy *pol, const char *reason, const char *file,
                         const char *what);

/* May version pol be asked now?  1: yes, and none of its calls runs past
 * the cycle's deadline; 0: the cycle's time budget is spent, so the rest of
 * the cycle uses the built-in policies (the first time, a Warning event
 * PolicyFailed on file names pol and the budget); -1: out of memory. */
int us_plan_policy_may_run(us_plan *p, us_policy *pol, const char *file);

/* Profiling of policy calls: t0 = us_plan_policy_start(p) before a call,
 * us_plan_policy_done(p, t0, lua_calls) after it (no-ops unless profiling). */
double us_plan_policy_start(const us_plan *p);
void us_plan_policy_done(const us_plan *p, double t0, size_t lua_calls);

#endif
