/*
 * taints.h — node taints and workload tolerations, with Kubernetes' shape
 * and matching rules: a pod may be placed on a node only when it tolerates
 * every NoSchedule and NoExecute taint there (PreferNoSchedule never
 * blocks).  Owns the two types, their JSON form and the matching; it never
 * decides anything else about placement (placement.c asks it).
 */
#ifndef US_TAINTS_H
#define US_TAINTS_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

typedef enum us_taint_effect {
    US_EFFECT_ANY = 0,              /* tolerations only: "" matches every effect */
    US_EFFECT_NO_SCHEDULE,          /* "NoSchedule" */
    US_EFFECT_PREFER_NO_SCHEDULE,   /* "PreferNoSchedule" */
    US_EFFECT_NO_EXECUTE            /* "NoExecute" */
} us_taint_effect;

extern const char *const us_effect_names[]; /* "", "NoSchedule", ... */

typedef struct us_taint_item {
    char *key;                      /* non-empty */
    char *value;                    /* "" when absent */
    us_taint_effect effect;         /* never US_EFFECT_ANY */
} us_taint_item;

typedef struct us_toleration_item {
    char *key;                      /* "" (only with exists): every key */
    char *value;                    /* "" when absent; always "" with exists */
    bool exists;                    /* operator Exists; false: Equal */
    us_taint_effect effect;         /* US_EFFECT_ANY: every effect */
} us_toleration_item;

typedef struct us_taints {
    us_taint_item *items;
    size_t n;
} us_taints;

typedef struct us_tolerations {
    us_toleration_item *items;
    size_t n;
} us_tolerations;

/* Does t tolerate taint x?  Kubernetes' ToleratesTaint. */
bool us_toleration_matches(const us_toleration_item *t, const us_taint_item *x);
/* May a pod with tolerations tol be placed on a node with taints?  When
 * running is true, whether a pod already there may stay (only NoExecute
 * taints count, as for a DaemonSet's pod when a node is tainted). */
bool us_tolerates(const us_tolerations *tol, const us_taints *taints, bool running);

/* Same items in the same order. */
bool us_taints_equal(const us_taints *a, const us_taints *b);
bool us_tolerations_equal(const us_tolerations *a, const us_tolerations *b);
/* Deep copies: 0, or -1 when memory runs out (dst left empty). */
int us_taints_copy(us_taints *dst, const us_taints *src);
int us_tolerations_copy(us_tolerations *dst, const us_tolerations *src);
void us_taints_free(us_taints *t);
void us_tolerations_free(us_tolerations *t);

/* From the JSON array v (NULL or JSON null: none) at path (for messages:
 * `nodes[2].taints[0].effect: "NoRun" is not ...`).  All or nothing: on
 * failure *out is empty and err says what and where. */
struct cJSON;
int us_taints_parse(const struct cJSON *v, const char *path, us_taints *out, us_err *err);
int us_tolerations_parse(const struct cJSON *v, const char *path, us_tolerations *out,
                         us_err *err);

#endif
