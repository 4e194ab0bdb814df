/*
 * understory.h — the embedding API of the understory scheduling engine.
 *
 * A control plane holds one engine handle per cluster.  It feeds the handle
 * the cluster as it changes (nodes, queues, workloads, and what happened to
 * pods), runs one scheduling cycle at a time it chooses, and applies the
 * decisions the cycle returns (bind, pipeline, evict) to the real cluster.
 *
 *     us_engine *e;
 *     us_error err;
 *     if (us_engine_create(NULL, &e, &err) != US_OK) { ...err.message... }
 *     us_engine_upsert_node_json(e, "{\"name\": \"n1\", \"gpu\": 8}", &err);
 *     ...
 *     us_engine_run_cycle(e, now, &err);
 *     for (size_t i = 0; i < us_engine_decision_count(e); i++) {
 *         us_decision_info d;
 *         us_engine_decision(e, i, &d);   // apply d to the cluster
 *     }
 *     us_engine_destroy(e);
 *
 * docs/embedding.md walks through all of it.  This header is the whole
 * public API; it includes no engine internals and is stable: within one
 * major version a function never changes meaning and a struct never
 * changes layout (new fields come with a new soname).
 *
 * Conventions, for every function below:
 *  - Errors.  A fallible function returns US_OK (0) or a positive error
 *    code, and when err is not NULL fills it with the code and a message.
 *    Messages about input name the field (`workload.queue: "team-z" is not
 *    a queue`).  A failed call leaves the engine exactly as it was, except
 *    after US_ENOMEM, when the engine is consistent (every scheduling
 *    invariant holds) but the operation may be partly applied.  Nothing in
 *    the library aborts or exits.
 *  - Ownership.  Pointers passed in are borrowed for the length of the call
 *    and copied when kept.  Pointers handed out (names, info structs'
 *    strings and arrays) are owned by the engine: never free them.  Each
 *    function says how long they stay valid.
 *  - Threads.  One handle is used by one thread at a time: calls on the
 *    same handle must not overlap (the caller serializes them).  Different
 *    handles are independent and may be used from different threads at
 *    once.  Functions that take no handle are safe from any thread.
 *  - Units.  cpu in millicores, memory in bytes (integers); gpu in devices
 *    (a double: whole devices for nodes, a fraction below 1 allowed for an
 *    AI pod's request); times and durations in seconds of the caller's
 *    clock (any origin, never going backwards).
 */
#ifndef UNDERSTORY_H
#define UNDERSTORY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version --------------------------------------------------------------
 * The one source of the version: the Makefile derives the library's soname
 * (libunderstory.so.MAJOR) and understory.pc from these lines. */
#define UNDERSTORY_VERSION_MAJOR 1
#define UNDERSTORY_VERSION_MINOR 1
#define UNDERSTORY_VERSION_PATCH 0
#define UNDERSTORY_VERSION_STRING "1.1.0"

#if defined(__GNUC__) && __GNUC__ >= 4
#define US_API __attribute__((visibility("default")))
#else
#define US_API
#endif

/* The version of the library actually loaded ("1.0.0"), which may be newer
 * than the header a program was built with.  Static string; thread-safe. */
US_API const char *us_version(void);

/* ---- errors ---------------------------------------------------------------- */

enum {
    US_OK = 0,
    US_EINVAL = 1,  /* malformed input: the message names the field */
    US_ENOMEM = 2,  /* an allocation failed */
    US_EIO = 3,     /* a file could not be read */
    US_EPOLICY = 4, /* a policy failed to load or failed its check */
    US_ENOENT = 5,  /* no node, queue, workload or pod of that name */
    US_EBUSY = 6,   /* in use (a queue with workloads or children), or a
                       call that changes the engine made from inside its
                       event callback */
    US_EINVARIANT = 7 /* an invariant failed after a cycle (check_invariants):
                         an engine bug; the message names the invariant, the
                         cycle and the objects */
};

/* A code and a message.  A plain value owned by the caller. */
typedef struct us_error {
    int code;
    char message[1024];
} us_error;

