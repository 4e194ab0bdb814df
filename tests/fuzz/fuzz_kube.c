/*
 * fuzz_kube.c — libFuzzer target: the Kubernetes object mapping
 * (kube/objects.c), as `understory import` and `understory serve` use it
 * (make fuzz; docs/testing.md).
 *
 * The input is JSON text, taken as a List such as `kubectl get -o json`
 * prints.  Whatever it holds, the mapping maps it or refuses it with a
 * message, never crashes, leaks or reads out of bounds (ASan + UBSan): the
 * List as a whole (kube_cluster_from_list, kube_scenario, both with and
 * without the pending pods serve reports), and each item on its own
 * through the per-object entry points (kube_node, kube_queue).  What maps
 * is loaded back as a scenario, as import does; a refusal there must say
 * why too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "objects.h"
#include "scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void load_back(const cJSON *doc) {
    char *out = cJSON_PrintUnformatted(doc);
    if (!out) return; /* out of memory */
    us_scenario sc;
    us_err err = {0};
    if (us_scenario_load_string(&sc, out, strlen(out), "imported", &err) < 0) {
        if (!err.msg[0]) abort(); /* a refusal always says why */
    } else {
        us_scenario_free(&sc);
    }
    free(out);
}

static void each_item(const cJSON *list) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(list, "items"), *it;
    cJSON_ArrayForEach(it, items) {
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(it, "kind");
        cJSON *out = NULL;
        us_err err = {0};
        int rc = 0;
        if (!cJSON_IsString(kind)) continue;
        if (!strcmp(kind->valuestring, "Node")) rc = kube_node(it, "item", &out, &err);
        else if (!strcmp(kind->valuestring, "Queue")) rc = kube_queue(it, "item", 0, &out, &err);
        else continue;
        if (rc < 0 && !err.msg[0]) abort();
        if ((rc < 0) != (out == NULL)) abort(); /* a result exactly when it succeeds */
        cJSON_Delete(out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cJSON *list = cJSON_ParseWithLength((const char *)data, size);
    if (!list) return 0;
    each_item(list);
    kube_cluster kc;
    us_err err = {0};
    memset(&kc, 0, sizeof kc);
    if (kube_cluster_from_list(list, &kc, &err) < 0) {
        if (!err.msg[0]) abort();
    } else {
        for (int pending = 0; pending < 2; pending++) {
            kube_opts o = {NULL, "fuzz", 0, pending, 0};
            cJSON *doc = NULL;
            us_err serr = {0};
            if (kube_scenario(&kc, &o, &doc, &serr) < 0) {
                if (!serr.msg[0] || doc) abort();
                continue;
            }
            if (!pending) load_back(doc); /* a scenario holds no pending pods */
            cJSON_Delete(doc);
        }
    }
    kube_cluster_free(&kc);
    cJSON_Delete(list);
    return 0;
}
