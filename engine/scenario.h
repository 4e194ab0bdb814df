/*
 * scenario.h — loading a scenario document (the JSON format of DESIGN.md)
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

/* Quantities.  Each returns 0 and sets *out, or -1 when s is not a valid
 * quantity.  cpu: "500m", "8", "1.5" (cores) -> millicores; memory: "512Mi",
 * "80Gi", "1G", "1e3", "1000" (bytes) -> bytes. */
int us_parse_cpu(const char *s, int64_t *out);
int us_parse_memory(const char *s, int64_t *out);

#endif
