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

/* Length of the valid UTF-8 sequence starting s[0..n) (n >= 1): 1 to 4,
 * 0 when it is invalid, -1 when n cuts it short.  The rule of
 * us_utf8_invalid, one character at a time. */
int us_utf8_seq_len(const char *s, size_t n);

/* A malloc'd copy of s that is valid UTF-8: each invalid byte becomes the
 * four characters \xNN, and a sequence cut short at the very end (by a
 * truncated buffer) is dropped.  NULL when memory runs out. */
char *us_utf8_dup_valid(const char *s);

/* Make the message s (a buffer of cap bytes) safe to print, in place:
 * control characters other than newline and tab, which could drive a
 * terminal, become \xNN (C0, DEL) or \u00NN (C1); invalid UTF-8 bytes
 * become \xNN; a sequence cut short at the end is dropped.  What no longer
 * fits in cap is cut at a character boundary. */
void us_text_escape(char *s, size_t cap);

#endif