/* A short name of code ("invalid input", "no such object", ...).  Static
 * string; thread-safe. */
US_API const char *us_strerror(int code);

/* ---- values ----------------------------------------------------------------- */

/* A key/value pair (labels, node selectors, event annotations). */
typedef struct us_label {
    const char *key;
    const char *value;
} us_label;

/* A node taint, as Kubernetes writes it: key (required), value (NULL or
 * ""), effect "NoSchedule" | "PreferNoSchedule" | "NoExecute" (required).
 * A pod is placed on a node only when it tolerates every NoSchedule and
 * NoExecute taint there; PreferNoSchedule never keeps a pod off. */
typedef struct us_taint {
    const char *key;
    const char *value;
    const char *effect;
} us_taint;

/* A workload's toleration, Kubernetes' shape and matching: op "Equal"
 * (NULL or "": the default; value must equal the taint's) or "Exists" (any
 * value; value must be empty); key NULL or "" only with Exists, which then
 * tolerates every taint; effect NULL or "" tolerates every effect. */
typedef struct us_toleration {
    const char *key;
    const char *op;
    const char *value;
    const char *effect;
} us_toleration;

/* A resource vector: gpu in devices, cpu in millicores, memory in bytes.
 * In queue quotas and limits a component of -1 means unlimited / no limit. */
typedef struct us_resources {
    double gpu;
    int64_t cpu;
    int64_t memory;
} us_resources;

/* Per-resource over-quota weights. */
typedef struct us_weights {
    double gpu, cpu, memory;
} us_weights;

/* ---- the engine handle ------------------------------------------------------ */

typedef struct us_engine us_engine;

typedef struct us_engine_options {
    /* Directory holding fairshare.lua, placement.lua and background.lua
     * (docs/policies.md); NULL: the built-in C policies.  Copied. */
    const char *policies;
    /* Non-zero: AI pods stay where placement put them (ties by node name);
     * 0 (default): a node's new AI pods may move to a node interchangeable
     * with it for every AI pod of the cycle where they displace less
     * background work, which never changes an AI outcome
     * (docs/scheduling.md). */
    int plain_ties;
    /* Seconds of termination grace above which a background workload draws
     * a warning event (default 30). */
    double long_grace;
    /* Lua instructions and heap bytes one policy call may use; 0: the
     * defaults (10,000,000 and 64 MiB). */
    uint64_t instructions;
    size_t memory;
    /* Non-zero: check the engine's invariants after every cycle (no node
     * over capacity, gangs at 0 or min_member, unique live pod names, every
     * accepted decision applied, queue usage equal to its pods; see
     * docs/scheduling.md); a violation fails us_engine_run_cycle with
     * US_EINVARIANT.  0 (default): no check, unless the library was built
     * with US_CHECK_INVARIANTS. */
    int check_invariants;
    /* Wall-clock milliseconds one policy call may take; 0: the default
     * (500).  A call past it is cut off like one past its instructions. */
    unsigned long time_limit_ms;
    /* Wall-clock seconds one us_engine_run_cycle's policy calls may run
     * to; 0: the default (5).  Past it, a call still running is cut off
     * and the rest of the cycle uses the built-in policies, with a Warning
     * event PolicyFailed (annotation cycle-budget) naming the policy file
     * and the budget.  Negative or not finite: US_EINVAL. */
    double cycle_budget;
    /* Non-zero: every us_engine_run_cycle recomputes everything from the
     * state.  0 (default): a cycle reuses what the last one left where it
     * still holds (the order of nodes and background pods by name, so a
     * cycle after a small change sorts little); whatever was upserted,
     * removed or completed between cycles, both decide the same, byte for
     * byte (docs/embedding.md).  For tests and for measuring. */
    int full_cycles;
    /* Non-zero: pods exist once the caller reports them, for a cluster
     * that names its own pods (Kubernetes: `understory serve` sets it).
     * The pending pods the engine's controllers make (a workload's pods at
     * submission, a replacement after an eviction or a loss) keep their
     * workload's place, but none is placed until us_engine_upsert_pod
     * reports a pod that takes its place: a bind of a pod that does not
     * exist could not be carried out, and the engine would count room the
     * cluster does not use.  A gang waits for min_member reported pods
     * (pending reason "not-created").  0 (default): the engine owns the
     * names and places its own pods. */
    int reported_pods;
} us_engine_options;

