/*
 * state.h — the cluster state: node pools, nodes, the queue tree, workloads
 * and their pods, and the resource vectors they are measured in.
 *
 * us_state owns every object it holds; strings and arrays inside it are freed
 * by us_state_free.  Objects refer to each other by index (a pod names its
 * workload and node by index), so arrays may grow without invalidating links.
 * Nodes, queues and workloads are never removed from their arrays (a removed
 * node is flagged `removed`), which keeps indices stable for a whole run.
 *
 * Not thread-safe: a state belongs to one thread at a time.
 */
#ifndef US_STATE_H
#define US_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "droplog.h"
#include "taints.h"

/* Resources, always in these integer units inside the engine:
 * gpu in milli-devices (1000 = one device), cpu in millicores, memory in
 * bytes.  Integers keep sums exact, so the same input gives the same output. */
enum { US_GPU, US_CPU, US_MEM, US_NRES };
typedef struct us_res {
    int64_t v[US_NRES];
} us_res;

extern const char *const us_res_names[US_NRES]; /* "gpu", "cpu", "memory" */

#define US_GPU_UNIT 1000  /* milli-devices in one GPU */
#define US_MAX_GPUS 64    /* devices a node may have */
/* Gone pods are dropped once they are one in this many of the pods
 * (us_state.gone_share): a compaction moves every pod after the first
 * gone one, so each pod that leaves pays for moving about this many. */
#define US_GONE_SHARE 8
#define US_UNLIMITED (-1) /* quota -1: unlimited; limit -1: no limit */

/* Sums saturate at INT64_MAX / INT64_MIN instead of overflowing.  Each
 * quantity is bounded at load (scenario.c), but sums over many pods, nodes or
 * queues are not: 1,100 pods of 8Pi add up to more than int64 holds.  A
 * saturated sum means "more than anything this cluster has", which is what
 * every comparison against a capacity, quota or limit needs. */
static inline int64_t us_sat_add(int64_t a, int64_t b) {
    int64_t s;
    if (__builtin_add_overflow(a, b, &s)) return b > 0 ? INT64_MAX : INT64_MIN;
    return s;
}
static inline int64_t us_sat_sub(int64_t a, int64_t b) {
    int64_t s;
    if (__builtin_sub_overflow(a, b, &s)) return b < 0 ? INT64_MAX : INT64_MIN;
    return s;
}
static inline us_res us_res_add(us_res a, us_res b) {
    for (int i = 0; i < US_NRES; i++) a.v[i] = us_sat_add(a.v[i], b.v[i]);
    return a;
}
static inline us_res us_res_sub(us_res a, us_res b) {
    for (int i = 0; i < US_NRES; i++) a.v[i] = us_sat_sub(a.v[i], b.v[i]);
    return a;
}
/* A share computed in doubles (fair share) back in engine units: rounded to
 * the nearest unit, NaN as 0, clamped to what int64 holds. */
int64_t us_res_round(double x);

/* true when every component of a is <= the one of b */
static inline bool us_res_le(us_res a, us_res b) {
    for (int i = 0; i < US_NRES; i++)
        if (a.v[i] > b.v[i]) return false;
    return true;
}
static inline bool us_res_is_zero(us_res a) {
    for (int i = 0; i < US_NRES; i++)
        if (a.v[i] != 0) return false;
    return true;
}

/* An ordered set of string pairs (labels, node selectors). Keys are unique. */
typedef struct us_kv {
    char *key, *value;
} us_kv;
typedef struct us_labels {
    us_kv *items;
    size_t n;
} us_labels;

/* Value of key, or NULL. */
const char *us_labels_get(const us_labels *l, const char *key);
/* true when every pair of sel is in l (an empty selector matches all). */
bool us_labels_match(const us_labels *l, const us_labels *sel);
/* Same pairs in the same order. */
bool us_labels_equal(const us_labels *a, const us_labels *b);
/* Deep copy; returns 0, or -1 on allocation failure (dst left empty). */
int us_labels_copy(us_labels *dst, const us_labels *src);
void us_labels_free(us_labels *l);

