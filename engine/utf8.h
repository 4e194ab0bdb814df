/*
 * utf8.h — UTF-8 validity, for input that is refused when it is not valid
 * and for text the engine makes itself (messages) that must be.
 */
#ifndef US_UTF8_H
#define US_UTF8_H

#include <stddef.h>

/* Offset of the first byte of s[0..n) that does not start a valid UTF-8
 * sequence (overlong forms, surrogates and code points past U+10FFFF are
 * invalid), or -1 when all of it is valid. */
long us_utf8_invalid(const char *s, size_t n);

/* A malloc'd copy of s that is valid UTF-8: each invalid byte becomes the
 * four characters \xNN, and a sequence cut short at the very end (by a
 * truncated buffer) is dropped.  NULL when memory runs out. */
char *us_utf8_dup_valid(const char *s);

#endif