/* Fill o with the defaults.  Thread-safe. */
US_API void us_engine_options_init(us_engine_options *o);

/* Create an engine with an empty cluster at time 0.  o may be NULL for the
 * defaults.  On success *out is a new handle owned by the caller (free it
 * with us_engine_destroy); on failure *out is NULL (a policy directory that
 * does not load is US_EPOLICY, naming file:line).  Thread-safe. */
US_API int us_engine_create(const us_engine_options *o, us_engine **out, us_error *err);

/* Free the engine and everything it handed out.  e may be NULL.  Ignored
 * when called from the engine's own event callback (the cycle is still
 * using it): destroy it after us_engine_run_cycle returns. */
US_API void us_engine_destroy(us_engine *e);

/* ---- policies --------------------------------------------------------------- */

/* Load the policies in dir (NULL: the built-in C policies) and use them from
 * the next cycle, unchecked beyond compiling: for start-up.  On failure the
 * current policies stay. */
US_API int us_engine_load_policies(us_engine *e, const char *dir, us_error *err);

/* Hot reload: compile dir into a fresh Lua state, check its functions and
 * dry-run a full cycle on a copy of the current state (at the engine's
 * time) within budget; only when all of it passes is it swapped in, and the
 * policies it replaces become its fallback.  On failure (US_EPOLICY, saying
 * why) the current policies stay.  The cluster state is never changed. */
US_API int us_engine_reload_policies(us_engine *e, const char *dir, us_error *err);

/* Id of the policies in use (a hex hash of the three files), or "builtin".
 * Owned by e; valid until the policies change or e is destroyed. */
US_API const char *us_engine_policy_id(const us_engine *e);

/* ---- nodes ------------------------------------------------------------------ */

typedef struct us_node_spec {
    const char *name;        /* required, unique among nodes */
    const char *pool;        /* NULL: "default" */
    us_resources capacity;   /* gpu: whole devices, 0..64 */
    const us_label *labels;  /* nlabels pairs, keys unique */
    size_t nlabels;
    int unschedulable;       /* non-zero: cordoned, nothing new is placed */
    const us_taint *taints;  /* ntaints taints; at most one per key and effect */
    size_t ntaints;
} us_node_spec;

/* Add a node, or replace a present node's spec (capacity, labels, cordon,
 * taints; the pool of a present node cannot change).  A DaemonSet gets a
 * pending pod on every node that joins or comes to match its selector and
 * tolerations, and loses it on a node that no longer matches (a running pod
 * stays when only a new NoSchedule taint is not tolerated, as in
 * Kubernetes).  Refused (US_EINVAL) when the new
 * capacity is below what the pods on the node hold.  A cluster can report
 * that (a GPU gone bad under its pods): a control plane then sends the
 * capacity raised to what they hold (us_engine_node_named's used), so its
 * other changes still apply and nothing new fits, and sends the reported
 * one again once they leave room, as `understory serve` does
 * (docs/kubernetes.md). */
US_API int us_engine_upsert_node(us_engine *e, const us_node_spec *spec, us_error *err);
/* The same from one node object of the scenario format (docs/embedding.md),
 * a NUL-terminated JSON text; messages name its fields as `node.<field>`. */
US_API int us_engine_upsert_node_json(us_engine *e, const char *json, us_error *err);
/* The node leaves: its DaemonSet pods go with it, the other pods on it are
 * lost and recreated pending by their controllers, and a gang that falls
 * below min_member goes back to pending whole.  A pod pinned to the node
 * waits for it: when a node of that name (and pool) is added again, it is
 * the node such pods wait for.  US_ENOENT when absent. */
