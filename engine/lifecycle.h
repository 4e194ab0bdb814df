/*
 * lifecycle.h — how workloads, pods and nodes change over time outside a
 * scheduling decision: submission (controllers create pods), deletion,
 * completion, nodes joining and leaving, cordons, grace periods ending, and
 * the controller recreating an evicted pod.
 *
 * These are the state transitions a cluster makes by itself; the simulator
 * drives them from a timeline and the embedding API from its caller.  They
 * never place a pod (cycle.c does).  Every function returns 0, or -1 when
 * memory runs out.  Not thread-safe.
 */
#ifndef US_LIFECYCLE_H
#define US_LIFECYCLE_H

#include "state.h"

/* Submit workload w: its controller creates the pods it lacks (a daemonset
 * one per matching node of its pool, others up to `replicas`). */
int us_life_submit(us_state *st, int w, double now);
/* Submit every workload waiting with submit_at <= now, in one pass over
 * the pods; *any is set when one was. */
int us_life_submit_due(us_state *st, double now, bool *any);
/* Delete w: pending pods vanish, running pods terminate (releasing). */
int us_life_delete(us_state *st, int w, double now);
/* Complete w: its pods finish and free their resources at once. */
int us_life_complete(us_state *st, int w, double now);
/* us_life_delete and us_life_complete given w's pods (pods[n]: every pod
 * of w, any others are passed over), without compacting: pods marked gone
 * stay in the array until the caller compacts it (us_state_compact_pods).
 * A control plane removes workloads one at a time; a pass over every pod
 * for each would be quadratic. */
int us_life_delete_listed(us_state *st, int w, const int *pods, size_t n, double now);
int us_life_complete_listed(us_state *st, int w, const int *pods, size_t n, double now);
/* Complete the n workloads ws[] (indices, each once or more) in one pass
 * over the pods: what n calls of us_life_complete do, linear in pods. */
int us_life_complete_many(us_state *st, const int *ws, size_t n, double now);

int us_life_add_node(us_state *st, int n, double now);
/* Whether a live pod holds name: 1 when one does, 0 when none, -1 when out
 * of memory. */
typedef int (*us_life_held_fn)(void *ctx, const char *name);
/* us_life_add_node for node n just appended, which no pod refers to yet,
 * with the caller's own index of live pod names: the cost is the
 * DaemonSets', not a pass over every pod. */
int us_life_add_new_node(us_state *st, int n, double now, us_life_held_fn held, void *ctx);
/* us_life_submit_due for the workloads from index first on, which have no
 * pods yet (a caller that appends workloads and submits them in batches),
 * with the caller's index of live pod names: the cost is the new
 * workloads' pods, not a pass over every pod and workload. */
int us_life_submit_new(us_state *st, size_t first, double now, us_life_held_fn held, void *ctx,
                       bool *any);
/* The node leaves: its daemonset pods go with it; other pods on it are
 * lost and recreated pending.  A gang left below min_member is not touched
 * here: the next cycle stops the rest of it, with a decision per pod
 * (us_commit_cycle_start), so a control plane that applies decisions
 * sees every pod the engine stops. */
int us_life_remove_node(us_state *st, int n, double now);
/* The same given the pods on n and pinned to n (pods[npods]; others are
 * passed over), without compacting: pods marked gone stay in the array
 * until the caller compacts it (us_state_compact_pods). */
int us_life_remove_node_listed(us_state *st, int n, const int *pods, size_t npods, double now);
void us_life_cordon(us_state *st, int n, bool cordoned);

/* Evict a pod: it terminates (releasing for its grace period, or gone at
 * once with grace 0) and, if its workload is active, the controller
 * recreates it pending under the same name.  reported: the pods are the
 * caller's (us_cycle_opts.reported_pods): a running pod releases even with
 * grace 0, until the next cycle (a deleted pod is there until its
 * deletion is seen; the caller holds it by reporting it terminating), and
 * a pipelined pod, which the cluster never bound, stays the same pod,
 * pending.  Returns the new pod's index, or -2 when none was created, or
 * -1 when memory runs out. */
int us_life_evict(us_state *st, int pod, double now, bool reported);

/* Releasing pods whose grace has ended leave, and pods marked gone are
 * dropped (call before a cycle); no pass over the pods while the state
 * knows none is due (us_state.next_release).  0; -2 in checking builds
 * when a pod was due that the state did not know of (invariant
 * "release-times": a write that skipped us_pod_touch), nothing done. */
int us_life_expire(us_state *st, double now);
/* Does a pod's grace end by now, or has a pod left?  What the state knows
 * without a pass (us_state.next_release), with the pods changed since
 * folded in; true when it does not know.  False means us_life_expire(st,
 * now) has nothing to do. */
bool us_life_expiry_due(us_state *st, double now);

/* A present node's labels or taints changed: active daemonsets whose
 * selector now matches (and that tolerate its taints) get a pending pod on
 * it; the pods of those that no longer match terminate (not recreated),
 * except a running one that only a NoSchedule taint would keep off, as
 * Kubernetes' DaemonSet controller does.  The state's node spec version
 * moves (us_state_node_specs_changed). */
int us_life_node_changed(us_state *st, int n, double now);
/* The same given the pods pinned to n (pods[np]; others are passed over),
 * without compacting, new pods named clear of the names held says are
 * live (NULL: a pass over the pods finds them). */
int us_life_node_changed_listed(us_state *st, int n, const int *pods, size_t np, double now,
                                us_life_held_fn held, void *ctx);

/* The controller of w scales to replicas (not a daemonset): missing pods
 * are created pending; extra ones terminate, newest first, pending before
 * pipelined before running.  The gang's start time is kept. */
int us_life_scale(us_state *st, int w, int replicas, double now);
/* The same given w's pods (pods[n]: every pod of w, others are passed
 * over), without compacting (pods marked gone stay until the caller
 * compacts), new pods named clear of the names held says are live (NULL:
 * a pass over the pods finds them). */
int us_life_scale_listed(us_state *st, int w, int replicas, const int *pods, size_t n, double now,
                         us_life_held_fn held, void *ctx);

/* A pod was lost outside a decision (its node failed it, a bind failed, the
 * cluster reports it gone).  A releasing pod just leaves.  Any other pod
 * goes back to pending when its workload is active: as a new incarnation
 * (newest, for victim order) when recreated, as the same one when it
 * merely failed to bind (recreated false); otherwise it leaves.  A gang
 * left below min_member is stopped by the next cycle (see
 * us_life_remove_node).  A pod marked gone stays in the array until the
 * caller compacts it (us_state_compact_pods): a control plane reports pods
 * gone one at a time, and a pass over every pod for each would be
 * quadratic. */
int us_life_pod_lost(us_state *st, int pod, bool recreated, double now);

#endif
