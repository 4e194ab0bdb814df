/*
 * watch.h — `understory simulate FILE --watch`: run the scenario, then run
 * it again on every save of the scenario or of a policy file, and print
 * what changed in the decisions and the summary since the run before.
 *
 * Files are watched with libuv file events on their directories (editors
 * often save by writing a new file and renaming it over the old one, which
 * a watch on the file itself would lose), debounced: a burst of events
 * within the debounce interval makes one run.  Every run loads the
 * scenario and the policies afresh; a file that does not load is reported
 * and watching goes on, compared against the last run that worked.
 *
 * Not thread-safe; runs its own libuv loop until the run limit, SIGINT or
 * SIGTERM.
 */
#ifndef US_WATCH_H
#define US_WATCH_H

#include <stdbool.h>
#include <stdio.h>

#include "sim.h"

typedef struct us_watch_opts {
    const char *scenario;       /* the scenario file */
    const char *policy_dir;     /* NULL: the built-in C policies */
    us_sim_opts sim;
    bool json;                  /* JSON reports: the output document, then diff documents */
    bool verbose;               /* text reports list every decision and pod */
    int max_runs;               /* stop after this many runs; 0: until a signal */
    unsigned debounce_ms;       /* 0: the default, 200 */
} us_watch_opts;

void us_watch_opts_default(us_watch_opts *o);

/* Watch and report on out until done.  Also watched: the directories that
 * the scenario's timeline reloads policies from.  0 when it stopped as
 * asked, or -1 with err when watching could not start or memory ran out. */
int us_watch_run(FILE *out, const us_watch_opts *o, us_err *err);

#endif
