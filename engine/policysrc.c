/*
 * policysrc.c — reading policy files, falling back to the compiled-in
 * defaults (policysrc.h).  The defaults' text is generated at build time
 * from the three files in policies/ (Makefile: default_policies.c).
 *
 * Owns file reading for policies only; it must never compile or run Lua.
 */
#include "policysrc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "policy.h"

/* Generated: the three default files, in us_policy_files order. */
extern const char *const us_policysrc_default_text[US_POLICY_NFN];
extern const size_t us_policysrc_default_len[US_POLICY_NFN];

const char *us_policysrc_default(int m, size_t *len) {
    if (m < 0 || m >= US_POLICY_NFN) {
        *len = 0;
        return "";
    }
    *len = us_policysrc_default_len[m];
    return us_policysrc_default_text[m];
}

static int path_of(char *path, size_t n, const char *dir, const char *name, us_err *err) {
    int k = snprintf(path, n, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= n) return us_err_set(err, US_EIO, "%s/%s: path too long", dir, name);
    return 0;
}

int us_policysrc_check_dir(const char *dir, us_err *err) {
    char path[4096];
    struct stat sb;
    if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return us_err_set(err, US_EIO, "%s: not a directory (a policy directory holds fairshare.lua, "
                          "placement.lua and/or background.lua)", dir);
    for (int m = 0; m < US_POLICY_NFN; m++) {
        if (path_of(path, sizeof path, dir, us_policy_files[m], err) < 0) return -1;
        if (stat(path, &sb) == 0) return 0;
    }
    if (path_of(path, sizeof path, dir, us_policy_files[0], err) < 0) return -1;
    if (stat(dir, &sb) != 0) return us_err_set(err, US_EIO, "%s: cannot read it: %s", path, strerror(errno));
    return us_err_set(err, US_EIO, "%s: cannot read it: %s holds none of fairshare.lua, placement.lua, "
                      "background.lua", path, dir);
}

int us_policysrc_read(const char *dir, int m, char **buf, size_t *len, bool *is_default, us_err *err) {
    char path[4096];
    FILE *f = NULL;
    long size = 0;
    int rc = -1;

    *buf = NULL;
    *is_default = false;
    if (m < 0 || m >= US_POLICY_NFN) return us_err_set(err, US_EINVAL, "no policy file %d", m);
    if (path_of(path, sizeof path, dir, us_policy_files[m], err) < 0) return -1;
    f = fopen(path, "rb");
    if (!f && errno == ENOENT) {
        size_t n;
        const char *text = us_policysrc_default(m, &n);
        if (!(*buf = malloc(n + 1))) return us_err_nomem(err);
        memcpy(*buf, text, n);
        (*buf)[n] = '\0';
        *len = n;
        *is_default = true;
        return 0;
    }
    if (!f || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        us_err_set(err, US_EIO, "cannot read %s: %s", path, strerror(errno));
        goto done;
    }
    if (size > US_POLICYSRC_MAX) {
        us_err_set(err, US_EIO, "cannot read %s: larger than %ld bytes", path, US_POLICYSRC_MAX);
        goto done;
    }
    if (!(*buf = malloc((size_t)size + 1))) {
        us_err_nomem(err);
        goto done;
    }
    if (fread(*buf, 1, (size_t)size, f) != (size_t)size) {
        us_err_set(err, US_EIO, "cannot read %s: %s", path, ferror(f) ? strerror(errno) : "file changed");
        free(*buf);
        *buf = NULL;
        goto done;
    }
    (*buf)[size] = '\0';
    *len = (size_t)size;
    rc = 0;
done:
    if (f) fclose(f);
    return rc;
}
