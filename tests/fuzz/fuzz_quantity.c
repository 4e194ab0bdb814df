/*
 * fuzz_quantity.c — libFuzzer target: the Kubernetes quantity parser
 * (us_parse_cpu, us_parse_memory), on any bytes.
 *
 * Properties beyond not crashing: a value that parses is >= 0; a cpu value
 * is a whole number of millicores, so cpu("<v>m") reads back as v; a
 * memory value is whole bytes, so memory("<v>") reads back as v.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1), again[40];
    int64_t v, w;
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    if (us_parse_cpu(s, &v) == 0) {
        if (v < 0) abort();
        snprintf(again, sizeof again, "%" PRId64 "m", v);
        if (us_parse_cpu(again, &w) != 0 || w != v) abort();
    }
    if (us_parse_memory(s, &v) == 0) {
        if (v < 0) abort();
        snprintf(again, sizeof again, "%" PRId64, v);
        if (us_parse_memory(again, &w) != 0 || w != v) abort();
    }
    free(s);
    return 0;
}
