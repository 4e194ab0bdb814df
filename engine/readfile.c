/*
 * readfile.c — reads a policy file whole (readfile.h).
 *
 * It owns the only open() of policy files.  It must never block: a FIFO
 * opened for reading waits for a writer, a device may never reach end of
 * file, and a directory reads as garbage sizes.  So the path is stat'ed
 * before it is opened, opened with O_NONBLOCK (a FIFO swapped in between
 * cannot block the open) and checked again on the descriptor.
 */
#include "readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a file that is not regular is, for the message. */
static const char *kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/* 0 when st is a regular file within max bytes, else -1 with why. */
static int acceptable(const struct stat *st, size_t max, char *why, size_t nwhy) {
    if (!S_ISREG(st->st_mode)) {
        snprintf(why, nwhy, "it is %s, not a regular file", kind(st->st_mode));
        return -1;
    }
    if (st->st_size < 0 || (unsigned long long)st->st_size > (unsigned long long)max) {
        snprintf(why, nwhy, "larger than %zu bytes (%lld bytes)", max, (long long)st->st_size);
        return -1;
    }
    return 0;
}

int us_read_regular(const char *path, size_t max, char **buf, size_t *len, char *why, size_t nwhy) {
    struct stat st;
    int fd = -1, rc = -1;
    size_t size, got = 0;

    *buf = NULL;
    *len = 0;
    if (stat(path, &st) != 0) {
        snprintf(why, nwhy, "%s", strerror(errno));
        goto done;
    }
    if (acceptable(&st, max, why, nwhy) < 0) goto done;
    fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, nwhy, "%s", strerror(errno));
        goto done;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(why, nwhy, "%s", strerror(errno));
        goto done;
    }
    if (acceptable(&st, max, why, nwhy) < 0) goto done;
    size = (size_t)st.st_size;
    if (!(*buf = malloc(size + 1))) {
        snprintf(why, nwhy, "out of memory");
        goto done;
    }
    while (got < size) {
        ssize_t k = read(fd, *buf + got, size - got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            snprintf(why, nwhy, "%s", strerror(errno));
            goto done;
        }
        if (k == 0) {
            snprintf(why, nwhy, "the file changed while it was read");
            goto done;
        }
        got += (size_t)k;
    }
    (*buf)[size] = '\0';
    *len = size;
    rc = 0;
done:
    if (rc < 0) {
        free(*buf);
        *buf = NULL;
    }
    if (fd >= 0) close(fd);
    return rc;
}