typedef struct us_node {
    char *name;
    char *pool;
    us_res cap;          /* cap.v[US_GPU] == gpus * US_GPU_UNIT */
    int gpus;            /* whole devices, 0..US_MAX_GPUS */
    us_labels labels;
    bool unschedulable;  /* cordoned: nothing new is placed */
    us_taints taints;    /* pods must tolerate NoSchedule/NoExecute ones */
    bool removed;        /* left the cluster (timeline remove_node) */
    bool warned;         /* its missing-capacity warning was emitted */
} us_node;

/* One resource of one queue. */
typedef struct us_qres {
    int64_t quota;            /* engine units; US_UNLIMITED for unlimited */
    int64_t limit;            /* engine units; US_UNLIMITED for none */
    double over_quota_weight;
} us_qres;

/* Per-pool override of some of a queue's resources. */
typedef struct us_qpool {
    char *pool;
    us_qres res[US_NRES];
    bool set[US_NRES];        /* which resources the override names */
} us_qpool;

typedef struct us_queue {
    char *name;
    int parent;               /* index into us_state.queues, or -1 */
    int priority;
    us_qres res[US_NRES];
    us_qpool *pools;
    size_t npools;
    double created_at;        /* seconds; orders queues that tie on every other criterion */
    bool leaf;                /* derived: no queue names it as parent */
    int depth;                /* derived: 0 for a root */
} us_queue;

typedef enum us_preemptibility {
    US_PREEMPTIBLE,
    US_NON_PREEMPTIBLE,
    US_SEMI_PREEMPTIBLE
} us_preemptibility;

typedef enum us_controller {
    US_CTRL_NONE,
    US_CTRL_JOB,
    US_CTRL_DEPLOYMENT,
    US_CTRL_DAEMONSET
} us_controller;

typedef enum us_wl_state {
    US_WL_WAITING,    /* not submitted yet (submit_at in the future) */
    US_WL_ACTIVE,     /* submitted: its pods exist */
    US_WL_COMPLETED,  /* ran for its duration, or a timeline `complete` */
    US_WL_DELETED     /* timeline `delete` */
} us_wl_state;

#define US_BACKGROUND_LABEL "kai.scheduler/background"
#define US_PREEMPTIBILITY_LABEL "kai.scheduler/preemptibility"
/* The blocked reason of a workload whose background label is neither
 * "true" nor "false" (its Warning names the value). */
extern const char us_background_label_blocked[];

/* Why a workload's pods stayed pending in the last cycle that tried them. */
typedef enum us_why {
    US_WHY_NONE,     /* nothing kept it, or nothing tried */
    US_WHY_ROOM,     /* no node had room (for the whole gang) */
    US_WHY_LIMIT,    /* its queue, or an ancestor, is at its limit */
    US_WHY_QUOTA,    /* non-preemptible: its queue's quota is used up */
    US_WHY_OWN_PODS  /* pods of its own still terminate: it waits for them */
} us_why;

