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
#include "readfile.h"

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
    if (k < 0 || (size_t)k >= n) return us_err_set(err, US_EIO, "%s: path too long", name);
    return 0;
}

int us_policysrc_check_dir(const char *dir, us_err *err) {
    char path[4096];
    struct stat sb;
    if (stat(dir, &sb) != 0) return us_err_set(err, US_EIO, "cannot open the directory: %s", strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return us_err_set(err, US_EIO, "not a directory");
    for (int m = 0; m < US_POLICY_NFN; m++) {
        if (path_of(path, sizeof path, dir, us_policy_files[m], err) < 0) return -1;
        if (lstat(path, &sb) == 0 || errno != ENOENT) return 0;
    }
    return us_err_set(err, US_EIO, "holds none of fairshare.lua, placement.lua, background.lua (a policy "
                      "directory holds those it changes; the others are the defaults)");
}

int us_policysrc_read(const char *dir, int m, char **buf, size_t *len, bool *is_default, us_err *err) {
    char path[4096], why[256];
    struct stat sb;

    *buf = NULL;
    *is_default = false;
    if (m < 0 || m >= US_POLICY_NFN) return us_err_set(err, US_EINVAL, "no policy file %d", m);
    if (path_of(path, sizeof path, dir, us_policy_files[m], err) < 0) return -1;
    if (lstat(path, &sb) != 0 && errno == ENOENT) {
        size_t n;
        const char *text = us_policysrc_default(m, &n);
        if (!(*buf = malloc(n + 1))) return us_err_nomem(err);
        memcpy(*buf, text, n);
        (*buf)[n] = '\0';
        *len = n;
        *is_default = true;
        return 0;
    }
    /* only a regular file is read (readfile.h): a FIFO named like a policy
     * cannot block; messages name the file, the caller the directory */
    if (us_read_regular(path, US_POLICYSRC_MAX, buf, len, why, sizeof why) < 0)
        return us_err_set(err, US_EIO, "%s: cannot read it: %s", us_policy_files[m], why);
    return 0;
}
