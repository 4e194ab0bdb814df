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
#define US_POLICYSRC_MAX ((size_t)16 << 20)

/* The compiled-in default of policy file m (us_policy_files order), and its
 * length.  Static text. */
const char *us_policysrc_default(int m, size_t *len);

/* dir is a directory that holds at least one of the three policy files:
 * 0.  Else -1 with err: "cannot open the directory: ...", "not a
 * directory", or "holds none of fairshare.lua, ...".  Messages do not name
 * the directory: callers do, once. */
int us_policysrc_check_dir(const char *dir, us_err *err);

/* File m of dir, whole, in a malloc'd buffer the caller frees (NUL
 * terminated, *len bytes before the NUL); when dir has no such file, a
 * copy of the default and *is_default set.  Only a regular file is read.
 * 0, or -1 with err: "placement.lua: cannot read it: ...". */
int us_policysrc_read(const char *dir, int m, char **buf, size_t *len, bool *is_default, us_err *err);

#endif
