/*
 * harvest.h — what the scheduler did with the cluster's GPUs, measured from
 * a simulation: per cycle and pool the GPUs held by AI and by background
 * pods and those idle, pending pods, queue quotas, GPUs per node; over the
 * run the GPU-seconds of each, the harvest ratio, background evictions with
 * the lower bound of those AI placement strictly needed, and how long AI
 * pods waited on background pods' grace periods.  docs/scenario.md
 * ("Figures") defines each figure.
 *
 * The simulator feeds it (us_hv_before before a cycle, us_hv_after after
 * it); renderers read it.  It only reads the state and the cycle's log and
 * owns copies of every name it keeps.  Not thread-safe.
 */
#ifndef US_HARVEST_H
#define US_HARVEST_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "state.h"

/* One pool after one cycle.  GPUs are whole devices: a device shared by
 * fractional AI pods counts once, as held by AI. */
typedef struct us_hv_pool {
    int gpus;            /* devices of the pool's nodes in the cluster */
    int ai, background;  /* devices held (running or releasing pods) */
    int idle;            /* gpus - ai - background */
    int pending_ai, pending_background;  /* pending pods of submitted workloads */
    int evictions;       /* background pods evicted in this cycle */
    int needed;          /* of which AI placement strictly needed (lower bound) */
} us_hv_pool;

/* A node after one cycle: devices held by AI and background pods; gpus < 0
 * when the node is not in the cluster. */
typedef struct us_hv_node {
    int16_t gpus, ai, background;
} us_hv_node;

typedef struct us_hv_cycle {
    double time;
    us_hv_pool *pools;   /* [npools] */
    us_hv_node *nodes;   /* [nnodes] */
    us_res *quota;       /* [nqueues]: summed over the pools with nodes;
                            a component is US_UNLIMITED when any is */
} us_hv_cycle;

/* Figures over the whole run, for one pool or for all. */
typedef struct us_hv_figures {
    double capacity, ai, background, idle;  /* GPU-seconds */
    double harvest_ratio;   /* background / (capacity - ai); < 0 when AI left none idle */
    int evictions, needed;
    size_t waits;           /* AI pods that waited on a background grace period */
    double wait_total, wait_p50, wait_p99;  /* seconds */
} us_hv_figures;

typedef struct us_hv_wait us_hv_wait;
typedef struct us_hv_bg us_hv_bg;

typedef struct us_harvest {
    double interval;       /* seconds each cycle's state stands for */
    char **pools;          /* [npools], sorted */
    size_t npools;
    char **nodes;          /* [nnodes], the state's node order */
    int *node_pool;        /* [nnodes] */
    int *node_order;       /* [nnodes]: node indices by name, for lookups */
    size_t nnodes, nqueues;
    us_hv_cycle *cycles;
    size_t ncycles, cap_cycles;
    double **waits;        /* [npools + 1]: finished waits, sorted; the last for all pools */
    size_t *nwaits, *cap_waits;
    /* working state between cycles */
    us_hv_wait *open;      /* AI pods pipelined onto background pods' room */
    size_t nopen, cap_open;
    us_hv_bg *bg;          /* background pods holding room before the cycle */
    size_t nbg, cap_bg;
} us_harvest;

/* Set up for a run on st (its nodes, pools and queues are fixed for the
 * run: nodes added later are already in the state, flagged removed).
 * 0, or -1 when memory runs out (h is then empty). */
int us_hv_init(us_harvest *h, const us_state *st, double interval);
void us_hv_free(us_harvest *h);

/* Before the cycle at time now (after the timeline's changes). */
int us_hv_before(us_harvest *h, const us_state *st);
/* After it: sample the state and read the cycle's decisions.  0 or -1. */
int us_hv_after(us_harvest *h, const us_state *st, double now, const us_cycle_log *log);

/* The index of the node named name, or -1.  Logarithmic. */
int us_hv_node_index(const us_harvest *h, const char *name);

/* Figures over the run for pool p, or for all pools when p < 0. */
void us_hv_figures_of(const us_harvest *h, int p, us_hv_figures *out);

#endif
