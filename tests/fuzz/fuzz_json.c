/*
 * fuzz_json.c — libFuzzer target: the engine's own JSON pieces against
 * cJSON (make fuzz; docs/testing.md).
 *
 * Any input: what jsonsplit accepts, cJSON accepts too, each span is one
 * value and the pieces parsed alone make the tree cJSON makes of the whole
 * (the scenario loader relies on it to read a large document a piece at a
 * time); and whatever cJSON parses, the writer's text sink prints byte for
 * byte as cJSON_Print (the output document relies on it).  A broken
 * promise is a finding (abort); so is any crash, leak or out-of-bounds
 * read (ASan + UBSan).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../c/json_agree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *why = json_split_agrees((const char *)data, size);
    if (why) {
        fprintf(stderr, "jsonsplit: %s\n", why);
        abort();
    }
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    cJSON *tree = cJSON_ParseWithOpts(buf, NULL, 1);
    if (tree && (why = json_print_agrees(tree))) {
        fprintf(stderr, "jsonw: %s\n", why);
        abort();
    }
    cJSON_Delete(tree);
    free(buf);
    return 0;
}