US_API int us_engine_remove_node(us_engine *e, const char *name, us_error *err);

/* ---- queues ----------------------------------------------------------------- */

/* A per-pool override of a queue's figures (all three resources). */
typedef struct us_queue_pool_spec {
    const char *pool;
    us_resources quota;            /* -1 component: unlimited */
    us_resources limit;            /* -1 component: no limit */
    us_weights over_quota_weight;
} us_queue_pool_spec;

typedef struct us_queue_spec {
    const char *name;              /* required, unique among queues */
    const char *parent;            /* NULL: a root queue */
    int priority;                  /* default 0 */
    us_resources quota;            /* default 0; -1 component: unlimited */
    us_resources limit;            /* default -1 (no limit) */
    us_weights over_quota_weight;  /* default 1 */
    const us_queue_pool_spec *pools;
    size_t npools;
} us_queue_spec;

/* Fill q with the defaults (and NULL name).  Thread-safe. */
US_API void us_queue_spec_init(us_queue_spec *q);

/* Add a queue, or replace a present queue's spec.  The parent must exist,
 * must not be the queue or one of its descendants, and must not hold
 * workloads (workloads go to leaf queues only). */
US_API int us_engine_upsert_queue(us_engine *e, const us_queue_spec *spec, us_error *err);
/* From one queue object of the scenario format; messages say `queue.<field>`. */
US_API int us_engine_upsert_queue_json(us_engine *e, const char *json, us_error *err);
/* Refused with US_EBUSY while a workload (live or still terminating) is in
 * the queue or the queue has children; US_ENOENT when absent. */
US_API int us_engine_remove_queue(us_engine *e, const char *name, us_error *err);

/* ---- workloads -------------------------------------------------------------- */

typedef enum us_preemption {
    US_PREEMPTION_DEFAULT = 0,   /* preemptible when priority < 100, else not
                                    (or the label kai.scheduler/preemptibility) */
    US_PREEMPTION_PREEMPTIBLE,
    US_PREEMPTION_NON_PREEMPTIBLE,
    US_PREEMPTION_SEMI_PREEMPTIBLE
} us_preemption;

typedef enum us_controller_kind {
    US_CONTROLLER_NONE = 0,
    US_CONTROLLER_JOB,
    US_CONTROLLER_DEPLOYMENT,
    US_CONTROLLER_DAEMONSET      /* one pod per matching node of its pool */
} us_controller_kind;

/* Priority classes. */
#define US_PRIORITY_TRAIN 50
#define US_PRIORITY_BUILD_PREEMPTIBLE 75
#define US_PRIORITY_BUILD 100
#define US_PRIORITY_INFERENCE 125

typedef struct us_workload_spec {
    const char *name;              /* required, unique among live workloads */
    const char *queue;             /* required: a leaf queue (NULL when external) */
    int priority;                  /* default US_PRIORITY_TRAIN */
    us_preemption preemptibility;
    us_controller_kind controller;
    int replicas;                  /* default 1; ignored for a DaemonSet */
    int min_member;                /* gang size; 0: replicas for none/job,
                                      1 for deployment/daemonset */
    const char *pool;              /* NULL: "default" */
    const us_label *node_selector;
    size_t nnode_selector;
    const us_label *labels;        /* kai.scheduler/background: "true" makes
                                      it a background workload */
    size_t nlabels;
    double termination_grace;      /* seconds, default 30 */
    us_resources requests;         /* per pod */
    const us_toleration *tolerations; /* the node taints its pods tolerate */
    size_t ntolerations;
    /* Non-zero: an external workload, whose pods another scheduler places
     * (kube-system pods, pods of another schedulerName).  The caller reports
     * its pods with us_engine_upsert_pod; they hold their room on their
     * nodes in every view, and the engine never places, evicts or reports
     * them pending.  queue must be NULL (it is in no queue); the background
     * label does not apply. */
    int external;
    /* Pods of it that ran to completion (a Job's Succeeded pods), not among
     * replicas.  A gang with one is never stopped for holding fewer than
     * min_member pods (its first workers finished), and one that holds
     * nothing starts again with min_member less them; min_member may be up
     * to replicas + succeeded.  0 for a DaemonSet or an external workload. */
    int succeeded;
} us_workload_spec;

