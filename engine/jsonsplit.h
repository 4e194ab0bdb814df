/*
 * jsonsplit.h — cutting a JSON document into pieces that cJSON can parse
 * one at a time, so that a large scenario never exists as one cJSON tree.
 *
 * us_jsplit checks the whole text against strict JSON (RFC 8259: no
 * leading zeros, no raw control characters in strings, strings of valid
 * UTF-8 by us_utf8_invalid's rule, \u escapes with
 * four hex digits and paired surrogates, whitespace only space, tab, CR
 * and LF, numbers of at most 63 characters, nesting at most
 * US_JSPLIT_DEPTH) and, when the document is an object, records where
 * each member's key and value lie and, for the members named in split
 * whose value is an array, where each element lies.  Every text it accepts
 * is one cJSON accepts, and each piece parsed alone gives the same value as
 * in the whole tree.  So a text it accepts holds no NUL byte and is valid
 * UTF-8 (a byte above 0x7f outside a string is not JSON).  A text it
 * refuses may still be JSON cJSON accepts (or not), so the caller then
 * parses the whole text with cJSON, whose verdict and error position stay
 * the reference.
 *
 * A us_jdoc owns its arrays (free with us_jdoc_free) and points into no
 * text: spans are offsets.  Reentrant; no global state.
 */
#ifndef US_JSONSPLIT_H
#define US_JSONSPLIT_H

#include <stdbool.h>
#include <stddef.h>

#define US_JSPLIT_DEPTH 256

typedef struct us_jspan {
    size_t off, len;
} us_jspan;

typedef struct us_jmember {
    us_jspan key;      /* the key, quotes included */
    us_jspan value;
    bool split;        /* named in split and an array: items are its elements */
    us_jspan *items;
    size_t nitems;
} us_jmember;

typedef struct us_jdoc {
    us_jmember *members;
    size_t n;
} us_jdoc;

/* 1: text is a strict-JSON object, *out filled; 0: it is not (*out empty);
 * -1: out of memory (*out empty).  split: NULL-terminated member names,
 * matched against keys written without escapes. */
int us_jsplit(const char *text, size_t len, const char *const *split, us_jdoc *out);
void us_jdoc_free(us_jdoc *d);

#endif
