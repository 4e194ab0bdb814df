/*
 * policysrc.h — where a policy file's text comes from: the policy
 * directory, or, for a file the directory does not hold, the default
 * policy compiled into the engine (the policies/ directory of the source
 * tree at build time).  A policy directory holds only the files it changes.
 *
 * Reads files only; compiles nothing.  Thread-safe.
 */
#ifndef US_POLICYSRC_H
#define US_POLICYSRC_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* The largest policy or helper file read. */
#define US_POLICYSRC_MAX ((long)16 << 20)

/* The compiled-in default of policy file m (us_policy_files order), and its
 * length.  Static text. */
const char *us_policysrc_default(int m, size_t *len);

/* dir is a readable directory that holds at least one of the three policy
 * files: 0.  Else -1 with err: "DIR/fairshare.lua: cannot read it: ..." when
 * the directory is missing or holds none of them (naming the first file, as
 * a directory that must hold all of them would), "DIR: not a directory". */
int us_policysrc_check_dir(const char *dir, us_err *err);

/* File m of dir, whole, in a malloc'd buffer the caller frees (NUL
 * terminated, *len bytes before the NUL); when dir has no such file, a
 * copy of the default and *is_default set.  0, or -1 with err naming the
 * path. */
int us_policysrc_read(const char *dir, int m, char **buf, size_t *len, bool *is_default, us_err *err);

#endif
