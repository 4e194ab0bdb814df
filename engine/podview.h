/*
 * podview.h — what one node pool's snapshot reads from the pods (plan.h),
 * kept from one cycle to the next and brought up to date from the pods
 * changed since, so that a cycle after a small change reads the change,
 * not every pod.
 *
 * For each pod it records what the pod adds to the pool's plan (us_pv_*
 * bits, its node's position): held in the AI view, wanted, terminating,
 * pending and placeable; and from those, per workload, the counts held,
 * wanted and terminating and its pending pods; per node, the pods that
 * hold room there and what kind of work holds it; and the pool's
 * terminating pods and its background pods running and pending.  Every
 * list is in pod order, as one pass over the pods in order makes it.
 *
 * What a pod adds depends on the pod (its state, node, device, gone and
 * named flags: every change to them is in the state's journal, and from
 * there in its log of changed pods, us_state_changes_since), on its
 * workload's kind in the pool (us_pv_wkind: a workload that completes or
 * is blocked changes it; its pods, found in the span of pods it has had,
 * are read again),
 * and on the pool's node list (the state's node version).  An update
 * reads again only the pods the log names since the last, and those of
 * workloads whose kind changed; it reads every pod of the pool instead
 * (a rebuild) when it cannot follow: the first time, after a gap in the
 * log (pods or workloads renumbered, the journal lost), when the nodes
 * changed, or when the change is most of the pods.  Checking builds
 * (-DUS_CHECK_INVARIANTS) rebuild after every update that followed and
 * compare (invariant "pod-view").
 *
 * Owned by the pool's hints in a cycle cache (cyclecache.h), or by one
 * plan when it has none (full cycles).  Not thread-safe.
 */
#ifndef US_PODVIEW_H
#define US_PODVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "poolpods.h"
#include "state.h"
#include "use.h"
#include "usesum.h"

/* A workload's kind in a pool, as the snapshot reads its pods
 * (us_pv_wkind). */
enum {
    US_PVW_OWN = 1,        /* of the pool (its pods are read wherever they are) */
    US_PVW_AI = 2,         /* an AI job of the pool (us_gang_is_job) */
    US_PVW_BG = 4,         /* background work of the pool the re-offer offers */
    US_PVW_FIXED = 8,      /* nothing may move its running pods (us_plan_holds_fixed) */
    US_PVW_BACKGROUND = 16 /* background work (us_workload.background) */
};

/* What a pod adds to its pool's snapshot. */
enum {
    US_PV_READ = 1,       /* read: of the pool's workloads or on its nodes, not gone */
    US_PV_WANTED = 2,     /* counted in its workload's demand (AI, running or wanting to) */
    US_PV_HELD = 4,       /* holds room in the AI view as its job's (= US_PF_HELD) */
    US_PV_VIEW = 8,       /* holds room in the AI view (an AI pod held, or a fixed one) */
    US_PV_TERMW = 16,     /* releasing: counted in its workload's terminating */
    US_PV_PEND = 32,      /* pending and placeable: in its workload's pending list */
    US_PV_AT = 64,        /* holds room on a pool node: in that node's list */
    US_PV_KAI = 128,      /* tells the node's tie-break AI holds it (US_NODE_HOLDS_AI) */
    US_PV_KBG = 256,      /* tells it background work runs there (US_NODE_RUNS_BG) */
    US_PV_TLIST = 512,    /* terminating on a pool node: in the terminating list */
    US_PV_BGRUN = 1024,   /* background work the re-offer offers, running here */
    US_PV_BGPEND = 2048   /* the same, pending and placeable */
};

/* A list of pod indices, ascending. */
typedef struct us_pv_list {
    int *v;
    int n, cap;
    bool own;             /* v is its own allocation, not part of the block */
} us_pv_list;

/* The lists, by number: the three of the pool, then one per node
 * position, then one per workload of its pending pods. */
enum { US_PVL_TERMINATING, US_PVL_BG_RUNNING, US_PVL_BG_PENDING, US_PVL_NODES };

