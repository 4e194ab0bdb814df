/*
 * scenario.h — loading a scenario document (the JSON format of docs/scenario.md)
 * into a cluster state plus a timeline.
 *
 * Loading is all or nothing: on any error the scenario is left empty, err
 * names the JSON path and what is wrong (`workloads[3].queue: "team-z" is not
 * a queue`), and nothing else has happened.  Any bytes are safe to load.
 *
 * A us_scenario owns its state and timeline; free with us_scenario_free.
 * Not thread-safe.
 */
#ifndef US_SCENARIO_H
#define US_SCENARIO_H

#include <stddef.h>

#include "error.h"
#include "state.h"

typedef enum us_tl_action {
    US_TL_SUBMIT,       /* workload */
    US_TL_DELETE,       /* workload */
    US_TL_COMPLETE,     /* workload */
    US_TL_ADD_NODE,     /* node (appended to state.nodes with removed=true until then) */
    US_TL_REMOVE_NODE,  /* node */
    US_TL_CORDON,       /* node */
    US_TL_UNCORDON,     /* node */
    US_TL_RELOAD_POLICIES /* dir */
} us_tl_action;
extern const char *const us_tl_action_names[]; /* "submit", "delete", ... */

typedef struct us_tl_entry {
    double at;
    us_tl_action action;
    int workload;         /* index, for workload actions; else -1 */
    int node;             /* index, for node actions; else -1 */
    char *dir;            /* reload_policies: directory, resolved against the
                             scenario file's directory; else NULL */
} us_tl_entry;

typedef struct us_scenario {
    char *name;
    double cycle_interval;   /* seconds; default 10 */
    double horizon;          /* seconds; < 0: until nothing changes (cap 1,000 cycles) */
    us_state state;
    us_tl_entry *timeline;   /* sorted by `at`, stable (file order breaks ties) */
    size_t ntimeline;
} us_scenario;

/* Workloads submitted from the timeline (`"workload": {...}` with action
 * submit) are appended to state.workloads in US_WL_WAITING with submit_at set
 * to the action's time.  Pre-existing pods (`pods`) are created running on
 * their node.  Daemonset pods are not created here: the simulator creates
 * them when the workload is submitted. */
int us_scenario_load_file(us_scenario *sc, const char *path, us_err *err);
/* origin is the document's path, used to resolve relative dirs (may be NULL);
 * messages name JSON paths only: callers prefix the file name. */
int us_scenario_load_string(us_scenario *sc, const char *json, size_t len,
                            const char *origin, us_err *err);
void us_scenario_free(us_scenario *sc);

/* One object at a time, for the embedding API: parse and validate a node,
 * queue or workload object of the scenario format on its own, with the same
 * checks and messages as a whole document, paths starting at path ("node":
 * `node.gpu: ...`).  On success *out is filled and owned by the caller (free
 * with us_node_free / us_queue_free / us_workload_free, or hand it to the
 * state); on failure *out is empty and err says why.  Uniqueness of the
 * name is the caller's to check.
 *   queue: the parent is looked up in st (out->parent, or -1 for a root);
 *     whether it makes a cycle or holds workloads is the caller's to check.
 *   workload: the queue is looked up in st and must be a leaf; submit_at
 *     and duration are read (0 and -1 when absent); `pods` is refused, as
 *     pre-existing pods only make sense in a whole scenario.  Run-time
 *     fields are initial (waiting, never started). */
struct cJSON;
int us_scenario_parse_node(const struct cJSON *o, const char *path, us_node *out, us_err *err);
int us_scenario_parse_queue(const struct cJSON *o, const us_state *st, const char *path,
                            us_queue *out, us_err *err);
int us_scenario_parse_workload(const struct cJSON *o, const us_state *st, const char *path,
                               us_workload *out, us_err *err);

/* Quantities.  Each returns 0 and sets *out, or -1 when s is not a valid
 * quantity.  cpu: "500m", "8", "1.5" (cores) -> millicores; memory: "512Mi",
 * "80Gi", "1G", "1e3", "1000" (bytes) -> bytes. */
int us_parse_cpu(const char *s, int64_t *out);
int us_parse_memory(const char *s, int64_t *out);

#endif
