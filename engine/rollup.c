/*
 * rollup.c — the account's short form: decisions and final pods rolled up
 * per workload, names in natural order, and the legend.
 *
 * Owns only that presentation.  It must never change what it reads, and
 * lists only names it was given: a line says how many and where, the
 * verbose account (output.c) every pod.
 */
#include "rollup.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hashidx.h"
#include "sort.h"

/* Names shown in one list before "and N more". */
#define SHOWN 6

static bool all_digits(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

struct us_rollup_names {
    const us_state *st;
    us_strmap workloads, nodes;  /* name -> the first index of that name */
    int *next_same;              /* [nworkloads] the next workload of its name, or -1
                                    (a removed one still terminating, and its successor) */
};

us_rollup_names *us_rollup_names_new(const us_state *st) {
    us_rollup_names *ix = calloc(1, sizeof *ix);
    if (!ix) return NULL;
    ix->st = st;
    ix->next_same = malloc((st->nworkloads + 1) * sizeof *ix->next_same);
    if (!ix->next_same || us_strmap_reserve(&ix->workloads, st->nworkloads) < 0 ||
        us_strmap_reserve(&ix->nodes, st->nnodes) < 0)
        goto nomem;
    /* from the last, so that each name ends mapped to its first */
    for (size_t w = st->nworkloads; w-- > 0;) {
        ix->next_same[w] = us_strmap_get(&ix->workloads, st->workloads[w].name);
        if (us_strmap_set(&ix->workloads, st->workloads[w].name, (int)w) < 0) goto nomem;
    }
    for (size_t n = 0; n < st->nnodes; n++)
        if (us_strmap_add(&ix->nodes, st->nodes[n].name, (int)n) < 0) goto nomem;
    return ix;
nomem:
    us_rollup_names_free(ix);
    return NULL;
}

void us_rollup_names_free(us_rollup_names *ix) {
    if (!ix) return;
    us_strmap_free(&ix->workloads);
    us_strmap_free(&ix->nodes);
    free(ix->next_same);
    free(ix);
}

/* Each '-' of the name, from the last (the longest workload name first),
 * ends a prefix looked up by name: a few lookups per pod, where a scan of
 * every workload per decision was quadratic on a large cluster. */
int us_rollup_workload_of(const us_rollup_names *ix, const char *pod) {
    if (!pod) return -1;
    size_t len = strlen(pod);
    char small[256], *prefix = len < sizeof small ? small : malloc(len + 1);
    int found = -1;
    if (!prefix) return -1;  /* out of memory: shown under the pod's own name */
    memcpy(prefix, pod, len + 1);
    for (size_t cut = len; cut-- > 0 && found < 0;) {
        if (pod[cut] != '-') continue;
        prefix[cut] = '\0';
        int w = us_strmap_get(&ix->workloads, prefix);
        prefix[cut] = '-';
        const char *rest = pod + cut + 1;
        for (; w >= 0 && found < 0; w = ix->next_same[w])
            if (ix->st->workloads[w].controller == US_CTRL_DAEMONSET ? us_strmap_get(&ix->nodes, rest) >= 0
                                                                      : all_digits(rest))
                found = w;
    }
    if (prefix != small) free(prefix);
    return found;
}

/* A set of names (borrowed), kept unique, in the order first added. */
typedef struct names {
    const char **v;
    size_t n, cap;
    us_strmap seen;
} names;

static int names_add(names *s, const char *name) {
    if (!name) return 0;
    int added = us_strmap_add(&s->seen, name, 0);
    if (added <= 0) return added;
    if (us_grow((void **)&s->v, &s->cap, s->n, sizeof *s->v) < 0) return -1;
    s->v[s->n++] = name;
    return 0;
}

static void names_free(names *s) {
    free(s->v);
    us_strmap_free(&s->seen);
    memset(s, 0, sizeof *s);
}

static int by_natural(const void *a, const void *b, void *ctx) {
    (void)ctx;
    return us_natcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "n1, n2, n3" in natural order, at most SHOWN, then "and 4 more". */
static void print_names(FILE *f, names *s) {
    us_sort(s->v, s->n, sizeof *s->v, by_natural, NULL);
    for (size_t i = 0; i < s->n && i < SHOWN; i++) fprintf(f, "%s%s", i ? ", " : "", s->v[i]);
    if (s->n > SHOWN) fprintf(f, " and %zu more", s->n - SHOWN);
}

typedef struct group {
    us_op op;
    us_action act;
    int wl;                /* workload, or -1: then pod is the key */
    const char *pod;       /* the first pod */
    const char *evictor;
    int count;
    names nodes, waits;
} group;

static bool same_group(const group *g, const us_decision *d, int wl) {
    if (g->op != d->op || g->act != d->action || g->wl != wl) return false;
    if (wl < 0 && strcmp(g->pod, d->pod ? d->pod : "") != 0) return false;
    if (!g->evictor != !d->evictor) return false;
    return !g->evictor || strcmp(g->evictor, d->evictor) == 0;
}

static void print_group(FILE *f, const char *lead, group *g, const us_state *st) {
    static const char *const verbs[] = {"bound", "pipelined", "evicted"};
    static const char *const preps[] = {"on", "onto", "from"};
    fprintf(f, "%s%s ", lead, verbs[g->op]);
    if (g->count == 1 || g->wl < 0)
        fprintf(f, "%s", g->pod);
    else
        fprintf(f, "%d pods of %s", g->count, st->workloads[g->wl].name);
    fprintf(f, " %s ", preps[g->op]);
    print_names(f, &g->nodes);
    if (g->op == US_OP_PIPELINE && g->waits.n) {
        fputs(", waiting for ", f);
        if (g->waits.n == 1) print_names(f, &g->waits);
        else fprintf(f, "%zu pods", g->waits.n);
    }
    if (g->op == US_OP_EVICT && g->evictor) fprintf(f, " for %s", g->evictor);
    if (g->act == US_ACT_NONE) fputs("  (after pipeline)\n", f);
    else fprintf(f, "  (%s)\n", us_action_names[g->act]);
}

static uint64_t group_hash(const us_decision *d, int wl) {
    int ints[4] = {(int)d->op, (int)d->action, wl, d->evictor != NULL};
    uint64_t h = us_hash_words(US_HASH_SEED, ints, sizeof ints);
    if (wl < 0) h = us_hash_str(h, d->pod ? d->pod : "");
    if (d->evictor) h = us_hash_str(h, d->evictor);
    return us_hash_finish(h);
}

typedef struct group_key {
    const us_decision *d;
    int wl;
} group_key;

static bool group_is(int id, const void *key, void *ctx) {
    const group_key *k = key;
    return same_group(&((const group *)ctx)[id], k->d, k->wl);
}

int us_rollup_decisions(FILE *f, const char *lead, const us_cycle_log *log, const us_rollup_names *ix) {
    group *gs = NULL;
    size_t n = 0, cap = 0;
    us_hashidx byk = {0};  /* groups by key: decisions of many workloads made a scan quadratic */
    int rc = -1;
    for (size_t i = 0; i < log->ndecisions; i++) {
        const us_decision *d = &log->decisions[i];
        int wl = us_rollup_workload_of(ix, d->pod);
        group_key key = {d, wl};
        uint64_t h = group_hash(d, wl);
        int k = us_hashidx_find(&byk, h, group_is, &key, gs);
        if (k < 0) {
            if (us_grow((void **)&gs, &cap, n, sizeof *gs) < 0 || us_hashidx_add(&byk, h, (int)n) < 0)
                goto cleanup;
            gs[n] = (group){d->op, d->action, wl, d->pod ? d->pod : "-", d->evictor, 0, {0}, {0}};
            k = (int)n++;
        }
        group *g = &gs[k];
        g->count++;
        if (names_add(&g->nodes, d->node) < 0) goto cleanup;
        for (size_t w = 0; w < d->nwaits; w++)
            if (names_add(&g->waits, d->waits_for[w]) < 0) goto cleanup;
    }
    for (size_t k = 0; k < n; k++) print_group(f, lead, &gs[k], ix->st);
    rc = 0;
cleanup:
    for (size_t k = 0; k < n; k++) {
        names_free(&gs[k].nodes);
        names_free(&gs[k].waits);
    }
    free(gs);
    us_hashidx_free(&byk);
    return rc;
}

static int by_pod_name(const void *a, const void *b, void *ctx) {
    const us_state *st = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = us_natcmp(st->pods[x].name, st->pods[y].name);
    return c ? c : x < y ? -1 : x > y;  /* two incarnations: creation order */
}

static int by_workload_name(const void *a, const void *b, void *ctx) {
    const us_state *st = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = us_natcmp(st->workloads[x].name, st->workloads[y].name);
    return c ? c : x < y ? -1 : x > y;
}

static const char *node_of(const us_state *st, const us_pod *p) {
    return p->node >= 0 && (size_t)p->node < st->nnodes ? st->nodes[p->node].name : NULL;
}

static bool bg_pod(const us_state *st, const us_pod *p) {
    return p->workload >= 0 && (size_t)p->workload < st->nworkloads && st->workloads[p->workload].background;
}

int us_rollup_pods_each(FILE *f, const us_state *st) {
    size_t *idx = malloc((st->npods ? st->npods : 1) * sizeof *idx), n = 0;
    if (!idx) return -1;
    int wp = 0, wn = 0;
    for (size_t i = 0; i < st->npods; i++) {
        if (st->pods[i].gone) continue;
        idx[n++] = i;
        int lp = (int)strlen(st->pods[i].name);
        const char *node = node_of(st, &st->pods[i]);
        int ln = node ? (int)strlen(node) : 1;
        if (lp > wp) wp = lp;
        if (ln > wn) wn = ln;
    }
    us_sort(idx, n, sizeof *idx, by_pod_name, (void *)st);
    for (int s = US_POD_PENDING; s <= US_POD_COMPLETED; s++) {
        size_t count = 0;
        for (size_t k = 0; k < n; k++) count += st->pods[idx[k]].state == (us_pod_state)s;
        if (!count) continue;
        fprintf(f, "  %s (%zu)\n", us_pod_state_names[s], count);
        for (size_t k = 0; k < n; k++) {
            const us_pod *p = &st->pods[idx[k]];
            if (p->state != (us_pod_state)s) continue;
            const char *node = node_of(st, p);
            if (bg_pod(st, p))
                fprintf(f, "    %-*s  %-*s  background\n", wp, p->name, wn, node ? node : "-");
            else
                fprintf(f, "    %-*s  %s\n", wp, p->name, node ? node : "-");
        }
    }
    free(idx);
    return 0;
}

int us_rollup_pods(FILE *f, const us_state *st) {
    size_t nw = st->nworkloads;
    size_t *order = malloc((nw ? nw : 1) * sizeof *order);
    names *nodes = calloc(nw ? nw : 1, sizeof *nodes);
    int *count = calloc(nw ? nw : 1, sizeof *count);
    int rc = -1;
    if (!order || !nodes || !count) goto cleanup;
    for (size_t w = 0; w < nw; w++) order[w] = w;
    us_sort(order, nw, sizeof *order, by_workload_name, (void *)st);
    int wn = 0;
    for (size_t w = 0; w < nw; w++)
        if ((int)strlen(st->workloads[w].name) > wn) wn = (int)strlen(st->workloads[w].name);
    for (int s = US_POD_PENDING; s <= US_POD_COMPLETED; s++) {
        size_t total = 0;
        for (size_t w = 0; w < nw; w++) {
            names_free(&nodes[w]);
            count[w] = 0;
        }
        for (size_t i = 0; i < st->npods; i++) {
            const us_pod *p = &st->pods[i];
            if (p->gone || p->state != (us_pod_state)s || p->workload < 0 || (size_t)p->workload >= nw) continue;
            count[p->workload]++;
            total++;
            if (names_add(&nodes[p->workload], node_of(st, p)) < 0) goto cleanup;
        }
        if (!total) continue;
        fprintf(f, "  %s (%zu)\n", us_pod_state_names[s], total);
        for (size_t k = 0; k < nw; k++) {
            size_t w = order[k];
            if (!count[w]) continue;
            fprintf(f, "    %-*s  %3d pod%s", wn, st->workloads[w].name, count[w], count[w] == 1 ? " " : "s");
            if (nodes[w].n) {
                fputs("  on ", f);
                print_names(f, &nodes[w]);
            }
            fputs(st->workloads[w].background ? "  (background)\n" : "\n", f);
        }
    }
    rc = 0;
cleanup:
    for (size_t w = 0; nodes && w < nw; w++) names_free(&nodes[w]);
    free(nodes);
    free(order);
    free(count);
    return rc;
}

void us_rollup_legend(FILE *f) {
    fputs("legend\n"
          "  bound      the pod runs on the node\n"
          "  pipelined  placed on room a releasing pod still holds; binds once it is free\n"
          "  evicted    stopped: it releases its room after its termination grace period\n"
          "  (allocate)        placed in free room\n"
          "  (reclaim)         taken from a queue over its fair share for one under it\n"
          "  (preempt)         taken from lower-priority work of the same queue\n"
          "  (backgroundpods)  background work placed in room AI does not need, or\n"
          "                    evicted because an AI pod needs its room\n"
          "  (stalegangeviction)  the rest of a gang that fell below its min_member\n"
          "  (after pipeline)  a pipelined pod whose room is now free\n",
          f);
}