/* Fill w with the defaults (and NULL name and queue).  Thread-safe. */
US_API void us_workload_spec_init(us_workload_spec *w);

/* Submit a new workload at time now (its controller creates its pods,
 * pending), or update a live one.  On a live workload only replicas,
 * min_member, succeeded and termination_grace may change (scaling down
 * terminates the newest pods first, pending before running); any other
 * difference is refused with US_EINVAL naming the field: remove the
 * workload and submit it again.  An identical spec is a no-op, so a control plane may resend
 * its whole state.  A workload that breaks a background rule is accepted
 * and never scheduled, with a Warning event saying why, as a cluster does. */
US_API int us_engine_upsert_workload(us_engine *e, const us_workload_spec *spec, double now,
                                     us_error *err);
/* From one workload object of the scenario format, without the simulator's
 * fields (submit_at, duration, pods: here the caller submits, completes and
 * reports pods itself); messages say `workload.<field>`. */
US_API int us_engine_upsert_workload_json(us_engine *e, const char *json, double now,
                                          us_error *err);
/* Delete the workload at now: pending pods vanish, running pods terminate
 * for their grace period.  US_ENOENT when no live workload has that name. */
US_API int us_engine_remove_workload(us_engine *e, const char *name, double now, us_error *err);
/* The workload finished (a job completed): its pods leave and free their
 * resources at once. */
US_API int us_engine_complete_workload(us_engine *e, const char *name, double now,
                                       us_error *err);

/* ---- pods: what the cluster did --------------------------------------------
 * The engine names the pods it schedules (`<workload>-<i>`, DaemonSet pods
 * `<workload>-<node>`) and assumes its decisions are applied.  The caller
 * reports where reality differs: a pod that runs somewhere (at start-up, or
 * after a bind the engine did not decide), a bind that failed (back to
 * pending), a pod that is gone. */
typedef struct us_pod_spec {
    const char *name;       /* required */
    const char *workload;   /* required when the engine does not know the pod */
    const char *node;       /* the node it runs on; NULL: pending (unbound) */
    /* Fields below were appended; a spec zero-initialized past node (as
     * `us_pod_spec s = {name, wl, node};` is) keeps the old meaning. */
    const char *pin;        /* the only node the pod may ever be placed on (a
                               DaemonSet pod's node affinity on
                               metadata.name); NULL: none.  Given again with
                               every report: a report without it unpins the
                               pod, except a DaemonSet's, pinned to its
                               node by its controller */
    int terminating;        /* non-zero: the pod is being deleted, not by a
                               decision of the engine (Kubernetes'
                               deletionTimestamp); needs node.  It is
                               releasing there, holding its room until
                               us_engine_remove_pod, and is no longer one of
                               its workload's replicas */
} us_pod_spec;

/* Report that a pod runs on spec->node (or is pending when node is NULL,
 * or terminating on node when spec->terminating).  A pod the engine does
 * not know is adopted by its workload: it takes the place of one of the
 * workload's pending pods (and its name): for a pinned pod, one that may go
 * to its pin (a DaemonSet's pod pinned to that node).  A terminating pod
 * the engine does not know is added beside the workload's replicas; a
 * running one it knows releases, and its controller's replacement is a new
 * pending pod.  Refused when the node has not the room (running and
 * terminating pods count), is in another pool, is not the pod's pin, or
 * the workload has no place for another pod.  A pod the engine evicted and
 * that is reported on its node (running or terminating) is left
 * terminating, and from then on holds its room until us_engine_remove_pod,
 * not only until its grace period ends: a deletion can take longer.  A pod
 * it pipelined and that is reported unbound (node NULL: so it is, until its
 * room is free) is left pipelined. */
