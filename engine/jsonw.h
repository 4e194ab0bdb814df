/*
 * jsonw.h — writing a JSON document value by value, to one of two sinks:
 * text on a FILE, streamed, formatted byte for byte as cJSON_Print formats
 * the same tree (tabs, "key":<tab>value, arrays on one line); or a cJSON
 * tree, built in memory.  The output document is described once (output.c)
 * and rendered to either: the text sink keeps only the value being written,
 * so writing a document of a million pods costs no tree and no copy of the
 * text; the tree sink serves callers that want the values (the Lua module).
 *
 * Errors are sticky: after the first failure (out of memory, a write error,
 * nesting deeper than US_JW_DEPTH) every call is ignored, and us_jw_finish
 * reports it.  A us_jw is a plain value owned by its caller; not
 * thread-safe.  The FILE is the caller's (never closed here).
 */
#ifndef US_JSONW_H
#define US_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "error.h"

#define US_JW_DEPTH 64    /* containers open at once */
#define US_JW_BUF 32768   /* text buffered before each write to the FILE */

typedef struct us_jw {
    FILE *f;                        /* text sink; NULL: tree sink */
    int depth;                      /* containers open */
    bool object[US_JW_DEPTH];       /* text: container is an object (else array) */
    size_t count[US_JW_DEPTH];      /* text: values written in it so far */
    cJSON *root;                    /* tree: the document */
    cJSON *open[US_JW_DEPTH];       /* tree: the open containers */
    int failed;                     /* 0, or US_ENOMEM / US_EIO / US_EINVAL */
    size_t n;                       /* text: bytes buffered */
    char *buf;                      /* text: US_JW_BUF bytes, owned */
} us_jw;

/* Start a document on f (text) or in memory (tree).  Every document started
 * is ended with us_jw_finish, which frees what the writer holds. */
void us_jw_text(us_jw *w, FILE *f);
void us_jw_tree(us_jw *w);

/* Each value goes under key in the open object, or at the end of the open
 * array (key NULL), or is the document itself (nothing open, key NULL). */
void us_jw_begin_object(us_jw *w, const char *key);
void us_jw_begin_array(us_jw *w, const char *key);
void us_jw_end(us_jw *w);                          /* closes the last one opened */
void us_jw_string(us_jw *w, const char *key, const char *s); /* NULL: null */
void us_jw_number(us_jw *w, const char *key, double v);      /* as cJSON prints it */
/* An integer, exact at any magnitude: beyond 1e15 cJSON would print a
 * double with an exponent, so the tree holds such a value as raw text
 * (cJSON_Raw, valuedouble also set). */
void us_jw_int(us_jw *w, const char *key, int64_t v);
void us_jw_bool(us_jw *w, const char *key, bool v);
void us_jw_null(us_jw *w, const char *key);
/* A finished cJSON value, taken (the text sink prints and deletes it; the
 * tree sink links it in).  NULL counts as out of memory. */
void us_jw_take(us_jw *w, const char *key, cJSON *item);

/* Ends the document: text is flushed to the FILE (not fflush'd), the tree
 * handed to *tree (NULL for the text sink).  0, or -1 with err filled when
 * anything failed or a container is still open (the tree is then freed). */
int us_jw_finish(us_jw *w, cJSON **tree, us_err *err);

/* The cJSON integer value us_jw_int puts in a tree; NULL when out of memory. */
cJSON *us_jw_int_item(int64_t v);

/* tree as cJSON_Print prints it (its numbers without a printf each), in a
 * string the caller frees with free() (cJSON's default allocator, as for
 * cJSON_Print's); NULL when out of memory or nested deeper than
 * US_JW_DEPTH.  The tree is only read. */
char *us_jw_print(const cJSON *tree);

#endif
