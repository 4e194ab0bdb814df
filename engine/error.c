/*
 * error.c — filling us_err values.
 */
#include "error.h"
#include "utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>


int us_err_set(us_err *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        /* names and policy errors reach terminals: no escape sequences */
        us_text_escape(err->msg, sizeof err->msg);
    }
    return -1;
}

int us_err_nomem(us_err *err) {
    return us_err_set(err, US_ENOMEM, "out of memory");
}

void us_err_prefix(us_err *err, const char *fmt, ...) {
    if (!err) return;
    char tail[sizeof err->msg];
    memcpy(tail, err->msg, sizeof tail);
    tail[sizeof tail - 1] = '\0';
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof err->msg) return;
    size_t room = sizeof err->msg - (size_t)n, len = strlen(tail);
    if (len >= room) len = room - 1;
    memcpy(err->msg + n, tail, len);
    err->msg[(size_t)n + len] = '\0';
    us_text_escape(err->msg, sizeof err->msg);
}
