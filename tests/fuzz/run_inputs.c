/*
 * run_inputs.c — a main for a fuzz target built without libFuzzer: runs
 * LLVMFuzzerTestOneInput once on each file named (a directory: each file in
 * it, in name order), so that a target's own cost can be measured without
 * instrumentation (make fuzz-plain; callgrind, docs/testing.md).
 *
 * Single-threaded; reads each file whole, owns nothing past one input.
 * Exit status 0 when every input ran, 1 when a file could not be read.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* a target that prepares once defines it (fuzz_policy_result) */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return -1;
    }
    for (;;) {
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 4096;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                fprintf(stderr, "%s: out of memory\n", path);
                free(buf);
                fclose(f);
                return -1;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: read error\n", path);
        free(buf);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, size_t *count) {
    DIR *d = opendir(dir);
    struct dirent *de;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    if (!d) {
        fprintf(stderr, "%s: cannot open directory\n", dir);
        return -1;
    }
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 256;
            char **nn = realloc(names, ncap * sizeof *nn);
            if (!nn) {
                rc = -1;
                break;
            }
            names = nn;
            cap = ncap;
        }
        size_t len = strlen(dir) + strlen(de->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            rc = -1;
            break;
        }
        snprintf(names[n++], len, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    if (rc < 0) fprintf(stderr, "%s: out of memory\n", dir);
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && run_file(names[i]) < 0) rc = -1;
        else if (rc == 0) (*count)++;
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    size_t count = 0;
    int rc = 0;
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc && rc == 0; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) rc = run_dir(argv[i], &count);
        else if ((rc = run_file(argv[i])) == 0) count++;
    }
    fprintf(stderr, "%zu inputs run\n", count);
    return rc < 0 ? 1 : 0;
}
