/*
 * statejson.h — a state as a scenario document (statejson.c): what the
 * engine's public us_engine_state_json and `understory import --canonical`
 * write.  Reads the state, never changes it.  Not thread-safe (it reads a
 * state its owner must not change meanwhile).
 */
#ifndef US_STATEJSON_H
#define US_STATEJSON_H

#include <cJSON.h>

#include "state.h"

/* The state at time now as a scenario document named name (now is its
 * t=0).  0 and *doc (owned by the caller, cJSON_Delete), or -1 when memory
 * runs out (*doc NULL). */
int us_statejson_write(const us_state *st, double now, const char *name, cJSON **doc);

#endif
