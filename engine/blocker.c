/*
 * blocker.c — why a pod can never be placed as the nodes stand (see
 * blocker.h).  Reads node capacity, pool, labels and cordons; never what
 * runs, and never changes anything.
 */
#include "blocker.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "taints.h"
#include "use.h"

const char *const us_blocker_names[] = {"", "no-node-in-pool", "node-selector",
                                        "request-too-large", "cordoned", "gang-too-large",
                                        "untolerated-taint"};

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

/* How many pods asking req fit on node nd when it is empty, at most cap. */
static int64_t pods_on_empty(const us_node *nd, us_res req, int64_t cap) {
    int64_t k = cap;
    for (int r = US_CPU; r < US_NRES; r++)
        if (req.v[r] > 0 && nd->cap.v[r] / req.v[r] < k) k = nd->cap.v[r] / req.v[r];
    if (us_req_is_fractional(req)) {
        /* fractions share a device up to a whole one */
        int64_t per = US_GPU_UNIT / req.v[US_GPU];
        if ((int64_t)nd->gpus * per < k) k = (int64_t)nd->gpus * per;
    } else if (req.v[US_GPU] > 0 && nd->gpus / us_req_whole_gpus(req) < k) {
        k = nd->gpus / us_req_whole_gpus(req);
    }
    return k;
}

us_blocker us_blocker_find(const us_state *st, const us_workload *w, int pin, int need, char *msg,
                           size_t n) {
    static const us_use empty;
    size_t in_pool = 0, matching = 0, tolerated = 0, large = 0;
    const us_node *tainted = NULL; /* a matching node whose taints keep the pod off */
    int64_t room_all = 0, room_open = 0; /* pods the large nodes hold empty, open ones */
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
            if (!tainted) tainted = nd;
            continue;
        }
        tolerated++;
        for (int r = 0; r < US_NRES; r++)
            if (nd->cap.v[r] > most[r]) most[r] = nd->cap.v[r];
        if (!us_use_fits(&empty, nd, w->request, -1)) continue;
        large++;
        int64_t k = pods_on_empty(nd, w->request, need);
        room_all += k;
        if (!nd->unschedulable) room_open += k;
        if (room_open >= need) return US_BLOCK_NONE;
        if (room_all > need) room_all = need; /* bounded: no overflow */
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
    if (!tolerated) {
        const us_taint_item *x = NULL;
        for (size_t k = 0; k < tainted->taints.n && !x; k++) {
            us_taints one = {&tainted->taints.items[k], 1};
            if (!us_tolerates(&w->tolerations, &one, false)) x = &tainted->taints.items[k];
        }
        snprintf(msg, n, "every %snode of pool \"%s\" has a taint the pod does not tolerate "
                 "(\"%s\": %s%s%s:%s)", w->node_selector.n ? "matching " : "", w->pool,
                 tainted->name, x ? x->key : "?", x && x->value[0] ? "=" : "", x ? x->value : "",
                 x ? us_effect_names[x->effect] : "?");
        return US_BLOCK_TAINTS;
    }
    if (!large) {
        for (int r = 0; r < US_NRES; r++) {
            if (w->request.v[r] <= most[r]) continue;
            amount_text(r, w->request.v[r], a, sizeof a);
            amount_text(r, most[r], b, sizeof b);
            if (pin >= 0)
                snprintf(msg, n, "the pod's request is larger than its node holds (\"%s\": it asks "
                         "%s, the node has %s)", st->nodes[pin].name, a, b);
            else
                snprintf(msg, n, "the pod's request is larger than any %snode of pool \"%s\" "
                         "holds: it asks %s, the largest has %s",
                         w->node_selector.n ? "matching " : "", w->pool, a, b);
            return US_BLOCK_TOO_LARGE;
        }
        snprintf(msg, n, "no %snode of pool \"%s\" holds the pod's whole request at once",
                 w->node_selector.n ? "matching " : "", w->pool);
        return US_BLOCK_TOO_LARGE;
    }
    if (room_all < need) {
        snprintf(msg, n, "the gang needs %d pods at once, and the %snodes of pool \"%s\" hold at "
                 "most %" PRId64 " even when empty", need, w->node_selector.n ? "matching " : "",
                 w->pool, room_all);
        return US_BLOCK_GANG;
    }
    if (room_open > 0)
        snprintf(msg, n, "the gang needs %d pods at once; leaving out the cordoned nodes, the "
                 "%snodes of pool \"%s\" hold at most %" PRId64 " even when empty", need,
                 w->node_selector.n ? "matching " : "", w->pool, room_open);
    else
        snprintf(msg, n, "every node of pool \"%s\" that could hold the pod is cordoned", w->pool);
    return US_BLOCK_CORDONED;
}