typedef struct us_workload {
    char *name;
    int queue;                 /* index of a leaf queue */
    int priority;
    us_preemptibility preemptibility;
    us_controller controller;
    int replicas;              /* ignored for daemonsets: one pod per node */
    int min_member;
    /* Pods that ran to completion (a cluster's Succeeded pods, which hold
     * nothing; not among replicas).  A gang with one is never stopped for
     * holding fewer than min_member: its first workers finished, it is not
     * broken (KAI's IsStale); and it starts again with min_member less
     * them. */
    int succeeded;
    char *pool;
    us_labels node_selector;
    us_labels labels;
    us_tolerations tolerations;
    double termination_grace;  /* seconds */
    double submit_at;          /* seconds */
    double created_at;         /* seconds; default submit_at: job order, victim order */
    double duration;           /* seconds of running; < 0: until deleted */
    bool background;           /* label kai.scheduler/background: "true" */
    /* Scheduled by someone else (a pod of kube-system, another scheduler):
     * its pods hold room on their nodes in every view, and the engine never
     * places, moves, evicts or reports them pending.  It needs no queue
     * (queue -1) and is never background. */
    bool external;
    us_res request;            /* per pod */

    /* Why this workload is never scheduled (a broken scheduling rule), or
     * NULL.  Static text; set by us_state_check_rules. */
    const char *blocked;

    /* run-time */
    us_wl_state state;
    size_t npods;              /* pods of the state's array that are its own,
                                  gone ones too until a compaction drops them
                                  (us_state_add_pod, the compactions): a
                                  finished workload with none can go */
    size_t ngone;              /* of those, the ones marked gone (us_pod_go) */
    bool dropped;              /* finished with every pod gone, and dropped by
                                  a control plane's tidying (api.c): kept in
                                  the array only until a compaction takes its
                                  pods, read by nothing but its pods' counts */
    double started_at;         /* when the gang last started running; < 0 never */
    bool warned;               /* its rule warnings (blocked, long grace) were emitted */
    char *last_status;         /* last pending status event sent (latch), or NULL */
    us_why why_pending;        /* set by the cycle for pending reports */
    int why_queue;             /* the queue behind US_WHY_LIMIT / US_WHY_QUOTA */
    const char *pending_reason; /* static; why its pods stayed pending at the
                                   last cycle (the pending-reason annotation,
                                   "idle-resources", "blocked"), or NULL */
} us_workload;

typedef enum us_pod_state {
    US_POD_PENDING,
    US_POD_PIPELINED,
    US_POD_RUNNING,
    US_POD_RELEASING,
    US_POD_COMPLETED
} us_pod_state;

extern const char *const us_pod_state_names[]; /* "pending", ... */

typedef struct us_pod {
    char *name;
    int workload;          /* index into us_state.workloads */
    int node;              /* index into us_state.nodes, or -1 */
    int pin;               /* daemonset pods: the node they belong to; else -1 */
    int journal;           /* 1 + its entry in us_state.journal: changed since
                              the journal was last read; 0: not */
    double release_at;     /* releasing pods: when their resources are free;
                              pipelined pods: when they were pipelined */
    uint64_t seq;          /* creation order, for stable ordering */
    /* small fields last, in one word: a pod is 48 bytes, and passes over
     * every pod of a large cluster are bound by the bytes they read */
    int8_t shared_dev;     /* fractional-GPU pods: device slot on node
                              (0..US_MAX_GPUS-1); else -1 */
    uint8_t state;         /* a us_pod_state */
    bool gone;             /* left the cluster (us_pod_go): every reader passes
                              over it; a compaction drops it later */
    bool named;            /* its name is a real pod's, given by the caller
                              (us_engine_upsert_pod): no other pod adopts it */
    bool passing;          /* listed in us_state.passing */
    bool watched;          /* in us_state.watch */
} us_pod;
_Static_assert(sizeof(us_pod) <= 48, "a pod stays 48 bytes: passes over every pod read them all");
_Static_assert(US_MAX_GPUS <= INT8_MAX, "a device slot fits in us_pod.shared_dev");

/* What a pod was before its first change since the journal was last read
 * (us_pod_touch): the fields a ledger counts (ledger.h).  A pod appended
 * since was nothing (gone). */
typedef struct us_pod_was {
    int pod;               /* its index now (compaction follows it); -1: it left */
    int workload, node, shared_dev;
    us_pod_state state;
    bool gone;
    bool named;            /* us_pod.named */
} us_pod_was;

