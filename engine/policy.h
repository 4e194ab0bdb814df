/*
 * policy.h — the Lua policy host: loads a policy directory (fairshare.lua,
 * placement.lua, background.lua) into one sandboxed Lua 5.4 state and calls
 * its functions with views of the snapshot, under an instruction and memory
 * budget per call.
 *
 * The host only runs policies and converts values; it does not judge them.
 * Checking a result against the scheduling invariants is the caller's job
 * (fairshare.c, placement.c, reoffer.c), which falls back to the built-in
 * C policies (builtin.h) when a result is rejected.
 *
 * A us_policy is owned by its creator and freed with us_policy_free.  It is
 * not thread-safe: one thread at a time per us_policy.
 */
#ifndef US_POLICY_H
#define US_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "state.h"

typedef struct us_policy us_policy;

typedef struct us_policy_limits {
    uint64_t instructions;  /* VM instructions per call; 0: default (10,000,000) */
    size_t memory;          /* bytes of Lua heap; 0: default (64 MiB) */
    unsigned long time_ms;  /* wall-clock milliseconds per call; 0: default (500) */
} us_policy_limits;

/* Load and compile dir/fairshare.lua, dir/placement.lua, dir/background.lua.
 * Each must return a table holding its required function (see
 * docs/policies.md).  dir holds at least one of them; those it does not
 * hold are the compiled-in defaults (policysrc.h).  Returns NULL and fills err on failure (message names
 * file:line). lim may be NULL for defaults. */
us_policy *us_policy_load(const char *dir, const us_policy_limits *lim, us_err *err);
void us_policy_free(us_policy *p);

/* The directory it was loaded from, and an id: a hex hash of the three
 * files' bytes (stable across runs). Owned by p. */
const char *us_policy_dir(const us_policy *p);
const char *us_policy_id(const us_policy *p);

/* The last good version this one replaced, or NULL.  When a call of this
 * version fails or its result is rejected, the cycle asks the previous
 * version, then the built-in policy.  p owns previous (and frees it); one
 * level is kept: previous's own previous is freed here. */
void us_policy_set_previous(us_policy *p, us_policy *previous);
us_policy *us_policy_previous(const us_policy *p);
/* Detach p's previous version and hand it back, unfreed (ownership passes
 * to the caller); NULL when there is none.  For a holder that lent p its
 * previous version and must get it back before p is freed or replaced. */
us_policy *us_policy_take_previous(us_policy *p);

/* Which functions of a policy there are, and how many times each has been
 * called since the policy was loaded (failed calls included).  A check uses
 * it to know whether a dry run exercised every function. */
typedef enum us_policy_fn { US_POLICY_COMPUTE, US_POLICY_SCORE, US_POLICY_REOFFER, US_POLICY_NFN } us_policy_fn;
extern const char *const us_policy_files[US_POLICY_NFN]; /* "fairshare.lua", ... */
extern const char *const us_policy_fns[US_POLICY_NFN];   /* "compute", "score", "reoffer" */
unsigned long us_policy_calls(const us_policy *p, us_policy_fn fn);

/* Bytes p's Lua state holds now (what its memory budget counts).  Between
 * calls that is what the policy keeps: a call's view is freed when the
 * call ends. */
size_t us_policy_memory(const us_policy *p);

/* Whether the file of fn is the compiled-in default (the directory does
 * not hold it). */
bool us_policy_file_is_default(const us_policy *p, us_policy_fn fn);

/* ---- policy authoring: log(...) ------------------------------------------
 * Lines a policy logged, with the file and line that logged them, kept
 * until taken.  Bounded: at most US_POLICY_LOG_MAX lines wait (more are
 * counted as dropped), each cut at US_POLICY_LOG_TEXT bytes (and "..."). */
#define US_POLICY_LOG_MAX 200
#define US_POLICY_LOG_TEXT 400
typedef struct us_policy_log_line {
    char *file;
    int line;
    char *text;
} us_policy_log_line;
size_t us_policy_log_count(const us_policy *p);
const us_policy_log_line *us_policy_log_at(const us_policy *p, size_t i);
unsigned long us_policy_log_dropped(const us_policy *p);
void us_policy_log_clear(us_policy *p);

/* The node label keys the policy declares it reads: the union, sorted and
 * unique, of the `labels` lists its files return (docs/policies.md).  A
 * node's view carries only these and the keys some node selector names
 * (nodelabels.h).  Owned by p; *n is set, the array may be NULL when 0. */
const char *const *us_policy_labels(const us_policy *p, size_t *n);

