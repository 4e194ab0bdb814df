/*
 * error.c — filling us_err values.
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

int us_err_set(us_err *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int us_err_nomem(us_err *err) {
    return us_err_set(err, US_ENOMEM, "out of memory");
}
