/*
 * readfile.h — read a policy file whole, refusing anything but a regular
 * file before it can block (a FIFO, a device, a directory).
 */
#ifndef US_READFILE_H
#define US_READFILE_H

#include <stddef.h>

/* Read path whole into a malloc'd buffer (*buf, NUL-terminated, *len bytes;
 * the caller frees it).  Refused at once, with *why saying what the path is,
 * when it is not a regular file or is larger than max bytes.  Returns 0, or
 * -1 with *why filled ("is a FIFO, not a regular file", ...) and *buf NULL. */
int us_read_regular(const char *path, size_t max, char **buf, size_t *len, char *why, size_t nwhy);

#endif
