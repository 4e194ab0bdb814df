/*
 * error.h — how the engine reports failure: a code and a message.
 *
 * Every fallible function returns 0 on success or -1 on failure and, when
 * given a non-NULL us_err, fills it.  The engine never aborts or exits on bad
 * input or a bad policy.  An us_err is a plain value owned by the caller.
 */
#ifndef US_ERROR_H
#define US_ERROR_H

/* The codes (US_OK, US_EINVAL, US_ENOMEM, US_EIO, US_EPOLICY, US_ENOENT,
 * US_EBUSY) are the public API's, defined once in bindings/understory.h. */
#include "understory.h"

typedef struct us_err {
    int code;
    char msg[1024];
} us_err;

/* Fill err (if non-NULL) with code and a printf-style message; returns -1 so
 * callers can `return us_err_set(...)`. */
int us_err_set(us_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Put a printf-style prefix before err's message (when err is non-NULL),
 * cutting the end if the two do not fit. */
void us_err_prefix(us_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The usual out-of-memory error. */
int us_err_nomem(us_err *err);

#endif