US_API int us_engine_upsert_pod(us_engine *e, const us_pod_spec *spec, us_error *err);
/* From {"name": ..., "workload": ..., "node": ..., "pin": ..., "state":
 * "running" | "pending" | "releasing"}; state defaults to running with a
 * node, pending without; releasing is spec->terminating. */
US_API int us_engine_upsert_pod_json(us_engine *e, const char *json, us_error *err);
/* The pod is gone.  A terminating pod frees its resources now rather than
 * at the end of its grace period; any other pod is lost, and its controller
 * recreates it pending under the same name (a gang below min_member goes
 * back to pending whole).  That name is the replacement's only until it is
 * reported under another workload (the pod was adopted by another owner):
 * then the replacement takes the first "<workload>-<k>" no pod holds.
 * US_ENOENT when no pod has that name. */
US_API int us_engine_remove_pod(us_engine *e, const char *name, us_error *err);

/* ---- cycles --------------------------------------------------------------- */

/* Run one scheduling cycle at time now (not before the engine's time):
 * terminating pods whose grace has ended leave, pipelined pods whose room
 * is free bind, then the full cycle of docs/scheduling.md runs.  The
 * engine's state follows its own decisions (a bound pod is running, an evicted one
 * terminating) until the caller reports otherwise.  Replaces the previous
 * cycle's decisions and events, then calls the event callback once per
 * event.  A failing policy never fails a cycle: it draws an event and the
 * last good policy is used. */
US_API int us_engine_run_cycle(us_engine *e, double now, us_error *err);

/* The engine's time: the latest now given to it (0 at first). */
US_API double us_engine_time(const us_engine *e);
/* Cycles run so far. */
US_API uint64_t us_engine_cycle_count(const us_engine *e);

typedef enum us_decision_op {
    US_DECISION_BIND,       /* bind pod to node now */
    US_DECISION_PIPELINE,   /* bind pod to node once waits_for have terminated */
    US_DECISION_EVICT       /* evict pod from node */
} us_decision_op;

/* One decision of the last cycle.  Strings and arrays are owned by the
 * engine and stay valid until the next us_engine_run_cycle or
 * us_engine_destroy. */
typedef struct us_decision_info {
    us_decision_op op;
    const char *op_name;             /* "bind", "pipeline", "evict" */
    const char *action;              /* "allocate", "reclaim", "preempt",
                                        "backgroundpods", "stalegangeviction"
                                        (evict: a gang below min_member is
                                        stopped whole); NULL for a pipelined
                                        pod that binds now its room is free */
    const char *pod;
    const char *workload;
    const char *node;
    const char *const *waits_for;    /* pipeline: pods it waits for */
    size_t nwaits_for;
    const char *evictor;             /* evict: the AI workload that needed the
                                        room (stalegangeviction: the gang
                                        itself), or NULL */
} us_decision_info;

/* One event of the last cycle (Kubernetes-style).  Same lifetime. */
typedef struct us_event_info {
    const char *type;                /* "Normal" or "Warning" */
    const char *reason;              /* "Evict", "NotScheduled", ... */
    const char *object;              /* the workload, or the policy */
    const char *message;
    const us_label *annotations;     /* Evict: evictor-action-type,
                                        num-evicted-pods, evictor-pod-group-name */
    size_t nannotations;
} us_event_info;

US_API size_t us_engine_decision_count(const us_engine *e);
/* Fill *out with decision i of the last cycle; US_ENOENT when out of range. */
US_API int us_engine_decision(const us_engine *e, size_t i, us_decision_info *out);
US_API size_t us_engine_event_count(const us_engine *e);
US_API int us_engine_event(const us_engine *e, size_t i, us_event_info *out);

/* A line a policy logged with log(...) during the last cycle (or since the
 * cycle before: lines logged while policies load come with the next
 * cycle).  Same lifetime as a decision.  At most 200 lines a cycle are
 * kept, each cut at 400 bytes; us_engine_policy_log_dropped counts those
 * left out. */