typedef struct us_state {
    us_node *nodes;
    size_t nnodes, cap_nodes;
    us_queue *queues;
    size_t nqueues, cap_queues;
    us_workload *workloads;
    size_t nworkloads, cap_workloads;
    us_pod *pods;
    size_t npods, cap_pods;
    uint64_t next_seq;
    uint64_t nodes_version; /* what the pools' node lists depend on: a new value
                              whenever a node is added, removed or back, or
                              the nodes are renumbered (us_state_nodes_changed);
                              0: not known.  Values are unique in the process,
                              so a copy put back never meets a list made for
                              other nodes */
    uint64_t node_specs_version; /* what nodes' static views depend on: a new
                              value whenever a node's labels, taints,
                              capacity or cordon change, or the node list
                              does (us_state_node_specs_changed); unique in
                              the process as nodes_version is */
    uint64_t nodes_warned;  /* the node spec version when every node had had its
                              missing-capacity warning (us_node.warned): while
                              it holds, no node needs one; 0: not known */
    uint64_t generation;   /* moves whenever pods leave the array or move in it
                              (compaction, an undone append): indices an
                              index keeps are then void, unless it follows
                              them through the drop log */
    us_droplog drops;      /* what the last compactions dropped (droplog.h) */
    size_t ngone;          /* pods marked gone still in the array (us_pod_go) */
    /* The journal of changed pods: an entry per pod changed or appended
     * since a ledger last read it (us_ledger_sync), so that what a ledger
     * keeps follows the changes, not the pods.  Every write to a pod's
     * node, state, device, gone or named flag calls us_pod_touch first. */
    us_pod_was *journal;
    size_t njournal, cap_journal;
    bool journal_lost;      /* an entry could not be kept: ledgers count again */
    uint64_t pods_version;  /* what a ledger's counts depend on besides the
                              journal: a new value whenever pods or workloads
                              are renumbered in a way the journal does not
                              follow (us_state_pods_renumbered); 0: not known
                              (a state just loaded or copied) */
    /* What us_life_expire knows without a pass over the pods: no releasing
     * pod ends before next_release.  Its last pass set it; every read of
     * the journal folds in the pods it names (us_state_journal_clear), so
     * a pod changed since is counted.  Known while release_version is the
     * pods version (nonzero) and the journal is not lost: a journal given
     * up voids it */
    double next_release;
    uint64_t release_version;
    /* The pods passing through a state a cycle looks for (releasing,
     * pipelined, pending pinned to a node: a DaemonSet's waiting for room
     * on theirs), not gone, in no order, each once (us_pod.passing), with
     * some that have left those states since (us_state_passing drops
     * them): so that neither the expiry, the pipelined pods' promotion nor
     * the end of a cycle's pending reports passes over every pod.
     * Complete while next_release is known: every fold of the journal
     * lists the pods it names, and every pass over the pods (a
     * compaction, an expiry that did not know) lists them again. */
    int *passing;
    size_t npassing, cap_passing;
    /* A second record of the pods changed, for a reader other than the
     * ledgers (the API's pod index follows a cycle with it): while
     * watching, every pod touched or appended is recorded once, as it was
     * before (us_pod.watched).  watch_lost: an entry could not be kept, or
     * a compaction moved the pods. */
    us_pod_was *watch;
    size_t nwatch, cap_watch;
    bool watching, watch_lost;
    /* Pods marked gone stay in the array until they are one in gone_share
     * of it (0: dropped at the next compaction point, whatever their
     * number), so that a cluster where a few pods leave each cycle does not
     * move every pod each cycle: pods keep their index, and what is kept
     * by index lives across cycles.  us_state_init sets US_GONE_SHARE. */
    unsigned gone_share;
    /* The log of pods changed, for readers that keep what they read of the
     * pods by index across cycles (podview.h): while logging, each read of
     * the journal (us_state_journal_clear) appends the index of every pod
     * it named.  Positions count every entry ever logged: changes[0] is at
     * changes_start.  A change the log cannot name (the journal lost,
     * workloads renumbered, memory) leaves a gap: every position before it
     * is void (us_state_changes_since).  Pods moved or renumbered move the
     * generation or the pods version, which a reader checks first. */
    int *changes;
    size_t nchanges, cap_changes;
    uint64_t changes_start;
    bool logging_changes;
    /* queue name -> index, open addressing, over the first qnamed queues
     * (us_state_queue_index; a cache: a queue appended is added, one
     * removed voids it, us_state_queues_renumbered) */
    int *qslot;
    size_t qcap, qnamed;
} us_state;

/* Make room for one more element in the growable array *arr holding n of
 * *cap elements of size elem (doubling); 0, or -1 when memory runs out
 * (the array is then unchanged). */
int us_grow(void **arr, size_t *cap, size_t n, size_t elem);

void us_state_init(us_state *st);
void us_state_free(us_state *st);