typedef struct us_podview {
    bool valid;
    /* what it was made for: it follows only while these hold */
    uint64_t generation, pods_version, nodes_version, mark;
    bool reported_pods;   /* us_cycle_opts.reported_pods */
    size_t npods, cap_pods;
    uint16_t *rec;        /* [npods] US_PV_* */
    int *at;              /* [npods] its node's position, where rec has US_PV_AT */
    size_t nnodes, nworkloads, cap_workloads;
    uint8_t *wkind;       /* [nworkloads] US_PVW_* it was read with */
    int *held, *wanted, *terminating;  /* [nworkloads] */
    int *first, *last;    /* [nworkloads] a span holding every pod of it read
                             (first > last: none), found again when its kind
                             changes; it only widens until a rebuild */
    int *nk_ai, *nk_bg;   /* [nnodes] pods with US_PV_KAI, US_PV_KBG there */
    uint8_t *node_kind;   /* [nnodes] US_NODE_HOLDS_AI | US_NODE_RUNS_BG (plan.h) */
    us_pv_list *lists;    /* [nlists] */
    size_t nlists;
    int *block;           /* the lists a rebuild made, in one allocation */
    /* an update's scratch, reused */
    struct us_pv_op *ops, *grouped;
    size_t nops, cap_ops, cap_grouped;  /* cap_grouped: of grouped and touched */
    int *nop;             /* [nlists] ops per list, zero between updates */
    size_t cap_nop;
    int *touched;         /* lists with ops, in the order first met */
    uint64_t *marks;      /* a bit per pod: read again (zero between updates) */
    size_t cap_marks;
    int *changed;
    size_t cap_changed;
    /* how the last update went, for profiles and tests */
    size_t read;          /* pods whose part it worked out */
    bool rebuilt;         /* every pod of the pool was read */
} us_podview;

/* What an update reads the pods against: the pool's nodes, its
 * workloads' kinds, and which pods to read when rebuilding. */
typedef struct us_podview_in {
    us_state *st;
    const int *pos;        /* [st->nnodes] node -> position in the pool, or -1 */
    size_t nnodes;         /* the pool's nodes */
    const uint8_t *wkind;  /* [st->nworkloads] US_PVW_* */
    bool reported_pods;
    const us_pod_set *set; /* the pool's pods (poolpods.h), NULL: every pod */
    bool keep;             /* will be updated again: log the changes from now on */
    /* When not NULL, a rebuild adds the room each pod holds in the AI view
     * to ai and what a running background pod the re-offer offers takes to
     * bg_total[its node's position], in pod order, as it reads the pods
     * (the snapshot's own sums, when the ledger cannot tell them): one
     * read of every pod, not two.  An update that follows adds nothing. */
    us_usesum *ai;
    us_bg_total *bg_total;
} us_podview_in;

/* The kind of workload w in the pool: mine says it is of the pool. */
uint8_t us_pv_wkind(const us_workload *w, bool mine);

/* Bring v up to date with the pods (rebuilt when it cannot follow).
 * 0; -1 when memory runs out (v is then empty and invalid); -2 in checking
 * builds when what it followed is not what reading every pod gives
 * (*broken says so). */
int us_podview_update(us_podview *v, const us_podview_in *in, const char **broken);

void us_podview_free(us_podview *v);

/* List k (US_PVL_*, us_pv_node_list, us_pv_pending_list): never NULL, so
 * that a reader may offset or copy an empty list (a workload added since
 * the last rebuild has no storage yet). */
static inline const int *us_pv_list_of(const us_podview *v, size_t k, size_t *n) {
    static const int none[1];
    *n = (size_t)v->lists[k].n;
    return v->lists[k].v ? v->lists[k].v : none;
}
static inline size_t us_pv_node_list(size_t pos) { return US_PVL_NODES + pos; }
static inline size_t us_pv_pending_list(const us_podview *v, size_t w) {
    return US_PVL_NODES + v->nnodes + w;
}

#endif
