/*
 * blocker.c — why a pod can never be placed as the nodes stand (see
 * blocker.h).  Reads node capacity, pool, labels, taints and cordons; never what
 * runs, and never changes anything.
 */
#include "blocker.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "use.h"

const char *const us_blocker_names[] = {"", "no-node-in-pool", "node-selector",
                                        "request-too-large", "cordoned", "taints"};

/* "zone=a, disk=ssd" (cut to n bytes). */
static void selector_text(const us_labels *sel, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sel->n && k < n; i++) {
        int m = snprintf(buf + k, n - k, "%s%s=%s", i ? ", " : "", sel->items[i].key,
                         sel->items[i].value);
        if (m < 0) break;
        k += (size_t)m;
    }
}

/* A resource of a request in the words of the readable account. */
static void amount_text(int r, int64_t v, char *buf, size_t n) {
    if (r == US_GPU) snprintf(buf, n, "%g GPU", (double)v / US_GPU_UNIT);
    else if (r == US_CPU) snprintf(buf, n, "%g CPU cores", (double)v / 1000);
    else snprintf(buf, n, "%" PRId64 " bytes of memory", v);
}

us_blocker us_blocker_find(const us_state *st, const us_workload *w, int pin, char *msg, size_t n) {
    static const us_use empty;
    size_t in_pool = 0, matching = 0, tolerated = 0, large = 0;
    const us_taint_item *untolerated = NULL; /* one taint that kept it off, for the message */
    int64_t most[US_NRES] = {0};
    char a[64], b[64], sel[200];
    /* a pinned pod (daemonset) can only ever go to its own node */
    size_t from = pin >= 0 ? (size_t)pin : 0, to = pin >= 0 ? (size_t)pin + 1 : st->nnodes;
    for (size_t i = from; i < to && i < st->nnodes; i++) {
        const us_node *nd = &st->nodes[i];
        if (nd->removed || strcmp(nd->pool, w->pool) != 0) continue;
        in_pool++;
        if (!us_labels_match(&nd->labels, &w->node_selector)) continue;
        matching++;
        if (!us_tolerates(&w->tolerations, &nd->taints, false)) {
            for (size_t k = 0; !untolerated && k < nd->taints.n; k++) {
                us_taints one = {&nd->taints.items[k], 1};
                if (!us_tolerates(&w->tolerations, &one, false)) untolerated = &nd->taints.items[k];
            }
            continue;
        }
        tolerated++;
        for (int r = 0; r < US_NRES; r++)
            if (nd->cap.v[r] > most[r]) most[r] = nd->cap.v[r];
        if (!us_use_fits(&empty, nd, w->request, -1)) continue;
        large++;
        if (!nd->unschedulable) return US_BLOCK_NONE;
    }
    if (!in_pool) {
        snprintf(msg, n, "no node in pool \"%s\"", w->pool);
        return US_BLOCK_NO_POOL;
    }
    if (!matching) {
        selector_text(&w->node_selector, sel, sizeof sel);
        snprintf(msg, n, "no node of pool \"%s\" matches the node selector (%s)", w->pool, sel);
        return US_BLOCK_SELECTOR;
    }
    if (!tolerated && untolerated) {
        snprintf(msg, n, "no %snode of pool \"%s\" has taints the pod tolerates (one has %.100s%s%.100s:%s)",
                 w->node_selector.n ? "matching " : "", w->pool, untolerated->key,
                 untolerated->value[0] ? "=" : "", untolerated->value, us_effect_names[untolerated->effect]);
        return US_BLOCK_TAINTS;
    }
    if (!large) {
        for (int r = 0; r < US_NRES; r++) {
            if (w->request.v[r] <= most[r]) continue;
            amount_text(r, w->request.v[r], a, sizeof a);
            amount_text(r, most[r], b, sizeof b);
            snprintf(msg, n, "the pod's request is larger than any %snode of pool \"%s\" holds: "
                     "it asks %s, the largest has %s", w->node_selector.n ? "matching " : "",
                     w->pool, a, b);
            return US_BLOCK_TOO_LARGE;
        }
        snprintf(msg, n, "no %snode of pool \"%s\" holds the pod's whole request at once",
                 w->node_selector.n ? "matching " : "", w->pool);
        return US_BLOCK_TOO_LARGE;
    }
    snprintf(msg, n, "every node of pool \"%s\" that could hold the pod is cordoned", w->pool);
    return US_BLOCK_CORDONED;
}