/* No call of p runs past deadline (seconds on the monotonic clock,
 * us_cycle_clock), the end of the cycle's time budget of budget seconds: a
 * call still running then is cut off like one past its own time limit
 * ("cycle time budget exceeded").  deadline 0: no such bound. */
void us_policy_set_cycle_deadline(us_policy *p, double deadline, double budget);

/* Seed math.random for a cycle, so runs stay deterministic. */
void us_policy_seed(us_policy *p, uint64_t seed);

/* ---- fair share ---------------------------------------------------------
 * Lua: fairshare.compute(view) -> { [queue_name] = {gpu=, cpu=, memory=} }
 */
typedef struct us_fs_queue {
    const char *name;
    int parent;                 /* index into the same array, or -1 */
    int priority;
    us_qres res[US_NRES];       /* quota, limit, weight effective on this pool */
    us_res demand;              /* AI requests of pending+placed pods; parents: sum of children */
    us_res allocated;           /* AI pods holding resources; parents: sum of children */
    double created_at;          /* seconds; orders queues that tie for a unit left over */
} us_fs_queue;

typedef struct us_fs_input {
    const char *pool;
    us_res capacity;            /* schedulable capacity of the pool */
    const us_fs_queue *queues;  /* every queue, in state order */
    size_t nqueues;
} us_fs_input;

/* On success fills fair[q * US_NRES + r] (engine units) for every queue. */
int us_policy_fairshare(us_policy *p, const us_fs_input *in, double *fair, us_err *err);

/* ---- placement ----------------------------------------------------------
 * Lua: placement.score(pod, node) -> number (higher is better)
 */
typedef struct us_pod_view {
    const us_pod *pod;
    const us_workload *wl;
    const char *queue;
} us_pod_view;

typedef struct us_node_view {
    const us_node *node;
    us_res allocated;           /* planned use, before this pod */
    int free_gpus;              /* whole devices free in the plan */
    const us_labels *labels;    /* what the policy sees of node->labels (the
                                   labels that matter, nodelabels.h); NULL:
                                   all of them */
} us_node_view;

/* Scores pod on each of nodes[0..n); fills scores[0..n). */
int us_policy_score(us_policy *p, const us_pod_view *pod, const us_node_view *nodes,
                    size_t n, double *scores, us_err *err);
/* Whether the last us_policy_score call's answers are a function of its
 * views alone: it neither drew from math.random (seeded per cycle) nor
 * logged (a line each call writes).  Only such scores are kept from one
 * cycle to the next (nodeclass.h). */
bool us_policy_last_call_pure(const us_policy *p);

/* ---- background re-offer -------------------------------------------------
 * Lua: background.reoffer(view) -> { keep = {pod_name, ...},
 *                                    place = { [pod_name] = node_name } }
 */
typedef struct us_bg_node {
    const us_node *node;
    us_res free;                /* idle after the AI plan, releasing pods and
                                   the background pods not offered; offered
                                   running pods NOT subtracted */
    int free_gpus;              /* whole devices, same accounting */
    us_res free_at_end;         /* room once the AI plan ends: pipelined and new
                                   AI pods counted, every terminating pod gone,
                                   background pods not offered counted; what a
                                   running pod may keep */
    int free_gpus_at_end;       /* whole devices, same accounting */
    us_res idle;                /* room nobody holds now: free minus every
                                   offered running pod (kept or evicted, an
                                   evicted pod terminates); what a pending
                                   pod may take */
    int idle_gpus;              /* whole devices, same accounting */
    const us_labels *labels;    /* what the policy sees of node->labels
                                   (nodelabels.h); NULL: all of them */
} us_bg_node;

typedef struct us_bg_pod {
    const us_pod *pod;
    const us_workload *wl;
    int node;                   /* running: index into us_bg_input.nodes; pending: -1 */
    const int *candidates;      /* pending: node indices into us_bg_input.nodes
                                   it may go to (selector, pin, cordon) and has
                                   room on, ascending; pods may share a list */
    size_t ncandidates;
} us_bg_pod;

typedef struct us_bg_input {
    const us_bg_node *nodes;    /* the nodes of running pods and of candidates,
                                   sorted by node name */
    size_t nnodes;
    const us_bg_pod *running;   /* running background pods on nodes the AI plan
                                   changed this cycle (the rest stay, and count
                                   as used in nodes[].free) */
    size_t nrunning;
    const us_bg_pod *pending;
    size_t npending;
} us_bg_input;

/* On success fills keep[0..nrunning) and place[0..npending) (a node index
 * into in->nodes, or -1 to leave pending).  Names the policy returns that are
 * not in the input are an error. */
int us_policy_reoffer(us_policy *p, const us_bg_input *in, bool *keep, int *place,
                      us_err *err);

#endif