/* Deep copy of src into dst (which is overwritten, not freed): every object,
 * label, pool override and status latch, each string a copy of its own, so
 * the two states can be changed and freed independently.  Indices, run-time
 * fields and the creation counter are kept, so a cycle run on the copy
 * decides what it would decide on src.  0, or -1 when memory runs out (dst
 * is then left empty). */
int us_state_clone(us_state *dst, const us_state *src);

/* Lookups by name; -1 when absent.  Linear for nodes and workloads: for
 * loading and tests. */
int us_state_node_index(const us_state *st, const char *name);
/* The queue named name, or -1: through a name index the state keeps
 * (built on first use, kept as queues are appended), so a lookup per
 * workload or queue sent is not a pass over the queues.  The index is a
 * cache written through a const state: one thread at a time per state. */
int us_state_queue_index(const us_state *st, const char *name);
/* Queues were removed or moved in the array: the name index is rebuilt. */
void us_state_queues_renumbered(us_state *st);
int us_state_workload_index(const us_state *st, const char *name);

/* Append an object (taking ownership of every pointer inside it); returns
 * its index, or -1 on allocation failure (the object is then freed). */
/* The nodes changed (added, removed, back, renumbered): cycles make the
 * pools' node lists again (cyclecache.h).  The versions come from one
 * atomic counter, so threads that each own a state may call it at once. */
void us_state_nodes_changed(us_state *st);
/* A node's labels, taints, capacity or cordon changed (node classes kept
 * across cycles are found again). */
void us_state_node_specs_changed(us_state *st);
int us_state_add_node(us_state *st, us_node *n);
int us_state_add_queue(us_state *st, us_queue *q);
int us_state_add_workload(us_state *st, us_workload *w);
/* Append a new pending pod of workload w named name (copied).  pin is the
 * node a daemonset pod belongs to, or -1.  Returns the pod index or -1. */
int us_state_add_pod(us_state *st, int w, const char *name, int pin);

/* Drop pods marked gone, keeping the order of the rest (whatever their
 * number: us_state_compact_due tells when it is due). */
void us_state_compact_pods(us_state *st);
/* Checking builds: are the pods marked gone the ones us_state.ngone
 * counts (every mark through us_pod_go)?  A pass over the pods. */
bool us_state_gone_counted(const us_state *st);
/* Are the pods marked gone due to be dropped (us_state.gone_share)? */
static inline bool us_state_compact_due(const us_state *st) {
    return st->ngone > 0 && (st->gone_share == 0 || st->ngone * st->gone_share >= st->npods);
}
/* The earliest time a releasing pod ends, known without a pass over the
 * pods (us_state.next_release); -INFINITY when not known. */
double us_state_next_release(us_state *st);
/* Is p one of the pods passing through (us_state.passing)? */
static inline bool us_pod_passes(const us_pod *p) {
    return !p->gone && (p->state == US_POD_RELEASING || p->state == US_POD_PIPELINED ||
                        (p->state == US_POD_PENDING && p->pin >= 0));
}
/* The pods passing through (us_state.passing), the ones that left those
 * states dropped from the list first, or NULL when not known (then a pass
 * over the pods finds them, and lists them again: us_state_passing_relist). */
const int *us_state_passing(us_state *st, size_t *n);
/* A pass over every pod lists the pods passing through again: restart,
 * then relist each pod (its index now) in pod order.  Out of memory the
 * list is not known until the next pass. */
void us_state_passing_restart(us_state *st);
void us_state_passing_relist(us_state *st, size_t i);
/* Pod i leaves the array (a compaction, an undone append): its workload
 * counts one pod less. */
static inline void us_state_pod_leaves(us_state *st, size_t i) {
    us_workload *w = &st->workloads[st->pods[i].workload];
    w->npods--;
    if (st->pods[i].gone) {
        w->ngone--;
        st->ngone--;
    }
}
/* A compaction drops pod i (gone): its journal entry, the drop log
 * (between us_droplog_begin and _end), its workload's count and its name
 * follow.  Every compaction's drop, so that none forgets one. */
