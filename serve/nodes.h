/*
 * nodes.h — Kubernetes Nodes into the engine: each as a scenario-format
 * node object (allocatable cpu, memory and nvidia.com/gpu; labels; pool
 * from kai.scheduler/node-pool; cordoned when spec.unschedulable or not
 * Ready; taints), sent only when what the engine sees of it changed (a
 * status heartbeat changes nothing it sees), and logged on standard output
 * as the engine has it ("node NAME: pool ..., gpu N, ...").
 *
 * A node's allocatable can drop below what its pods hold: a GPU gone bad
 * (the device plugin then reports fewer), memory reserved anew.  Kubernetes
 * keeps those pods running, and the engine refuses a capacity below them
 * (us_engine_upsert_node).  The rest of the update (a cordon, a taint, a
 * label) must not wait until they leave, and the room the node lost must
 * not be offered: the node goes in with each resource that is short
 * raised to what its pods hold, so nothing new fits there, and the
 * capacity it reports is tried again before each cycle (sv_nodes_retry)
 * until its pods leave room for it.  Fractional pods may hold more
 * devices than their sum (a device each, half used): the node is then
 * raised to the fewest devices that hold them.  Only when even that is
 * refused (pods planned there) does a short resource keep the capacity
 * the engine had.
 *
 * Owned by serve; not thread-safe (serve runs on one loop).
 */
#ifndef SV_NODES_H
#define SV_NODES_H

#include <stddef.h>

#include <cJSON.h>

#include "informer.h"
#include "understory.h"

typedef struct sv_nodes sv_nodes;

/* A feed into e (not owned), or NULL when out of memory. */
sv_nodes *sv_nodes_new(us_engine *e);
void sv_nodes_free(sv_nodes *n);

/* A Node from the informer: added or changed (sent when the engine would
 * see a change), or deleted (removed from the engine). */
void sv_nodes_event(sv_nodes *n, sv_event ev, const cJSON *node);

/* The nodes taken with more than they report: their reported capacity
 * tried again, taken once their pods leave room for it,
 * else raised to what they hold now.  Called with the pods synced. */
void sv_nodes_retry(sv_nodes *n);

/* How many nodes the engine has with more than they report. */
size_t sv_nodes_short(const sv_nodes *n);

#endif