typedef struct us_policy_log_info {
    const char *file;                /* "placement.lua", or a helper's file */
    int line;                        /* 0 when unknown */
    const char *message;             /* the arguments, as tostring shows them,
                                        separated by spaces */
} us_policy_log_info;

US_API size_t us_engine_policy_log_count(const us_engine *e);
/* Fill *out with log line i of the last cycle; US_ENOENT when out of range. */
US_API int us_engine_policy_log(const us_engine *e, size_t i, us_policy_log_info *out);
/* Lines over the bound, left out in the last cycle. */
US_API unsigned long us_engine_policy_log_dropped(const us_engine *e);

/* Called once per event at the end of every cycle, in order.  The callback
 * may read the engine (counts, infos) but not change it: such calls fail
 * with US_EBUSY.  ev and its strings are valid during the call only. */
typedef void (*us_event_cb)(us_engine *e, const us_event_info *ev, void *data);
/* Register cb with data (borrowed, passed back as is); cb NULL removes it.
 * One callback per engine: a new one replaces the old.  Also allowed from
 * inside the callback: the change applies from the next event of the same
 * cycle on (NULL: no more events are delivered). */
US_API void us_engine_on_event(us_engine *e, us_event_cb cb, void *data);

/* ---- reading the state --------------------------------------------------------
 * Infos point into the engine's state and stay valid until the next call
 * that changes the engine (any upsert, remove, complete, reload, run_cycle)
 * or us_engine_destroy.  Indices run from 0 to count - 1, in a stable order
 * (creation order) between changes. */

typedef enum us_pod_phase {
    US_PHASE_PENDING,
    US_PHASE_PIPELINED,
    US_PHASE_RUNNING,
    US_PHASE_RELEASING      /* evicted or deleted, terminating */
} us_pod_phase;

typedef struct us_pod_info {
    const char *name;
    const char *workload;
    const char *node;        /* NULL when pending */
    us_pod_phase phase;
    const char *phase_name;  /* "pending", "pipelined", "running", "releasing" */
    int background;          /* non-zero: a background pod */
    int external;            /* non-zero: a pod of an external workload */
} us_pod_info;

typedef struct us_node_info {
    const char *name;
    const char *pool;
    us_resources capacity;
    us_resources used;       /* held by running and terminating pods */
    int unschedulable;
} us_node_info;

typedef struct us_queue_info {
    const char *name;
    const char *parent;      /* NULL for a root */
    us_resources allocated;  /* AI usage at the last cycle (children included) */
    us_resources fair_share; /* at the last cycle, rounded to whole units */
} us_queue_info;

typedef enum us_workload_phase {
    US_WORKLOAD_ACTIVE,
    US_WORKLOAD_COMPLETED,   /* listed while its pods are still leaving */
    US_WORKLOAD_DELETED
} us_workload_phase;

typedef struct us_workload_info {
    const char *name;
    const char *queue;
    us_workload_phase phase;
    int background;
    const char *blocked;     /* why it is never scheduled (a broken
                                background rule), or NULL */
    double running_since;    /* when its gang last started running; < 0 if
                                it does not run */
    int external;            /* non-zero: scheduled by someone else */
} us_workload_info;

US_API size_t us_engine_pod_count(const us_engine *e);
US_API int us_engine_pod(const us_engine *e, size_t i, us_pod_info *out);
US_API size_t us_engine_node_count(const us_engine *e);
US_API int us_engine_node(const us_engine *e, size_t i, us_node_info *out);
/* The node named name that is in the cluster (a removed one is not), found
 * by name: no pass over the nodes, and what is on it summed from the pods
 * on it when the engine can (a control plane reading back each node it
 * sends).  US_ENOENT when there is none (or name or out is NULL),
 * US_ENOMEM when memory runs out. */
US_API int us_engine_node_named(const us_engine *e, const char *name, us_node_info *out);
US_API size_t us_engine_queue_count(const us_engine *e);
US_API int us_engine_queue(const us_engine *e, size_t i, us_queue_info *out);
US_API size_t us_engine_workload_count(const us_engine *e);
US_API int us_engine_workload(const us_engine *e, size_t i, us_workload_info *out);

