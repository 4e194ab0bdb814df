/*
 * events.h — what a cycle produces: decisions (bind, pipeline, evict) and
 * Kubernetes-style events, appended in the order they are made.
 *
 * A us_cycle_log owns copies of every string in it; us_cycle_log_free
 * releases them.  Not thread-safe.
 */
#ifndef US_EVENTS_H
#define US_EVENTS_H

#include <stddef.h>

#include "error.h"
#include "state.h"

typedef enum us_op { US_OP_BIND, US_OP_PIPELINE, US_OP_EVICT } us_op;
extern const char *const us_op_names[];      /* "bind", "pipeline", "evict" */

/* Which phase of the cycle made a decision. */
typedef enum us_action {
    US_ACT_ALLOCATE,
    US_ACT_RECLAIM,
    US_ACT_PREEMPT,
    US_ACT_BACKGROUND,   /* background re-offer: "backgroundpods" */
    US_ACT_STALE_GANG,   /* a gang fell below min_member: "stalegangeviction" */
    US_ACT_NONE          /* bookkeeping: a pipelined pod binding later */
} us_action;
extern const char *const us_action_names[];  /* "allocate", ..., "backgroundpods" */

typedef struct us_decision {
    us_op op;
    us_action action;
    char *pod;
    char *node;
    char **waits_for;     /* pipeline: pods whose release it waits for */
    size_t nwaits;
    char *evictor;        /* evict: the workload that needed the room; may be NULL */
    int workload;         /* the pod's workload (an index into the state's
                             workloads, which a cycle never renumbers) */
} us_decision;

typedef struct us_event {
    const char *type;     /* "Normal" or "Warning" (static) */
    char *reason;
    char *object;         /* workload name, or policy name for policy events */
    char *message;
    us_labels annotations;
} us_event;

/* A line a policy logged with log(...): where, and what (policy.h bounds
 * its length and how many a cycle keeps). */
typedef struct us_log_line {
    char *file;           /* "placement.lua", or a helper module's file */
    int line;             /* 0 when unknown */
    char *text;
} us_log_line;

typedef struct us_cycle_log {
    us_decision *decisions;
    size_t ndecisions, cap_decisions;
    us_event *events;
    size_t nevents, cap_events;
    us_log_line *lines;   /* policy log lines, in the order logged */
    size_t nlines, cap_lines;
    unsigned long dropped_lines;  /* lines over the bound, not kept */
} us_cycle_log;

void us_cycle_log_init(us_cycle_log *log);
void us_cycle_log_free(us_cycle_log *log);

/* Append a decision about pod, of workload (its index); strings are
 * copied; waits may be NULL.  0 or -1. */
int us_log_decision(us_cycle_log *log, us_op op, us_action act, const char *pod, int workload,
                    const char *node, const char *const *waits, size_t nwaits,
                    const char *evictor);

/* Append an event with a printf-style message.  Annotations are given as a
 * NULL-terminated list of key, value strings (copied).  0 or -1. */
int us_log_event(us_cycle_log *log, const char *type, const char *reason,
                 const char *object, const char *const *annotations,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Append a policy log line (strings copied).  0 or -1. */
int us_log_line_add(us_cycle_log *log, const char *file, int line, const char *text);

#endif