void us_state_pod_dropped(us_state *st, size_t i);

/* Start recording the pods changed from now on (us_state.watch), the
 * last record dropped; stop keeps the record for the reader. */
void us_state_watch_start(us_state *st);
void us_state_watch_stop(us_state *st);
/* Pod p (of st->pods) is about to change its node, state, device, gone or
 * named flag: its fields before the change go into the journal (once per pod
 * between two reads).  Never fails: when memory runs out the journal is marked lost
 * and the next ledger sync counts every pod. */
void us_pod_touch(us_state *st, us_pod *p);
/* Pod p leaves the cluster: journaled, marked gone and counted (its
 * workload's ngone, the state's).  It stays in the array, passed over by
 * every reader, until a compaction drops it.  Every mark goes through
 * here, so the counts are exact.  Nothing when it is gone already. */
void us_pod_go(us_state *st, us_pod *p);
/* Compaction moves pod p to index `to` (to < 0: it leaves): its journal
 * entry follows it. */
static inline void us_journal_moved(us_state *st, const struct us_pod *p, long to) {
    if (p->journal) st->journal[p->journal - 1].pod = (int)to;
}
/* The journal was read: every entry is dropped, and what its pods are now
 * folded into what us_life_expire knows (us_state.next_release). */
void us_state_journal_clear(us_state *st);
/* Fold the journal's pods, as they are now, into next_release without
 * dropping an entry. */
void us_state_fold_releases(us_state *st);
/* Pods or workloads were renumbered beyond what the journal follows (an
 * undone append, workloads dropped): ledgers count again. */
void us_state_pods_renumbered(us_state *st);

/* The log of changed pods (us_state.changes).  on: log from now on (the
 * first time, after a gap: nothing before is known).  end: the position
 * after the last entry.  since: the pods logged from position `from` on
 * (*n of them, in the order logged, maybe some twice), or NULL when
 * `from` is void (before a gap, or past the end).  trim: entries before
 * position upto are no longer needed.  gap: what follows cannot be read
 * from what came before (the pods or workloads were renumbered). */
void us_state_changes_on(us_state *st);
static inline uint64_t us_state_changes_end(const us_state *st) {
    return st->changes_start + st->nchanges;
}
const int *us_state_changes_since(const us_state *st, uint64_t from, size_t *n);
void us_state_changes_trim(us_state *st, uint64_t upto);
void us_state_changes_gap(us_state *st);

/* Free one node/queue/workload/pod's owned memory (not the struct). */
void us_node_free(us_node *n);
void us_queue_free(us_queue *q);
void us_workload_free(us_workload *w);

/* Recompute derived queue fields (leaf, depth). */
void us_state_derive_queues(us_state *st);

/* Effective quota/limit/weight of queue q on pool (per-pool overrides
 * applied). */
us_qres us_queue_res(const us_queue *q, const char *pool, int r);

/* Mark workloads that break a background rule as blocked (with a reason).
 * Called after loading; idempotent. */
void us_state_check_rules(us_state *st);
/* The same for the workloads from index first on (new ones: the queues
 * and the workloads before them have not changed since the last check). */
void us_state_check_rules_from(us_state *st, size_t first);

/* The pods a gang that holds none needs placed at once: min_member, less
 * those that already ran to completion, and at least one. */
static inline int us_wl_gang_start(const us_workload *w) {
    return w->min_member - w->succeeded > 1 ? w->min_member - w->succeeded : 1;
}

/* Whether a gang holding n pods (running or pipelined) is whole: n reaches
 * min_member, or some of its pods already ran to completion.  One that is
 * not, and holds some, broke: the next cycle stops it. */
static inline bool us_wl_gang_whole(const us_workload *w, int n) {
    return n >= w->min_member || (w->succeeded > 0 && n > 0);
}

/* Whole devices and fractional share of a request. */
static inline int us_req_whole_gpus(us_res req) { return (int)(req.v[US_GPU] / US_GPU_UNIT); }
static inline bool us_req_is_fractional(us_res req) {
    return req.v[US_GPU] % US_GPU_UNIT != 0;
}

#endif