/* Why workload i's pods stayed pending at the last cycle: the
 * pending-reason annotation of its pending status event
 * (docs/scenario.md: "resources", "quota", "queue-limit", "node-selector",
 * "untolerated-taint", ..., and "not-created" under reported_pods: AI work
 * short of reported pods), "idle-resources" for background pods waiting
 * for idle room, "blocked" for a workload that breaks a scheduling rule;
 * NULL when none of its pods was pending then (or i is out of range).
 * Static string. */
US_API const char *us_engine_workload_pending_reason(const us_engine *e, size_t i);

/* GPUs now, in devices: capacity of the nodes in the cluster; held by
 * running and terminating pods of AI, background and external workloads
 * (a pipelined pod holds nothing yet); idle = capacity - the three (cordoned
 * nodes' GPUs included).  A plain value owned by the caller. */
typedef struct us_gpu_use {
    double capacity, ai, background, external, idle;
} us_gpu_use;

/* Fill *out with the GPU use of the state now.  US_EINVAL when e or out
 * is NULL. */
US_API int us_engine_gpu_use(const us_engine *e, us_gpu_use *out);

/* One phase of the last us_engine_run_cycle: its name and the wall-clock
 * seconds it took, summed over node pools.  The phases are the cycle's of
 * docs/scheduling.md: "snapshot", "eviction" (background pods taken out of
 * the plan; done in the snapshot's pass over the pods and counted there, so
 * always 0), "fairshare", "allocate", "victims" (reclaim and preempt),
 * "reoffer" (background re-offer), "commit".  All 0 before the first cycle.
 * name is static. */
typedef struct us_cycle_phase_info {
    const char *name;
    double seconds;
} us_cycle_phase_info;

US_API size_t us_engine_cycle_phase_count(const us_engine *e);
/* Fill *out with phase i; US_ENOENT when out of range. */
US_API int us_engine_cycle_phase(const us_engine *e, size_t i, us_cycle_phase_info *out);

/* What the last us_engine_run_cycle reused from the cycle before it,
 * summed over node pools (since 1.1): after a small change most nodes keep
 * their node class and most placement scores are kept, so the count of
 * Lua calls follows the change.  Nothing is kept with full_cycles, across
 * a change to the nodes' labels, taints, capacity or cordon, or (scores)
 * across a policy reload, nor a score whose call drew from math.random or
 * logged.  All 0 before the first cycle.  A plain value owned by the
 * caller. */
typedef struct us_cycle_reuse {
    unsigned long long policy_calls;      /* Lua policy function calls the cycle made */
    unsigned long long nodes_classed;     /* nodes put into node classes */
    unsigned long long nodes_class_kept;  /* of them, those that kept the last cycle's class */
    unsigned long long scores_kept;       /* placement scores taken from the last cycle, not asked again */
} us_cycle_reuse;

/* Fill *out with the last cycle's reuse.  US_EINVAL when e or out is NULL. */
US_API int us_engine_cycle_reuse(const us_engine *e, us_cycle_reuse *out);

/* ---- the state as a scenario ---------------------------------------------------
 * The engine's state now as a scenario document (docs/scenario.md), which
 * loads back (understory simulate, us_engine_state_json of the loaded
 * engine) into the same state at t=0: the engine's time is its t=0
 * (created_at and release_at are relative to it), every field written
 * out, cpu as "<millicores>m", memory as a string of bytes, objects in the
 * engine's order.  Pending pods are not listed (replicas stand for them);
 * a deleted or completed workload whose pods still terminate is written as
 * an external workload holding them; docs/embedding.md has the details.
 * On success *out is a NUL-terminated JSON text owned by the caller (free
 * it with us_free) and *len (when len is not NULL) its length; on failure
 * *out is NULL. */
US_API int us_engine_state_json(const us_engine *e, char **out, size_t *len, us_error *err);

/* Free memory the library handed to the caller (us_engine_state_json's
 * text).  NULL is fine.  Thread-safe. */
US_API void us_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
