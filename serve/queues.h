/*
 * queues.h — KAI's Queue objects into the engine's queue tree (queues.c).
 */
#ifndef SV_QUEUES_H
#define SV_QUEUES_H

#include <cJSON.h>
#include <stddef.h>

#include "informer.h"
#include "understory.h"

typedef struct sv_queues sv_queues;

/* Queues for engine e (borrowed); NULL when out of memory. */
sv_queues *sv_queues_new(us_engine *e);
void sv_queues_free(sv_queues *q);

/* The informer callback for scheduling.run.ai/v2 queues (ud: the
 * sv_queues).  Each queue taken is printed as the scenario object the
 * engine got; one whose parent is not there yet waits for it. */
void sv_queues_event(void *ud, sv_event ev, const cJSON *obj);

/* Queues still waiting for their parent. */
size_t sv_queues_waiting(const sv_queues *q);

#endif
