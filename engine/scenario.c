/*
 * scenario.c — owns loading a scenario document (docs/scenario.md, every
 * field and its default) into a us_scenario: JSON parsing, validation with
 * errors that name the JSON path, defaults, quantity parsing (us_parse_cpu,
 * us_parse_memory), pre-existing pods and the sorted timeline.
 *
 * Loading is all or nothing: every helper reports through the loader's
 * context and the top level frees whatever was built when any step fails.
 * JSON null counts as an absent field, so generated documents may write
 * `"parent": null`.  Messages start with the JSON path, without the file
 * name: callers (main.c, the Lua module) prefix it, and origin only serves to
 * resolve relative policy dirs.
 */
#include "scenario.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonsplit.h"
#include "strmap.h"
#include "use.h"
#include "utf8.h"

const char *const us_tl_action_names[] = {"submit",      "delete", "complete",
                                          "add_node",    "remove_node", "cordon",
                                          "uncordon",    "reload_policies"};
#define NACTIONS 8

#define PATHLEN 512   /* JSON paths in messages; longer ones are truncated */
#define QLEN 400      /* a quoted value in a message (at most 60 source chars) */
#define MAX_PRIORITY 1000000000
#define MAX_REPLICAS 1000000
#define MAX_WEIGHT 1000000  /* over_quota_weight */
#define MAX_NAME 253        /* Kubernetes' longest object name */
#define MAX_TIME 1e12       /* seconds (31,700 years) before t=0 a creation time may lie */

/* Largest value of any quantity field, per resource.  Far below INT64_MAX so
 * that sums over many pods, nodes or queues cannot overflow, and exact as a
 * double (policies see Lua numbers): 1M GPUs, 2^53 millicores or bytes. */
static const int64_t qmax[US_NRES] = {(int64_t)1000000 * US_GPU_UNIT,
                                      (int64_t)1 << 53, (int64_t)1 << 53};

/* ---- quantities ---------------------------------------------------------- */

enum { Q_OK, Q_SYNTAX, Q_NEG, Q_FINE, Q_BIG, Q_DIGITS };
#define QDIG 64 /* significant digits a quantity may spell out */

static bool isdig(char ch) { return ch >= '0' && ch <= '9'; }

/* The Kubernetes quantity s times 10^scale as an integer: exact, or rounded
 * up when round_up (else a fraction is Q_FINE).  Decimal arithmetic on the
 * digits keeps "0.1" and "1.5Gi" exact, where a double would not be. */
static int qty(const char *s, int scale, bool round_up, int64_t *out) {
    static const struct {
        const char *sfx;
        int e10, bin;
    } sfx[] = {{"", 0, 0},   {"m", -3, 0}, {"k", 3, 0},  {"M", 6, 0},  {"G", 9, 0},
               {"T", 12, 0}, {"P", 15, 0}, {"E", 18, 0}, {"Ki", 0, 1}, {"Mi", 0, 2},
               {"Gi", 0, 3}, {"Ti", 0, 4}, {"Pi", 0, 5}, {"Ei", 0, 6}};
    unsigned char d[QDIG + 32]; /* room for the growth of 1024^6 */
    int nd = 0, nfrac = 0, e10 = scale, bin = 0, s0 = 0, nint;
    bool neg = false, any = false, found = false, frac = false;
    uint64_t v = 0;

    if (!s) return Q_SYNTAX;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    for (; isdig(*s); s++) {
        any = true;
        if (nd == 0 && *s == '0') continue; /* leading zeros carry nothing */
        if (nd == QDIG) return Q_DIGITS;
        d[nd++] = (unsigned char)(*s - '0');
    }
    if (*s == '.') {
        for (s++; isdig(*s); s++) {
            any = true;
            if (nd == QDIG) return Q_DIGITS;
            d[nd++] = (unsigned char)(*s - '0');
            nfrac++;
        }
    }
    if (!any) return Q_SYNTAX;
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        if (strcmp(s, sfx[i].sfx) == 0) {
            e10 += sfx[i].e10;
            bin = sfx[i].bin;
            found = true;
            break;
        }
    }
    if (!found) {
        /* a decimal exponent: e or E, an optional sign, digits, nothing else */
        int sign = 1;
        long ex = 0;
        if (*s != 'e' && *s != 'E') return Q_SYNTAX;
        s++;
        if (*s == '+' || *s == '-') sign = *s++ == '-' ? -1 : 1;
        if (!isdig(*s)) return Q_SYNTAX;
        for (; isdig(*s); s++)
            if (ex < 100000) ex = ex * 10 + (*s - '0'); /* beyond: 0 or too big anyway */
        if (*s) return Q_SYNTAX;
        e10 += (int)(sign * ex);
    }
    for (int k = 0; k < bin; k++) { /* times 1024, digit by digit */
        int carry = 0;
        for (int i = nd - 1; i >= 0; i--) {
            int x = d[i] * 1024 + carry;
            d[i] = (unsigned char)(x % 10);
            carry = x / 10;
        }
        for (; carry; carry /= 10) {
            memmove(d + 1, d, (size_t)nd++);
            d[0] = (unsigned char)(carry % 10);
        }
    }
    while (s0 < nd && d[s0] == 0) s0++;
    if (s0 == nd) { /* zero, whatever its sign or exponent */
        *out = 0;
        return Q_OK;
    }
    if (neg) return Q_NEG;
    /* value = digits d[s0..nd) times 10^(e10 - nfrac): nint of them (or
     * zeros past them) are left of the decimal point */
    nint = nd - s0 + e10 - nfrac;
    if (nint > 19) return Q_BIG;
    for (int k = 0; k < nint; k++) v = v * 10 + (s0 + k < nd ? d[s0 + k] : 0);
    for (int i = s0 + (nint > 0 ? nint : 0); i < nd; i++)
        if (d[i]) frac = true;
    if (frac && !round_up) return Q_FINE;
    if (frac) v++;
    if (v > (uint64_t)INT64_MAX) return Q_BIG;
    *out = (int64_t)v;
    return Q_OK;
}

int us_parse_cpu(const char *s, int64_t *out) {
    int64_t v;
    if (qty(s, 3, false, &v) != Q_OK) return -1;
    *out = v;
    return 0;
}

int us_parse_memory(const char *s, int64_t *out) {
    int64_t v;
    if (qty(s, 0, true, &v) != Q_OK) return -1;
    *out = v;
    return 0;
}

/* Decimal digits of v >= 0 at out (no terminator); their count. */
static size_t digits_of(char *out, long v) {
    char t[24];
    size_t n = 0, k = 0;
    do t[n++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    while (n) out[k++] = t[--n];
    return k;
}

/* Shortest text that reads back as d, so JSON 0.1 is "0.1", not
 * "0.10000000000000001": numbers then parse exactly like strings. */
static const char *numstr(char buf[32], double d) {
    double t = fabs(d);
    int p = 1, digits = 1;
    if (d == 0) d = 0; /* -0 */
    /* a whole number below 1e15 is its digits, which the search below
     * would find after a dozen printf calls (every node has a few) */
    if (t < 1e15 && d == floor(d)) {
        size_t k = 0;
        if (d < 0) buf[k++] = '-';
        buf[k + digits_of(buf + k, (long)t)] = '\0';
        return buf;
    }
    for (; p < 17; p++) {
        snprintf(buf, 32, "%.*g", p, d);
        if (strtod(buf, NULL) == d) break;
    }
    /* at least the integer digits, so 30 is "30", not "3e+01" */
    for (; t >= 10 && digits < 17; t /= 10) digits++;
    snprintf(buf, 32, "%.*g", p > digits ? p : digits, d);
    return buf;
}

/* ---- name tables ----------------------------------------------------------- */

/* Name -> index, open addressing.  Keys point into the state's own strings,
 * which never move (only the arrays of structs holding them do).  A slot
 * keeps its key's hash beside it, so a probe reads a string only when the
 * hashes agree and growing never reads one: at a million pod names each
 * string read is a cache miss. */
typedef struct name_slot {
    const char *k;   /* NULL: empty */
    uint32_t h;      /* the key's hash: its low bits index, all of it filters */
    int v;
} name_slot;

typedef struct names {
    name_slot *s;
    size_t cap, n;
} names;

/* us_name_hash's low half: the table keeps it to compare before strcmp. */
static uint32_t hash(const char *s) { return (uint32_t)us_name_hash(s); }

/* The slot holding k, or the empty one where k would go (the table has
 * room: names_put grows it first). */
static size_t names_slot(const names *h, const char *k, uint32_t x) {
    for (size_t i = x & (h->cap - 1);; i = (i + 1) & (h->cap - 1)) {
        const name_slot *sl = &h->s[i];
        if (!sl->k || (sl->h == x && strcmp(sl->k, k) == 0)) return i;
    }
}

static int names_get(const names *h, const char *k) {
    if (!h->cap) return -1;
    const name_slot *sl = &h->s[names_slot(h, k, hash(k))];
    return sl->k ? sl->v : -1;
}

static void names_place(names *h, name_slot sl) {
    size_t i = sl.h & (h->cap - 1);
    while (h->s[i].k) i = (i + 1) & (h->cap - 1);
    h->s[i] = sl;
    h->n++;
}

/* Make room for one more name: 0, or -1 when out of memory.  Growing
 * moves the slots by their kept hashes, reading no string. */
static int names_reserve(names *h) {
    if ((h->n + 1) * 2 > h->cap) {
        names old = *h;
        size_t ncap = h->cap ? h->cap * 2 : 64;
        name_slot *ns = calloc(ncap, sizeof *ns);
        if (!ns) return -1;
        h->s = ns;
        h->cap = ncap;
        h->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.s[i].k) names_place(h, old.s[i]);
        free(old.s);
    }
    return 0;
}

/* Add k (absent) -> v; 0, or -1 when out of memory. */
static int names_put(names *h, const char *k, int v) {
    if (names_reserve(h) < 0) return -1;
    names_place(h, (name_slot){k, hash(k), v});
    return 0;
}

/* A name to add once it is known free: one probe both checks and places
 * (the pods of a large scenario are a million lookups).  Reserve, look
 * (*at: the slot; its k set when taken), then fill the slot with the
 * state's own copy of the key. */
static int names_look(names *h, const char *k, size_t *at, uint32_t *x) {
    if (names_reserve(h) < 0) return -1;
    *x = hash(k);
    *at = names_slot(h, k, *x);
    return 0;
}

static void names_fill(names *h, size_t at, const char *k, uint32_t x, int v) {
    h->s[at] = (name_slot){k, x, v};
    h->n++;
}

static void names_free(names *h) {
    free(h->s);
    memset(h, 0, sizeof *h);
}

/* Ask for the slot a lookup of a key of hash x will probe first (a hint:
 * it changes no result, and a table grown meanwhile only makes it a wasted
 * one). */
static void names_prefetch(const names *h, uint32_t x) {
    if (h->cap) __builtin_prefetch(&h->s[x & (h->cap - 1)]);
}

/* Ask for the key a lookup of a key of hash x will compare, once its slot
 * is at hand (names_prefetch some lookups before): a hit reads the table's
 * own copy of the key, a second miss when it is not asked for. */
static void names_prefetch_key(const names *h, uint32_t x) {
    if (!h->cap) return;
    for (size_t i = x & (h->cap - 1);; i = (i + 1) & (h->cap - 1)) {
        const name_slot *sl = &h->s[i];
        if (!sl->k) return;
        if (sl->h == x) {
            __builtin_prefetch(sl->k);
            return;
        }
    }
}

/* ---- messages -------------------------------------------------------------- */

typedef struct ctx {
    us_scenario *sc;
    us_state *st;        /* the state being built; NULL when standalone */
    const us_state *look; /* standalone: names are looked up here */
    us_err *err;
    const char *origin;
    names nodes, queues, wls, pods;
    us_use *used;        /* pre-existing pods, per initial node: resources and devices
                          * now (running and releasing pods) */
    us_use *planned;     /* the same where the plan ends (running and pipelined pods) */
    int *pinned;         /* per initial node: 1 + the daemonset that last put a pod there */
    size_t nused;
    int *submitted;      /* per workload: the timeline entry submitting it, or -1 */
    bool *haspods;       /* per workload: it has pre-existing pods */
} ctx;

/* Append s to dst (capacity cap), truncating. */
static void cat(char *dst, size_t cap, const char *s) {
    size_t n = strlen(dst);
    while (*s && n + 1 < cap) dst[n++] = *s++;
    dst[n] = '\0';
}

/* s as a JSON string literal, escaped and cut after max characters. */
static const char *quote_n(char *buf, const char *s, size_t max) {
    size_t n = 0, i = 0;
    buf[n++] = '"';
    for (; s[i] && i < max; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            buf[n++] = '\\';
            buf[n++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            n += (size_t)snprintf(buf + n, 7, "\\u%04x", ch);
        } else {
            buf[n++] = (char)ch;
        }
    }
    if (s[i]) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n++] = '"';
    buf[n] = '\0';
    return buf;
}

static const char *quote(char buf[QLEN], const char *s) { return quote_n(buf, s, 60); }

/* path.key, or path["key"] when key is not a plain word. */
static const char *subkey(char dst[PATHLEN], const char *path, const char *key) {
    bool plain = *key != '\0';
    char q[QLEN];
    size_t kn = 0, pn = strlen(path);
    for (const char *p = key; *p; p++, kn++)
        if (!(isdig(*p) || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              *p == '_' || *p == '-'))
            plain = false;
    /* the common case, path.key fitting, copied whole: every object the
     * API upserts builds a few such paths */
    if (plain && pn + 1 + kn < PATHLEN) {
        memcpy(dst, path, pn);
        if (pn) dst[pn++] = '.';
        memcpy(dst + pn, key, kn + 1);
        return dst;
    }
    dst[0] = '\0';
    cat(dst, PATHLEN, path);
    if (plain) {
        if (*path) cat(dst, PATHLEN, ".");
        cat(dst, PATHLEN, key);
    } else {
        cat(dst, PATHLEN, "[");
        cat(dst, PATHLEN, quote(q, key));
        cat(dst, PATHLEN, "]");
    }
    return dst;
}

/* path.key[i] */
static const char *subidx(char dst[PATHLEN], const char *path, const char *key, int i) {
    char n[24];
    subkey(dst, path, key);
    snprintf(n, sizeof n, "[%d]", i);
    cat(dst, PATHLEN, n);
    return dst;
}

/* dst, holding path.key (base characters), becomes path.key[i]: what
 * subidx writes, without building the prefix again for every element. */
static const char *subidx_next(char dst[PATHLEN], size_t base, int i) {
    char n[28];
    size_t k = 0;
    n[k++] = '[';
    k += digits_of(n + k, i);
    n[k++] = ']';
    for (size_t j = 0; j < k && base + 1 < PATHLEN; j++) dst[base++] = n[j];
    dst[base] = '\0';
    return dst;
}

/* Set err to "path.key: message" (key may be NULL); returns -1. */
static int failk(ctx *c, const char *path, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int failk(ctx *c, const char *path, const char *key, const char *fmt, ...) {
    char p[PATHLEN], m[800];
    va_list ap;
    if (key) subkey(p, path, key);
    else snprintf(p, sizeof p, "%s", path);
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return us_err_set(c->err, US_EINVAL, "%s: %s", p, m);
}

static int nomem(ctx *c) { return us_err_nomem(c->err); }

static const char *tname(const cJSON *v) {
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    return "an unknown value";
}

/* ---- fields -------------------------------------------------------------- */

/* o[key], with JSON null read as absent. */
static const cJSON *get(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNull(v) ? NULL : v;
}

/* Edit distance of two short strings (for "did you mean"); 99 when long. */
static int dist(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    int row[33];
    if (la > 32 || lb > 32) return 99;
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* Every key of o is in allowed (NULL-terminated) and appears once: strict,
 * so that a typo ("gpus") is an error rather than a silent default. */
static int check_fields(ctx *c, const cJSON *o, const char *path, const char *const *allowed) {
    for (const cJSON *f = o->child; f; f = f->next) {
        const char *k = f->string ? f->string : "", *best = NULL;
        bool ok = false;
        int bd = 3;
        /* first bytes compared inline: most fields differ there */
        for (const char *const *a = allowed; *a && !ok; a++) ok = k[0] == (*a)[0] && strcmp(k, *a) == 0;
        /* only an unknown field needs a suggestion: the distances cost */
        for (const char *const *a = allowed; *a && !ok; a++) {
            int dd = dist(k, *a);
            if (dd < bd) {
                bd = dd;
                best = *a;
            }
        }
        if (!ok && best) return failk(c, path, k, "unknown field (did you mean \"%s\"?)", best);
        if (!ok) return failk(c, path, k, "unknown field");
        /* all earlier keys are distinct allowed ones, so this stays short */
        for (const cJSON *g = o->child; g != f; g = g->next)
            if (g->string[0] == k[0] && strcmp(g->string, k) == 0)
                return failk(c, path, k, "duplicate field");
    }
    return 0;
}

/* Some key of o (arbitrary keys: labels, pools) appears twice. */
static int check_dupkeys(ctx *c, const cJSON *o, const char *path) {
    for (const cJSON *f = o->child; f; f = f->next)
        for (const cJSON *g = o->child; g != f; g = g->next)
            if (strcmp(g->string, f->string) == 0)
                return failk(c, path, f->string, "duplicate key");
    return 0;
}

static int want(ctx *c, const cJSON *v, const char *path, int (*is)(const cJSON *),
                const char *what) {
    if (!is(v)) return failk(c, path, NULL, "must be %s, not %s", what, tname(v));
    return 0;
}
static int isobj(const cJSON *v) { return cJSON_IsObject(v); }
static int isarr(const cJSON *v) { return cJSON_IsArray(v); }

/* A string field: def when absent (NULL: required).  *out is borrowed. */
static int get_strref(ctx *c, const cJSON *o, const char *path, const char *key,
                      const char *def, const char **out) {
    const cJSON *v = get(o, key);
    if (!v && !def) return failk(c, path, key, "required field is missing");
    if (v && !cJSON_IsString(v))
        return failk(c, path, key, "must be a string, not %s", tname(v));
    *out = v ? v->valuestring : def;
    if (!**out) return failk(c, path, key, "must not be empty");
    return 0;
}

/* The same, copied. */
static int get_str(ctx *c, const cJSON *o, const char *path, const char *key,
                   const char *def, char **out) {
    const char *s;
    if (get_strref(c, o, path, key, def, &s) < 0) return -1;
    *out = strdup(s);
    return *out ? 0 : nomem(c);
}

/* An object's name: a string of 1 to MAX_NAME bytes, like a Kubernetes
 * name, so that names built from it (pods <workload>-<i>) stay distinct. */
static int check_name(ctx *c, const char *path, const char *key, const char *name) {
    size_t n = strlen(name);
    if (n > MAX_NAME)
        return failk(c, path, key, "is %zu characters long, more than the %d a Kubernetes name may have",
                     n, MAX_NAME);
    return 0;
}

/* A number of seconds (or a weight): def when absent; must be >= lo, or
 * > lo when strict. */
static int get_num(ctx *c, const cJSON *o, const char *path, const char *key, bool required,
                   double def, double lo, bool strict, double *out) {
    const cJSON *v = get(o, key);
    char n[32], l[32];
    if (!v && required) return failk(c, path, key, "required field is missing");
    if (!v) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v)) return failk(c, path, key, "must be a number, not %s", tname(v));
    if (!isfinite(v->valuedouble)) return failk(c, path, key, "number is too large");
    if (v->valuedouble < lo || (strict && v->valuedouble == lo))
        return failk(c, path, key, "%s is not a number %s %s", numstr(n, v->valuedouble),
                     strict ? ">" : ">=", numstr(l, lo));
    *out = v->valuedouble;
    return 0;
}

/* A whole number in [lo, hi]; def when absent. */
static int get_int(ctx *c, const cJSON *o, const char *path, const char *key, int def,
                   int lo, int hi, int *out) {
    const cJSON *v = get(o, key);
    char n[32];
    if (!v) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v)) return failk(c, path, key, "must be a number, not %s", tname(v));
    double d = v->valuedouble;
    if (!(d >= lo && d <= hi) || d != floor(d))
        return failk(c, path, key, "%s is not a whole number from %d to %d", numstr(n, d), lo, hi);
    *out = (int)d;
    return 0;
}

static int get_bool(ctx *c, const cJSON *o, const char *path, const char *key, bool *out) {
    const cJSON *v = get(o, key);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return failk(c, path, key, "must be true or false, not %s", tname(v));
    *out = cJSON_IsTrue(v);
    return 0;
}

/* One of names[0..n); def when absent. */
static int get_enum(ctx *c, const cJSON *o, const char *path, const char *key,
                    const char *const *nm, int n, int def, const char *what, int *out) {
    const cJSON *v = get(o, key);
    char q[QLEN], list[256] = "";
    if (!v) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsString(v)) return failk(c, path, key, "must be a string, not %s", tname(v));
    for (int i = 0; i < n; i++) {
        if (strcmp(v->valuestring, nm[i]) == 0) {
            *out = i;
            return 0;
        }
        cat(list, sizeof list, i ? ", " : "");
        cat(list, sizeof list, nm[i]);
    }
    return failk(c, path, key, "%s is not %s (%s)", quote(q, v->valuestring), what, list);
}

/* A label map (string -> string). */
static int get_labels(ctx *c, const cJSON *o, const char *path, const char *key,
                      us_labels *out) {
    const cJSON *v = get(o, key), *f;
    char p[PATHLEN];
    size_t n = 0;
    out->items = NULL;
    out->n = 0;
    if (!v) return 0;
    subkey(p, path, key);
    if (want(c, v, p, isobj, "an object") < 0) goto fail;
    if (check_dupkeys(c, v, p) < 0) goto fail;
    for (f = v->child; f; f = f->next) n++;
    if (!n) return 0;
    out->items = calloc(n, sizeof *out->items);
    if (!out->items) {
        nomem(c);
        goto fail;
    }
    for (f = v->child; f; f = f->next) {
        us_kv *kv = &out->items[out->n++];
        if (!cJSON_IsString(f)) {
            failk(c, p, f->string, "must be a string, not %s", tname(f));
            goto fail;
        }
        kv->key = strdup(f->string);
        kv->value = strdup(f->valuestring);
        if (!kv->key || !kv->value) {
            nomem(c);
            goto fail;
        }
    }
    return 0;
fail:
    us_labels_free(out);
    return -1;
}

/* A quantity of resource r at v (named path.key in messages): gpu a number,
 * cpu and memory a string or a number; -1 is US_UNLIMITED when unlimited. */
static int res_value(ctx *c, const cJSON *v, const char *path, const char *key, int r,
                     bool unlimited, int64_t *out) {
    static const char *const fine[US_NRES] = {" (finer than 0.001)", " (finer than 1m)", ""};
    char num[32], q[QLEN];
    const char *s, *shown;
    int e;
    if (r == US_GPU && !cJSON_IsNumber(v))
        return failk(c, path, key, "must be a number, not %s", tname(v));
    if (!cJSON_IsNumber(v) && !cJSON_IsString(v))
        return failk(c, path, key, "must be a quantity string or a number, not %s", tname(v));
    if (cJSON_IsNumber(v)) {
        s = shown = numstr(num, v->valuedouble);
    } else {
        s = v->valuestring;
        shown = quote(q, s);
    }
    if (unlimited && strcmp(s, "-1") == 0) {
        *out = US_UNLIMITED;
        return 0;
    }
    e = qty(s, r == US_MEM ? 0 : 3, r == US_MEM, out);
    if (e == Q_OK && *out > qmax[r]) e = Q_BIG;
    if (e != Q_OK) {
        char digits[48];
        snprintf(digits, sizeof digits, " (more than %d significant digits)", QDIG);
        return failk(c, path, key, "%s is not a %s quantity%s", shown, us_res_names[r],
                     e == Q_NEG ? " (negative)" : e == Q_FINE ? fine[r] : e == Q_BIG ? " (too large)"
                     : e == Q_DIGITS ? digits : "");
    }
    return 0;
}

/* ---- nodes --------------------------------------------------------------- */

static const char *const node_fields[] = {"name", "pool", "cpu", "memory", "gpu",
                                          "labels", "unschedulable", "taints", NULL};

/* The fields of a node object into *n (zeroed first; freed on failure). */
static int node_fields_parse(ctx *c, const cJSON *o, const char *path, us_node *out) {
    us_node n;
    const cJSON *v;
    char q[QLEN], num[32], p[PATHLEN];
    memset(&n, 0, sizeof n);
    memset(out, 0, sizeof *out);
    if (want(c, o, path, isobj, "an object") < 0 || check_fields(c, o, path, node_fields) < 0)
        goto fail;
    if (get_str(c, o, path, "name", NULL, &n.name) < 0 || check_name(c, path, "name", n.name) < 0) goto fail;
    if (c->st && names_get(&c->nodes, n.name) >= 0) {
        failk(c, path, "name", "%s is a duplicate node name", quote(q, n.name));
        goto fail;
    }
    if (get_str(c, o, path, "pool", "default", &n.pool) < 0) goto fail;
    if ((v = get(o, "cpu")) && res_value(c, v, path, "cpu", US_CPU, false, &n.cap.v[US_CPU]) < 0)
        goto fail;
    if ((v = get(o, "memory")) && res_value(c, v, path, "memory", US_MEM, false, &n.cap.v[US_MEM]) < 0)
        goto fail;
    if ((v = get(o, "gpu"))) {
        double d;
        if (!cJSON_IsNumber(v)) {
            failk(c, path, "gpu", "must be a number, not %s", tname(v));
            goto fail;
        }
        d = v->valuedouble;
        if (!(d >= 0 && d <= US_MAX_GPUS) || d != floor(d)) {
            failk(c, path, "gpu", "%s is not a whole number of GPUs from 0 to %d",
                  numstr(num, d), US_MAX_GPUS);
            goto fail;
        }
        n.gpus = (int)d;
        n.cap.v[US_GPU] = (int64_t)n.gpus * US_GPU_UNIT;
    }
    if (get_labels(c, o, path, "labels", &n.labels) < 0) goto fail;
    if (get_bool(c, o, path, "unschedulable", &n.unschedulable) < 0) goto fail;
    if (us_taints_parse(get(o, "taints"), subkey(p, path, "taints"), &n.taints, c->err) < 0) goto fail;
    *out = n;
    return 0;
fail:
    us_node_free(&n);
    return -1;
}

static int parse_node(ctx *c, const cJSON *o, const char *path, bool removed, int *index) {
    us_node n;
    int idx;
    if (node_fields_parse(c, o, path, &n) < 0) return -1;
    n.removed = removed;
    idx = us_state_add_node(c->st, &n);
    memset(&n, 0, sizeof n); /* the state owns (or has freed) it now */
    if (idx < 0 || names_put(&c->nodes, c->st->nodes[idx].name, idx) < 0) return nomem(c);
    *index = idx;
    return 0;
}

/* ---- queues -------------------------------------------------------------- */

static const char *const queue_fields[] = {"name", "parent", "priority", "resources", "pools",
                                           "created_at", NULL};
static const char *const qres_fields[] = {"quota", "limit", "over_quota_weight", NULL};
static const char *const res_fields[] = {"gpu", "cpu", "memory", NULL};

/* A resources object {gpu|cpu|memory: {quota, limit, over_quota_weight}}.
 * res holds the values fields not given keep; set marks resources named. */
static int parse_resources(ctx *c, const cJSON *o, const char *path, us_qres res[US_NRES],
                           bool set[US_NRES]) {
    char p[PATHLEN], num[32];
    if (want(c, o, path, isobj, "an object") < 0 || check_fields(c, o, path, res_fields) < 0)
        return -1;
    for (int r = 0; r < US_NRES; r++) {
        const cJSON *x = get(o, us_res_names[r]), *v;
        if (!x) continue;
        subkey(p, path, us_res_names[r]);
        if (want(c, x, p, isobj, "an object") < 0 || check_fields(c, x, p, qres_fields) < 0)
            return -1;
        if ((v = get(x, "quota")) && res_value(c, v, p, "quota", r, true, &res[r].quota) < 0)
            return -1;
        if ((v = get(x, "limit")) && res_value(c, v, p, "limit", r, true, &res[r].limit) < 0)
            return -1;
        if (get_num(c, x, p, "over_quota_weight", false, res[r].over_quota_weight, 0, false,
                    &res[r].over_quota_weight) < 0)
            return -1;
        /* weights are summed and divided by their sum: bounded, the shares
         * of any number of siblings stay finite */
        if (res[r].over_quota_weight > MAX_WEIGHT)
            return failk(c, p, "over_quota_weight", "%s is more than %d",
                         numstr(num, res[r].over_quota_weight), MAX_WEIGHT);
        set[r] = true;
    }
    return 0;
}

/* The fields of a queue object into *out (parent left -1: the caller
 * resolves it). */
static int queue_fields_parse(ctx *c, const cJSON *o, const char *path, us_queue *out) {
    us_queue q;
    const cJSON *v, *f;
    char p[PATHLEN], pp[PATHLEN], qb[QLEN];
    bool set[US_NRES] = {false};
    size_t n = 0;
    memset(&q, 0, sizeof q);
    memset(out, 0, sizeof *out);
    out->parent = -1;
    q.parent = -1;
    for (int r = 0; r < US_NRES; r++) {
        q.res[r].quota = 0;
        q.res[r].limit = US_UNLIMITED;
        q.res[r].over_quota_weight = 1;
    }
    if (want(c, o, path, isobj, "an object") < 0 || check_fields(c, o, path, queue_fields) < 0)
        goto fail;
    if (get_str(c, o, path, "name", NULL, &q.name) < 0 || check_name(c, path, "name", q.name) < 0) goto fail;
    if (c->st && names_get(&c->queues, q.name) >= 0) {
        failk(c, path, "name", "%s is a duplicate queue name", quote(qb, q.name));
        goto fail;
    }
    /* the parent may come later in the array: resolved by resolve_parents */
    if ((v = get(o, "parent")) && !cJSON_IsString(v)) {
        failk(c, path, "parent", "must be a string, not %s", tname(v));
        goto fail;
    }
    if (get_int(c, o, path, "priority", 0, -MAX_PRIORITY, MAX_PRIORITY, &q.priority) < 0) goto fail;
    if (get_num(c, o, path, "created_at", false, 0, -MAX_TIME, false, &q.created_at) < 0) goto fail;
    if ((v = get(o, "resources")) && parse_resources(c, v, subkey(p, path, "resources"), q.res, set) < 0)
        goto fail;
    if ((v = get(o, "pools"))) {
        subkey(p, path, "pools");
        if (want(c, v, p, isobj, "an object") < 0 || check_dupkeys(c, v, p) < 0) goto fail;
        for (f = v->child; f; f = f->next) n++;
        if (n && !(q.pools = calloc(n, sizeof *q.pools))) {
            nomem(c);
            goto fail;
        }
        for (f = v->child; f; f = f->next) {
            us_qpool *qp = &q.pools[q.npools++];
            /* an override names only what differs: the rest is the queue's */
            memcpy(qp->res, q.res, sizeof qp->res);
            if (!*f->string) {
                failk(c, p, f->string, "a pool name must not be empty");
                goto fail;
            }
            if (!(qp->pool = strdup(f->string))) {
                nomem(c);
                goto fail;
            }
            if (parse_resources(c, f, subkey(pp, p, f->string), qp->res, qp->set) < 0) goto fail;
        }
    }
    *out = q;
    return 0;
fail:
    us_queue_free(&q);
    return -1;
}

static int parse_queue(ctx *c, const cJSON *o, const char *path) {
    us_queue q;
    int idx;
    if (queue_fields_parse(c, o, path, &q) < 0) return -1;
    idx = us_state_add_queue(c->st, &q);
    if (idx < 0 || names_put(&c->queues, c->st->queues[idx].name, idx) < 0) return nomem(c);
    return 0;
}

/* Link parents by name and reject cycles (a walk up must end at a root). */
static int resolve_parents(ctx *c, const cJSON *arr) {
    us_state *st = c->st;
    char p[PATHLEN], q[QLEN], chain[PATHLEN];
    unsigned char *color = NULL; /* 0 unseen, 1 on the current walk, 2 done */
    const cJSON *o;
    int i = 0;
    cJSON_ArrayForEach(o, arr) {
        const cJSON *v = get(o, "parent");
        if (v) {
            int pi = names_get(&c->queues, v->valuestring);
            if (pi < 0) {
                failk(c, subidx(p, "", "queues", i), "parent", "%s is not a queue",
                      quote(q, v->valuestring));
                goto fail;
            }
            st->queues[i].parent = pi;
        }
        i++;
    }
    if (st->nqueues && !(color = calloc(st->nqueues, 1))) {
        nomem(c);
        goto fail;
    }
    for (size_t s = 0; s < st->nqueues; s++) {
        int k = (int)s;
        while (k >= 0 && color[k] == 0) {
            color[k] = 1;
            k = st->queues[k].parent;
        }
        if (k >= 0 && color[k] == 1) { /* came back to this walk: k is on a cycle */
            int j = k;
            chain[0] = '\0';
            do {
                cat(chain, sizeof chain, st->queues[j].name);
                cat(chain, sizeof chain, " -> ");
                j = st->queues[j].parent;
            } while (j != k);
            cat(chain, sizeof chain, st->queues[k].name);
            failk(c, subidx(p, "", "queues", k), "parent", "%s makes a cycle: %s",
                  quote(q, st->queues[st->queues[k].parent].name), chain);
            goto fail;
        }
        for (k = (int)s; k >= 0 && color[k] == 1; k = st->queues[k].parent) color[k] = 2;
    }
    free(color);
    return 0;
fail:
    free(color);
    return -1;
}

/* ---- workloads ----------------------------------------------------------- */

static const char *const wl_fields[] = {"name", "queue", "priority", "preemptibility",
                                        "controller", "replicas", "min_member", "pool",
                                        "node_selector", "termination_grace", "submit_at",
                                        "duration", "labels", "requests", "pods", "created_at",
                                        "tolerations", "external", "pinned_pending",
                                        "succeeded", NULL};
static const char *const pod_fields[] = {"name", "node", "state", "release_at", "until_removed", "pin", "device", NULL};
static const char *const pinned_fields[] = {"name", "pin", NULL};
static const char *const pod_states[] = {"running", "pipelined", "releasing"};
static const us_pod_state pod_state_of[] = {US_POD_RUNNING, US_POD_PIPELINED, US_POD_RELEASING};
static const char *const preempt_names[] = {"preemptible", "non-preemptible", "semi-preemptible"};
static const char *const ctrl_names[] = {"none", "job", "deployment", "daemonset"};
static const struct {
    const char *name;
    int priority;
} classes[] = {{"train", 50}, {"build-preemptible", 75}, {"build", 100}, {"inference", 125}};

static int get_priority(ctx *c, const cJSON *o, const char *path, int *out) {
    const cJSON *v = get(o, "priority");
    char q[QLEN];
    if (!v || cJSON_IsNumber(v))
        return get_int(c, o, path, "priority", 50, -MAX_PRIORITY, MAX_PRIORITY, out);
    if (!cJSON_IsString(v))
        return failk(c, path, "priority", "must be a number or a class name, not %s", tname(v));
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        if (strcmp(v->valuestring, classes[i].name) == 0) {
            *out = classes[i].priority;
            return 0;
        }
    }
    return failk(c, path, "priority",
                 "%s is not a priority class (train, build-preemptible, build, inference)",
                 quote(q, v->valuestring));
}

/* The field and the label both say it; when both do, they must agree. */
static int get_preemptibility(ctx *c, const cJSON *o, const char *path, us_workload *w) {
    char lb[PATHLEN], lp[PATHLEN], q1[QLEN], q2[QLEN];
    const char *label = us_labels_get(&w->labels, US_PREEMPTIBILITY_LABEL);
    int f = -1, l = -1;
    if (get_enum(c, o, path, "preemptibility", preempt_names, 3, -1, "a preemptibility", &f) < 0)
        return -1;
    subkey(lp, subkey(lb, path, "labels"), US_PREEMPTIBILITY_LABEL);
    for (int i = 0; label && i < 3; i++)
        if (strcmp(label, preempt_names[i]) == 0) l = i;
    if (label && l < 0)
        return failk(c, lp, NULL,
                     "%s is not a preemptibility (preemptible, non-preemptible, semi-preemptible)",
                     quote(q1, label));
    if (f >= 0 && l >= 0 && f != l)
        return failk(c, path, "preemptibility", "%s disagrees with %s (%s)",
                     quote(q1, preempt_names[f]), lp, quote(q2, label));
    if (f < 0) f = l;
    if (f < 0) f = w->priority < 100 ? US_PREEMPTIBLE : US_NON_PREEMPTIBLE;
    w->preemptibility = (us_preemptibility)f;
    return 0;
}

static int get_requests(ctx *c, const cJSON *o, const char *path, bool background, us_res *req) {
    const cJSON *v = get(o, "requests"), *x;
    char p[PATHLEN], num[32];
    memset(req, 0, sizeof *req);
    if (!v) return 0;
    subkey(p, path, "requests");
    if (want(c, v, p, isobj, "an object") < 0 || check_fields(c, v, p, res_fields) < 0) return -1;
    for (int r = 0; r < US_NRES; r++)
        if ((x = get(v, us_res_names[r])) && res_value(c, x, p, us_res_names[r], r, false, &req->v[r]) < 0)
            return -1;
    /* Fractions share one device, so only a request below 1 may be one.  A
     * background workload is loaded anyway: breaking that rule blocks it with
     * a warning (us_state_check_rules), as a cluster would. */
    if (!background && req->v[US_GPU] > US_GPU_UNIT && req->v[US_GPU] % US_GPU_UNIT)
        return failk(c, p, "gpu", "%s is not a whole number of GPUs (only a request below 1 may be a fraction)",
                     numstr(num, get(v, "gpu")->valuedouble));
    return 0;
}

/* Take room for w's pod on node ni in view u (what is held now, or where
 * the plan ends); *slot as us_use_add takes it and gets the slot used.  0,
 * or -1 with the error set when it does not fit. */
static int take_room(ctx *c, us_use *u, int ni, const us_workload *w, int *slot, const char *path,
                     const char *view) {
    const us_node *n = &c->st->nodes[ni];
    char q[QLEN];
    us_res after = us_res_add(u->used, w->request);
    for (int r = 0; r < US_NRES; r++)
        if (after.v[r] > n->cap.v[r])
            return failk(c, path, "node", "%s has not enough %s for its pre-existing pods%s",
                         quote(q, n->name), us_res_names[r], view);
    if (us_req_is_fractional(w->request) && w->request.v[US_GPU] > US_GPU_UNIT)
        return failk(c, path, "node", "no node can hold a pod of %s: it asks for more than one GPU "
                     "but not whole ones", quote(q, w->name));
    if (!us_use_fits(u, n, w->request, *slot))
        return failk(c, path, "node", "%s has no GPU device left for this pod (a device in fractional "
                     "use is not free for a whole-GPU pod)%s", quote(q, n->name), view);
    *slot = us_use_add(u, n, w->request, *slot);
    return 0;
}

/* *ni, the node called name that the path's key names for a pod of w: a
 * node present at t=0, in w's pool.  0, or -1 (reported). */
static int node_at_start(ctx *c, const char *path, const char *key, const char *name, const us_workload *w,
                         int *ni) {
    const us_state *st = c->st;
    char q[QLEN], q2[QLEN], q3[QLEN];
    *ni = names_get(&c->nodes, name);
    if (*ni < 0) return failk(c, path, key, "%s is not a node", quote(q, name));
    if (st->nodes[*ni].removed || (size_t)*ni >= c->nused)
        return failk(c, path, key, "%s is not a node at t=0 (a timeline add_node adds it later)",
                     quote(q, name));
    if (strcmp(st->nodes[*ni].pool, w->pool) != 0)
        return failk(c, path, key, "%s is in pool %s, not the workload's pool %s", quote(q, name),
                     quote(q2, st->nodes[*ni].pool), quote(q3, w->pool));
    return 0;
}

/* A pod's name when the document gives none: <workload>-<i>, a
 * daemonset's pods <workload>-<node>.  Its buffer's size, then the name
 * into buf (len at least that). */
static size_t default_name_len(const us_workload *w, const char *node) {
    return strlen(w->name) + strlen(node) + 24;
}

static void default_name(char *buf, size_t len, const us_workload *w, const char *node, int i) {
    if (w->controller == US_CTRL_DAEMONSET) {
        snprintf(buf, len, "%s-%s", w->name, node);
    } else { /* the same as "%s-%d", without printf for each pod */
        size_t k = strlen(w->name);
        memcpy(buf, w->name, k);
        buf[k++] = '-';
        buf[k + digits_of(buf + k, i)] = '\0';
    }
}

/* One pre-existing pod on its node at t=0: running; releasing (terminating
 * until release_at, holding its room meanwhile; not one of the workload's
 * replicas: its controller has already replaced it); or pipelined (placed,
 * waiting for room that releasing pods still hold). */
static int parse_pod(ctx *c, const cJSON *o, const char *path, int wi, int i) {
    us_state *st = c->st;
    us_workload *w = &st->workloads[wi];
    const cJSON *v;
    const char *node, *name;
    char *gen = NULL, genbuf[256], q[QLEN], q2[QLEN];
    int slot = -1, si = -1;
    us_pod_state state;
    int ni, pi;
    size_t at;
    uint32_t hx;
    double release_at = w->termination_grace;
    if (want(c, o, path, isobj, "an object") < 0 || check_fields(c, o, path, pod_fields) < 0)
        goto fail;
    const char *pin = NULL;
    if (get_strref(c, o, path, "node", NULL, &node) < 0 ||
        get_enum(c, o, path, "state", pod_states, 3, -1, "a pre-existing pod state", &si) < 0)
        goto fail;
    /* pinned: when it is lost or evicted, its new incarnation may only go
     * back to this node (a DaemonSet's pods always are) */
    if (get(o, "pin") && get_strref(c, o, path, "pin", NULL, &pin) < 0) goto fail;
    if (pin && strcmp(pin, node) != 0) {
        failk(c, path, "pin", "%s is not the pod's node %s (a pod runs on its pin)", quote(q, pin),
              quote(q2, node));
        goto fail;
    }
    if (si < 0) {
        failk(c, path, "state", "required field is missing");
        goto fail;
    }
    state = pod_state_of[si];
    if (get(o, "release_at") && state != US_POD_RELEASING) {
        failk(c, path, "release_at", "only a releasing pod has one");
        goto fail;
    }
    if (get_num(c, o, path, "release_at", false, release_at, 0, false, &release_at) < 0) goto fail;
    /* a deletion nobody times (someone else's, in a cluster): the room is
     * held until the pod is removed, which in a simulation is never */
    bool until_removed = false;
    if (get_bool(c, o, path, "until_removed", &until_removed) < 0) goto fail;
    if (until_removed && (state != US_POD_RELEASING || get(o, "release_at"))) {
        failk(c, path, "until_removed", state != US_POD_RELEASING ? "only a releasing pod has one"
                                                                  : "a pod has release_at or until_removed, not both");
        goto fail;
    }
    if (until_removed) release_at = INFINITY;
    if (node_at_start(c, path, "node", node, w, &ni) < 0) goto fail;
    /* a fractional pod's shared device, as the engine placed it (else the
     * fullest with room): the packing a state was in loads as it was */
    if (get(o, "device")) {
        if (!us_req_is_fractional(w->request) || w->request.v[US_GPU] > US_GPU_UNIT) {
            failk(c, path, "device", "only a pod of a fraction of one GPU shares a device");
            goto fail;
        }
        if (get_int(c, o, path, "device", -1, 0, st->nodes[ni].gpus - 1, &slot) < 0) goto fail;
    }
    if (w->controller == US_CTRL_DAEMONSET) {
        /* a releasing pod may be terminating because its node stopped
         * matching: it only holds its room */
        if (state != US_POD_RELEASING && !us_labels_match(&st->nodes[ni].labels, &w->node_selector)) {
            failk(c, path, "node", "%s does not match the daemonset's node_selector", quote(q, node));
            goto fail;
        }
        /* a workload's pods are parsed together, so the last daemonset to
         * pin a node tells whether this one already did (a releasing pod
         * is a former incarnation: it pins nothing) */
        if (state != US_POD_RELEASING && c->pinned[ni] == wi + 1) {
            failk(c, path, "node", "%s already has a pod of this daemonset", quote(q, node));
            goto fail;
        }
    }
    if ((v = get(o, "name"))) {
        if (get_strref(c, o, path, "name", NULL, &name) < 0 || check_name(c, path, "name", name) < 0) goto fail;
    } else {
        /* the usual short name needs no allocation (a large scenario has
         * 100,000) */
        size_t len = default_name_len(w, node);
        if (len > sizeof genbuf && !(gen = malloc(len))) {
            nomem(c);
            goto fail;
        }
        if (!gen) {
            gen = genbuf;
            len = sizeof genbuf;
        }
        default_name(gen, len, w, node, i);
        name = gen;
    }
    /* a releasing pod is a former incarnation: it keeps its name, which
     * the pod that replaced it has too, and so may others before it (as
     * the engine lists them); names are unique among live pods */
    bool former = state == US_POD_RELEASING;
    if (names_look(&c->pods, name, &at, &hx) < 0) {
        nomem(c);
        goto fail;
    }
    if (!former && c->pods.s[at].k) {
        failk(c, path, v ? "name" : NULL, "%s is a duplicate pod name", quote(q, name));
        goto fail;
    }
    /* no node over capacity, from the first cycle on, neither now nor
     * where the plan ends: resources, then GPU devices (fractions share a
     * device up to one; a shared device is not free for a whole-GPU pod).
     * A running pod keeps one device slot in both views. */
    if (state != US_POD_PIPELINED && take_room(c, &c->used[ni], ni, w, &slot, path, "") < 0) goto fail;
    if (state != US_POD_RELEASING &&
        take_room(c, &c->planned[ni], ni, w, &slot, path, " once the releasing pods are gone") < 0)
        goto fail;
    pi = us_state_add_pod(st, wi, name, w->controller == US_CTRL_DAEMONSET || pin ? ni : -1);
    if (pi < 0) {
        nomem(c);
        goto fail;
    }
    if (!former) names_fill(&c->pods, at, st->pods[pi].name, hx, pi);
    st->pods[pi].state = state;
    st->pods[pi].node = ni;
    st->pods[pi].shared_dev = slot;  /* the device a fractional pod shares */
    if (state == US_POD_RELEASING) st->pods[pi].release_at = release_at;
    if (w->controller == US_CTRL_DAEMONSET && state != US_POD_RELEASING) c->pinned[ni] = wi + 1;
    if (gen != genbuf) free(gen);
    return 0;
fail:
    if (gen != genbuf) free(gen);
    return -1;
}

/* What parse_pod of pod o (the i-th) will look up, asked for ahead: the
 * slots of its node and name.  Returns its node's hash for the second
 * step (names_prefetch_key), 0 when there is nothing to ask for (a node
 * whose hash is 0 only goes without that hint).  Only
 * well-formed pods are looked at; parse_pod reports the rest. */
static uint32_t prefetch_pod(const ctx *c, const cJSON *o, const us_workload *w, int i) {
    const cJSON *node = NULL, *name = NULL;
    /* one walk of the pod's fields (get() would walk them per key) */
    for (const cJSON *f = cJSON_IsObject(o) ? o->child : NULL; f; f = f->next) {
        if (!f->string) continue;
        if (strcmp(f->string, "node") == 0) node = f;
        else if (strcmp(f->string, "name") == 0) name = f;
    }
    if (!cJSON_IsString(node)) return 0;
    uint32_t x = hash(node->valuestring);
    names_prefetch(&c->nodes, x);
    char buf[256];
    if (cJSON_IsString(name)) {
        names_prefetch(&c->pods, hash(name->valuestring));
    } else if ((!name || cJSON_IsNull(name)) && default_name_len(w, node->valuestring) <= sizeof buf) {
        default_name(buf, sizeof buf, w, node->valuestring, i);
        names_prefetch(&c->pods, hash(buf));
    }
    return x;
}

static int parse_pods(ctx *c, const cJSON *arr, const char *path, int wi, int *nlive) {
    const us_workload *w = &c->st->workloads[wi];
    const cJSON *o;
    char p[PATHLEN], num[32];
    int n, i = 0;
    subkey(p, path, "pods");
    if (want(c, arr, p, isarr, "an array") < 0) return -1;
    n = cJSON_GetArraySize(arr);
    /* releasing pods are former incarnations, not replicas */
    int live = 0;
    cJSON_ArrayForEach(o, arr) {
        const cJSON *state = cJSON_IsObject(o) ? get(o, "state") : NULL;
        live += !(cJSON_IsString(state) && strcmp(state->valuestring, "releasing") == 0);
    }
    if (w->controller != US_CTRL_DAEMONSET && live > w->replicas)
        return failk(c, p, NULL, "%d pre-existing pods that are not releasing, but only %d replicas",
                     live, w->replicas);
    /* the simulator submits such a workload at t=0 and creates only the
     * pods that are missing */
    if (n > 0 && w->submit_at != 0)
        return failk(c, p, NULL, "a workload with pre-existing pods must be submitted at 0, not %s",
                     numstr(num, w->submit_at));
    size_t base = strlen(subkey(p, path, "pods"));
    /* Pods ahead, asked for: a million pods are a million probes of the
     * pod and node name tables, each a cache miss, and most of loading a
     * large scenario waited on them.  AHEAD pods ahead, the slots
     * (prefetch_pod); half as far, the node's key, its slot now at hand. */
    enum { AHEAD = 12, HALF = AHEAD / 2 };
    uint32_t node_hash[AHEAD] = {0};
    const cJSON *ahead = arr->child;
    for (int k = 0; k < AHEAD && ahead; k++, ahead = ahead->next)
        node_hash[k] = prefetch_pod(c, ahead, w, k);
    cJSON_ArrayForEach(o, arr) {
        if (node_hash[(i + HALF) % AHEAD]) names_prefetch_key(&c->nodes, node_hash[(i + HALF) % AHEAD]);
        if (parse_pod(c, o, subidx_next(p, base, i), wi, i) < 0) return -1;
        /* pod i's entry is free: pod i + AHEAD's goes there */
        node_hash[i % AHEAD] = ahead ? prefetch_pod(c, ahead, w, i + AHEAD) : 0;
        if (ahead) ahead = ahead->next;
        i++;
    }
    c->haspods[wi] = n > 0;
    *nlive = live;
    return 0;
}

/* Pending pods pinned to a node (docs/scenario.md, pinned_pending): the
 * new incarnations of pinned pods that were lost or evicted, waiting to go
 * back there.  What us_engine_state_json writes for them, so that a state
 * loads with its pins (else they loaded as replicas free to go anywhere).
 * They are among the replicas, beside the nlive pre-existing pods that are
 * not releasing. */
static int parse_pinned_pending(ctx *c, const cJSON *arr, const char *path, int wi, int nlive) {
    us_state *st = c->st;
    const us_workload *w = &st->workloads[wi];
    const cJSON *o;
    char p[PATHLEN], q[QLEN], num[32];
    int i = 0;
    subkey(p, path, "pinned_pending");
    if (want(c, arr, p, isarr, "an array") < 0) return -1;
    int n = cJSON_GetArraySize(arr);
    if (n == 0) return 0;
    if (w->controller == US_CTRL_DAEMONSET)
        return failk(c, p, NULL, "a daemonset's pods are pinned by their node, not listed here");
    if (w->external) return failk(c, p, NULL, "an external workload's pods are never pending here");
    if (w->submit_at != 0)
        return failk(c, p, NULL, "a workload with pending pods must be submitted at 0, not %s",
                     numstr(num, w->submit_at));
    if (nlive + n > w->replicas)
        return failk(c, p, NULL, "%d pre-existing pods that are not releasing and %d pinned pending "
                     "pods, but only %d replicas", nlive, n, w->replicas);
    size_t base = strlen(p);
    cJSON_ArrayForEach(o, arr) {
        const char *at_path = subidx_next(p, base, i++), *name, *pin;
        size_t at;
        uint32_t hx;
        if (want(c, o, at_path, isobj, "an object") < 0 || check_fields(c, o, at_path, pinned_fields) < 0)
            return -1;
        if (get_strref(c, o, at_path, "name", NULL, &name) < 0 || check_name(c, at_path, "name", name) < 0 ||
            get_strref(c, o, at_path, "pin", NULL, &pin) < 0)
            return -1;
        int ni;
        if (node_at_start(c, at_path, "pin", pin, w, &ni) < 0) return -1;
        if (names_look(&c->pods, name, &at, &hx) < 0) return nomem(c);
        if (c->pods.s[at].k) return failk(c, at_path, "name", "%s is a duplicate pod name", quote(q, name));
        int pi = us_state_add_pod(st, wi, name, ni);  /* pending, on no node */
        if (pi < 0) return nomem(c);
        names_fill(&c->pods, at, st->pods[pi].name, hx, pi);
    }
    c->haspods[wi] = true;
    return 0;
}

/* The fields of a workload object, except its pre-existing pods, into
 * *out; from the timeline (tl) it is submitted at `at`. */
static int workload_fields_parse(ctx *c, const cJSON *o, const char *path, bool tl, double at,
                                 us_workload *out) {
    us_workload w;
    const char *qname, *bg;
    char q[QLEN], tp[PATHLEN];
    int ctrl = US_CTRL_NONE, qi;
    const us_state *look = c->st ? c->st : c->look;
    memset(&w, 0, sizeof w);
    memset(out, 0, sizeof *out);
    w.queue = -1;
    w.state = US_WL_WAITING;
    w.started_at = -1;
    w.duration = -1;
    if (want(c, o, path, isobj, "an object") < 0 || check_fields(c, o, path, wl_fields) < 0)
        goto fail;
    if (tl && get(o, "submit_at")) {
        failk(c, path, "submit_at", "not allowed in a timeline submit (its \"at\" is the submit time)");
        goto fail;
    }
    if (get_str(c, o, path, "name", NULL, &w.name) < 0 || check_name(c, path, "name", w.name) < 0) goto fail;
    if (c->st && names_get(&c->wls, w.name) >= 0) {
        failk(c, path, "name", "%s is a duplicate workload name", quote(q, w.name));
        goto fail;
    }
    if (get_bool(c, o, path, "external", &w.external) < 0) goto fail;
    /* an external workload is in no queue: it draws on no quota */
    if (w.external && get(o, "queue")) {
        failk(c, path, "queue", "an external workload is in no queue (the engine does not schedule it)");
        goto fail;
    }
    if (!w.external) {
        if (get_strref(c, o, path, "queue", NULL, &qname) < 0) goto fail;
        qi = c->st ? names_get(&c->queues, qname) : us_state_queue_index(look, qname);
        if (qi < 0) {
            failk(c, path, "queue", "%s is not a queue", quote(q, qname));
            goto fail;
        }
        if (!look->queues[qi].leaf) {
            failk(c, path, "queue", "%s is not a leaf queue", quote(q, qname));
            goto fail;
        }
        w.queue = qi;
    }
    if (get_labels(c, o, path, "labels", &w.labels) < 0) goto fail;
    bg = us_labels_get(&w.labels, US_BACKGROUND_LABEL);
    /* background is a rule of what the engine schedules: an external pod
     * holds its room whatever its labels say */
    w.background = !w.external && bg && strcmp(bg, "true") == 0;
    if (get_priority(c, o, path, &w.priority) < 0) goto fail;
    if (get_preemptibility(c, o, path, &w) < 0) goto fail;
    if (get_enum(c, o, path, "controller", ctrl_names, 4, US_CTRL_NONE, "a controller", &ctrl) < 0)
        goto fail;
    w.controller = (us_controller)ctrl;
    /* an external workload may have no live pod (its last one terminates) */
    if (get_int(c, o, path, "replicas", 1, w.external ? 0 : 1, MAX_REPLICAS, &w.replicas) < 0) goto fail;
    if (get_int(c, o, path, "min_member",
                (w.controller == US_CTRL_NONE || w.controller == US_CTRL_JOB) && w.replicas > 0 ? w.replicas : 1, 1,
                MAX_REPLICAS, &w.min_member) < 0)
        goto fail;
    /* pods that ran to completion: a gang is whole with some of them, and
     * its controller keeps only replicas pods beside them */
    if (get_int(c, o, path, "succeeded", 0, 0, MAX_REPLICAS, &w.succeeded) < 0) goto fail;
    if (w.succeeded > 0 && (w.controller == US_CTRL_DAEMONSET || w.external)) {
        failk(c, path, "succeeded", "%s", w.external ? "an external workload's pods are its own scheduler's business"
                                                     : "a daemonset's pods do not run to completion");
        goto fail;
    }
    /* a daemonset's size is its matching nodes, unknown until it runs */
    if (w.controller != US_CTRL_DAEMONSET && !w.external && w.min_member > w.replicas + w.succeeded) {
        if (w.succeeded)
            failk(c, path, "min_member", "%d is more than replicas (%d) and succeeded (%d) together",
                  w.min_member, w.replicas, w.succeeded);
        else
            failk(c, path, "min_member", "%d is more than replicas (%d)", w.min_member, w.replicas);
        goto fail;
    }
    if (get_str(c, o, path, "pool", "default", &w.pool) < 0) goto fail;
    if (get_labels(c, o, path, "node_selector", &w.node_selector) < 0) goto fail;
    if (us_tolerations_parse(get(o, "tolerations"), subkey(tp, path, "tolerations"), &w.tolerations,
                             c->err) < 0)
        goto fail;
    if (get_num(c, o, path, "termination_grace", false, 30, 0, false, &w.termination_grace) < 0)
        goto fail;
    if (tl) w.submit_at = at;
    else if (get_num(c, o, path, "submit_at", false, 0, 0, false, &w.submit_at) < 0) goto fail;
    if (get_num(c, o, path, "duration", false, -1, 0, true, &w.duration) < 0) goto fail;
    /* NAN: not given, the submit time once it is known (us_life_submit) */
    if (get_num(c, o, path, "created_at", false, NAN, -MAX_TIME, false, &w.created_at) < 0) goto fail;
    if (get_requests(c, o, path, w.background, &w.request) < 0) goto fail;
    *out = w;
    return 0;
fail:
    us_workload_free(&w);
    return -1;
}

/* A workload object with its pre-existing pods, added to the state. */
static int parse_workload(ctx *c, const cJSON *o, const char *path, bool tl, double at, int *index) {
    us_workload w;
    const cJSON *v;
    int idx;
    if (workload_fields_parse(c, o, path, tl, at, &w) < 0) return -1;
    idx = us_state_add_workload(c->st, &w);
    if (idx < 0 || names_put(&c->wls, c->st->workloads[idx].name, idx) < 0) return nomem(c);
    int nlive = 0;
    if ((v = get(o, "pods")) && parse_pods(c, v, path, idx, &nlive) < 0) return -1;
    if ((v = get(o, "pinned_pending")) && parse_pinned_pending(c, v, path, idx, nlive) < 0) return -1;
    *index = idx;
    return 0;
}

/* ---- timeline ------------------------------------------------------------ */

static const char *const tl_fields[] = {"at", "action", "workload", "node", "dir", NULL};

/* dir, relative to the scenario file's directory when origin is a path. */
static char *resolve_dir(const char *origin, const char *dir) {
    const char *slash = origin ? strrchr(origin, '/') : NULL;
    size_t n;
    char *out;
    if (dir[0] == '/' || !slash) return strdup(dir);
    n = (size_t)(slash - origin) + 1;
    if (!(out = malloc(n + strlen(dir) + 1))) return NULL;
    memcpy(out, origin, n);
    strcpy(out + n, dir);
    return out;
}

/* A name that an entry refers to, looked up in h. */
static int ref(ctx *c, const cJSON *o, const char *path, const char *key, const names *h,
               const char *kind, int *out) {
    const char *s;
    char q[QLEN];
    if (get_strref(c, o, path, key, NULL, &s) < 0) return -1;
    if ((*out = names_get(h, s)) < 0) return failk(c, path, key, "%s is not a %s", quote(q, s), kind);
    return 0;
}

static int parse_entry(ctx *c, const cJSON *o, const char *path, int ti, us_tl_entry *e) {
    static const char *const keys[] = {"workload", "node", "dir"};
    const char *dir;
    char p[PATHLEN], q[QLEN], num[32], list[256] = "";
    const cJSON *v;
    int a = -1, own;
    e->workload = e->node = -1;
    if (want(c, o, path, isobj, "an object") < 0 || check_fields(c, o, path, tl_fields) < 0) return -1;
    if (get_num(c, o, path, "at", true, 0, 0, false, &e->at) < 0) return -1;
    if (!(v = get(o, "action"))) return failk(c, path, "action", "required field is missing");
    if (!cJSON_IsString(v)) return failk(c, path, "action", "must be a string, not %s", tname(v));
    for (int i = 0; i < NACTIONS; i++) {
        if (strcmp(v->valuestring, us_tl_action_names[i]) == 0) a = i;
        cat(list, sizeof list, i ? ", " : "");
        cat(list, sizeof list, us_tl_action_names[i]);
    }
    if (a < 0) return failk(c, path, "action", "%s is not an action (%s)", quote(q, v->valuestring), list);
    e->action = (us_tl_action)a;
    own = a <= US_TL_COMPLETE ? 0 : a <= US_TL_UNCORDON ? 1 : 2;
    for (int k = 0; k < 3; k++)
        if (k != own && get(o, keys[k]))
            return failk(c, path, keys[k], "not a field of a %s action", quote(q, v->valuestring));
    switch (e->action) {
    case US_TL_SUBMIT:
        if (!(v = get(o, "workload"))) return failk(c, path, "workload", "required field is missing");
        if (cJSON_IsObject(v)) {
            if (parse_workload(c, v, subkey(p, path, "workload"), true, e->at, &e->workload) < 0)
                return -1;
        } else {
            us_workload *w;
            if (!cJSON_IsString(v))
                return failk(c, path, "workload", "must be a workload name or object, not %s", tname(v));
            if (ref(c, o, path, "workload", &c->wls, "workload", &e->workload) < 0) return -1;
            w = &c->st->workloads[e->workload];
            if (c->submitted[e->workload] >= 0)
                return failk(c, path, "workload", "%s is already submitted by timeline[%d]",
                             quote(q, w->name), c->submitted[e->workload]);
            /* its pods are running at t=0, so it is submitted then */
            if (e->at != 0 && c->haspods[e->workload])
                return failk(c, path, "workload",
                             "%s has pre-existing pods, so it cannot be submitted at %s",
                             quote(q, w->name), numstr(num, e->at));
            w->submit_at = e->at;
        }
        c->submitted[e->workload] = ti;
        return 0;
    case US_TL_DELETE:
    case US_TL_COMPLETE:
        return ref(c, o, path, "workload", &c->wls, "workload", &e->workload);
    case US_TL_ADD_NODE:
        if (!(v = get(o, "node"))) return failk(c, path, "node", "required field is missing");
        return parse_node(c, v, subkey(p, path, "node"), true, &e->node);
    case US_TL_REMOVE_NODE:
    case US_TL_CORDON:
    case US_TL_UNCORDON:
        return ref(c, o, path, "node", &c->nodes, "node", &e->node);
    case US_TL_RELOAD_POLICIES:
        if (get_strref(c, o, path, "dir", NULL, &dir) < 0) return -1;
        if (!(e->dir = resolve_dir(c->origin, dir))) return nomem(c);
        return 0;
    }
    return 0;
}

/* Stable merge sort by `at`: file order breaks ties. */
static int sort_timeline(us_tl_entry *a, size_t n) {
    us_tl_entry *tmp;
    if (n < 2) return 0;
    if (!(tmp = malloc(n * sizeof *tmp))) return -1;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = a[j].at < a[i].at ? a[j++] : a[i++];
            while (i < mid) tmp[k++] = a[i++];
            while (j < hi) tmp[k++] = a[j++];
        }
        memcpy(a, tmp, n * sizeof *a);
    }
    free(tmp);
    return 0;
}

/* ---- the document -------------------------------------------------------- */

static const char *const top_fields[] = {"name", "cycle_interval", "horizon", "nodes",
                                         "queues", "workloads", "timeline", NULL};

/* An optional top-level array. */
static int top_array(ctx *c, const cJSON *root, const char *key, const cJSON **out) {
    *out = get(root, key);
    if (*out && !cJSON_IsArray(*out))
        return failk(c, key, NULL, "must be an array, not %s", tname(*out));
    return 0;
}

static void line_col(const char *buf, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (buf[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* The members whose arrays are read an element at a time: at 130,000
 * nodes their trees would be most of the peak memory of a load. */
static const char *const split_keys[] = {"nodes", "workloads", NULL};

/* The document's root when it was split (jsonsplit.h): every member parsed
 * alone, in order, except the split arrays, which are empty here and read
 * through items.  NULL when memory runs out. */
static cJSON *split_root(const char *text, const us_jdoc *d) {
    cJSON *root = cJSON_CreateObject();
    for (size_t k = 0; root && k < d->n; k++) {
        const us_jmember *m = &d->members[k];
        cJSON *key = cJSON_ParseWithLengthOpts(text + m->key.off, m->key.len, NULL, 0);
        cJSON *v = m->split ? cJSON_CreateArray()
                            : cJSON_ParseWithLengthOpts(text + m->value.off, m->value.len, NULL, 0);
        if (!key || !v || !cJSON_IsString(key) || !cJSON_AddItemToObject(root, key->valuestring, v)) {
            cJSON_Delete(v);
            cJSON_Delete(root);
            root = NULL;
        }
        cJSON_Delete(key);
    }
    return root;
}

/* The elements of a top-level array, from the whole tree or parsed a piece
 * at a time (each piece freed when the next is read). */
typedef struct items {
    const cJSON *at;        /* whole tree: the next element */
    const char *text;       /* split: the document */
    const us_jmember *m;    /* split: the member, or NULL when not split */
    size_t i;
    cJSON *piece;           /* split: the element read last */
} items;

/* arr is the array in the root (NULL when absent); the member of the same
 * name is used when it was split. */
static void items_init(items *it, const cJSON *arr, const char *text, const us_jdoc *d, const char *key) {
    memset(it, 0, sizeof *it);
    it->at = arr ? arr->child : NULL;
    it->text = text;
    for (size_t k = 0; arr && d && k < d->n && !it->m; k++) {
        const us_jmember *m = &d->members[k];
        if (m->split && m->key.len == strlen(key) + 2 && memcmp(text + m->key.off + 1, key, m->key.len - 2) == 0)
            it->m = m;
    }
}

static size_t items_count(const items *it, const cJSON *arr) {
    return it->m ? it->m->nitems : (size_t)cJSON_GetArraySize(arr);
}

/* The next element; NULL at the end, or with *oom set when memory ran out. */
static const cJSON *items_next(items *it, bool *oom) {
    const cJSON *o;
    *oom = false;
    if (!it->m) {
        o = it->at;
        if (o) it->at = o->next;
        return o;
    }
    cJSON_Delete(it->piece);
    it->piece = NULL;
    if (it->i == it->m->nitems) return NULL;
    const us_jspan *sp = &it->m->items[it->i++];
    if (!(it->piece = cJSON_ParseWithLengthOpts(it->text + sp->off, sp->len, NULL, 0))) *oom = true;
    return it->piece;
}

static void items_free(items *it) {
    cJSON_Delete(it->piece);
    it->piece = NULL;
}

int us_scenario_load_string(us_scenario *sc, const char *json, size_t len, const char *origin,
                            us_err *err) {
    ctx c;
    cJSON *root = NULL;
    char *buf = NULL, p[PATHLEN];
    const char *end = NULL, *nul;
    const cJSON *nodes, *queues, *wls, *tl, *o;
    int rc = -1, i, line, col, idx, split;
    size_t nsub;
    long bad;
    us_jdoc jd = {0};
    items nit = {0}, wit = {0};
    bool oom = false;

    memset(sc, 0, sizeof *sc);
    us_state_init(&sc->state);
    memset(&c, 0, sizeof c);
    c.sc = sc;
    c.st = &sc->state;
    c.err = err;
    c.origin = origin;

    /* Strict JSON (valid UTF-8, no NUL: jsonsplit.h) is read a piece at a
     * time; anything else goes the old way, checked and parsed whole by
     * cJSON, which then accepts it or names where it fails */
    if ((split = us_jsplit(json, len, split_keys, &jd)) < 0) {
        nomem(&c);
        goto fail;
    }
    if (split) {
        if (!(root = split_root(json, &jd))) {
            nomem(&c);
            goto fail;
        }
    } else {
        /* cJSON wants a terminated string; a NUL inside the text would end
         * it early and hide what follows, so that is a syntax error */
        if (len && (nul = memchr(json, '\0', len))) {
            line_col(json, (size_t)(nul - json), &line, &col);
            us_err_set(err, US_EINVAL, "invalid JSON at line %d, column %d: a NUL byte", line, col);
            goto fail;
        }
        /* JSON is UTF-8: invalid bytes would reach names, and from there
         * the output, which must stay valid */
        if ((bad = us_utf8_invalid(json, len)) >= 0) {
            line_col(json, (size_t)bad, &line, &col);
            us_err_set(err, US_EINVAL, "invalid UTF-8 at byte offset %ld (line %d, column %d): byte 0x%02x",
                       bad, line, col, (unsigned)(unsigned char)json[bad]);
            goto fail;
        }
        if (!(buf = malloc(len + 1))) {
            nomem(&c);
            goto fail;
        }
        if (len) memcpy(buf, json, len);
        buf[len] = '\0';
        if (!(root = cJSON_ParseWithOpts(buf, &end, 1))) {
            size_t off = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
            line_col(buf, off, &line, &col);
            us_err_set(err, US_EINVAL, "invalid JSON at line %d, column %d", line, col);
            goto fail;
        }
        /* the tree holds its own copies: the copy goes now */
        free(buf);
        buf = NULL;
    }
    if (!cJSON_IsObject(root)) {
        us_err_set(err, US_EINVAL, "the document must be a JSON object, not %s", tname(root));
        goto fail;
    }
    if (check_fields(&c, root, "", top_fields) < 0) goto fail;
    if ((o = get(root, "name")) && !cJSON_IsString(o)) {
        failk(&c, "name", NULL, "must be a string, not %s", tname(o));
        goto fail;
    }
    if (!(sc->name = strdup(o ? o->valuestring : ""))) {
        nomem(&c);
        goto fail;
    }
    if (get_num(&c, root, "", "cycle_interval", false, 10, 0, true, &sc->cycle_interval) < 0 ||
        get_num(&c, root, "", "horizon", false, -1, 0, false, &sc->horizon) < 0)
        goto fail;
    if (top_array(&c, root, "nodes", &nodes) < 0 || top_array(&c, root, "queues", &queues) < 0 ||
        top_array(&c, root, "workloads", &wls) < 0 || top_array(&c, root, "timeline", &tl) < 0)
        goto fail;
    items_init(&nit, nodes, json, split ? &jd : NULL, "nodes");
    items_init(&wit, wls, json, split ? &jd : NULL, "workloads");

    i = 0;
    while ((o = items_next(&nit, &oom))) {
        if (parse_node(&c, o, subidx(p, "", "nodes", i++), false, &idx) < 0) goto fail;
    }
    items_free(&nit);
    if (oom) {
        nomem(&c);
        goto fail;
    }
    c.nused = c.st->nnodes;
    if (c.nused && (!(c.used = calloc(c.nused, sizeof *c.used)) ||
                    !(c.planned = calloc(c.nused, sizeof *c.planned)) ||
                    !(c.pinned = calloc(c.nused, sizeof *c.pinned)))) {
        nomem(&c);
        goto fail;
    }

    i = 0;
    cJSON_ArrayForEach(o, queues) {
        if (parse_queue(&c, o, subidx(p, "", "queues", i++)) < 0) goto fail;
    }
    if (queues && resolve_parents(&c, queues) < 0) goto fail;
    us_state_derive_queues(c.st);

    nsub = items_count(&wit, wls) + (size_t)cJSON_GetArraySize(tl);
    if (nsub && (!(c.submitted = malloc(nsub * sizeof *c.submitted)) ||
                 !(c.haspods = calloc(nsub, sizeof *c.haspods)))) {
        nomem(&c);
        goto fail;
    }
    for (size_t k = 0; k < nsub; k++) c.submitted[k] = -1;
    i = 0;
    while ((o = items_next(&wit, &oom))) {
        if (parse_workload(&c, o, subidx(p, "", "workloads", i++), false, 0, &idx) < 0) goto fail;
    }
    items_free(&wit);
    if (oom) {
        nomem(&c);
        goto fail;
    }

    if (tl && cJSON_GetArraySize(tl) > 0) {
        sc->timeline = calloc((size_t)cJSON_GetArraySize(tl), sizeof *sc->timeline);
        if (!sc->timeline) {
            nomem(&c);
            goto fail;
        }
    }
    i = 0;
    cJSON_ArrayForEach(o, tl) {
        /* counted first, so a failed entry's dir is freed with the rest */
        us_tl_entry *e = &sc->timeline[sc->ntimeline++];
        if (parse_entry(&c, o, subidx(p, "", "timeline", i), i, e) < 0) goto fail;
        i++;
    }
    if (sort_timeline(sc->timeline, sc->ntimeline) < 0) {
        nomem(&c);
        goto fail;
    }
    us_state_derive_queues(c.st);
    us_state_check_rules(c.st);
    rc = 0;
fail:
    names_free(&c.nodes);
    names_free(&c.queues);
    names_free(&c.wls);
    names_free(&c.pods);
    free(c.used);
    free(c.planned);
    free(c.pinned);
    free(c.submitted);
    free(c.haspods);
    items_free(&nit);
    items_free(&wit);
    us_jdoc_free(&jd);
    cJSON_Delete(root);
    free(buf);
    if (rc < 0) us_scenario_free(sc);
    return rc;
}

/* ---- one object at a time (the embedding API) ------------------------------ */

/* A context that builds no state: duplicates are the caller's business and
 * names are looked up in look (may be NULL when nothing is looked up). */
static void standalone(ctx *c, const us_state *look, us_err *err) {
    memset(c, 0, sizeof *c);
    c->look = look;
    c->err = err;
}

int us_scenario_parse_node(const cJSON *o, const char *path, us_node *out, us_err *err) {
    ctx c;
    standalone(&c, NULL, err);
    return node_fields_parse(&c, o, path, out);
}

int us_scenario_parse_queue(const cJSON *o, const us_state *st, const char *path, us_queue *out,
                            us_err *err) {
    ctx c;
    const cJSON *v;
    char q[QLEN];
    standalone(&c, st, err);
    if (queue_fields_parse(&c, o, path, out) < 0) return -1;
    if ((v = get(o, "parent")) && (out->parent = us_state_queue_index(st, v->valuestring)) < 0) {
        failk(&c, path, "parent", "%s is not a queue", quote(q, v->valuestring));
        us_queue_free(out);
        memset(out, 0, sizeof *out);
        return -1;
    }
    return 0;
}

int us_scenario_parse_workload(const cJSON *o, const us_state *st, const char *path,
                               us_workload *out, us_err *err) {
    ctx c;
    standalone(&c, st, err);
    memset(out, 0, sizeof *out);
    /* pre-existing pods name nodes and take room: only a whole scenario
     * can check them */
    if (cJSON_IsObject(o) && get(o, "pods"))
        return failk(&c, path, "pods", "pre-existing pods belong to a whole scenario");
    if (cJSON_IsObject(o) && get(o, "pinned_pending"))
        return failk(&c, path, "pinned_pending", "pending pods belong to a whole scenario");
    return workload_fields_parse(&c, o, path, false, 0, out);
}

int us_scenario_load_file(us_scenario *sc, const char *path, us_err *err) {
    FILE *f = NULL;
    char *buf = NULL, q[160 * 6 + 8]; /* a path of up to 160 escaped chars */
    size_t n = 0, cap = 0;
    int rc = -1;
    memset(sc, 0, sizeof *sc);
    if (!(f = fopen(path, "rb"))) {
        us_err_set(err, US_EIO, "cannot read %s: %s", quote_n(q, path, 160), strerror(errno));
        goto fail;
    }
    for (;;) {
        size_t k;
        if (n == cap) {
            char *nb;
            if (cap > SIZE_MAX / 4) {
                us_err_nomem(err);
                goto fail;
            }
            cap = cap ? cap * 2 : 65536;
            if (!(nb = realloc(buf, cap))) {
                us_err_nomem(err);
                goto fail;
            }
            buf = nb;
        }
        k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) {
            if (ferror(f)) {
                us_err_set(err, US_EIO, "cannot read %s: %s", quote_n(q, path, 160), strerror(errno));
                goto fail;
            }
            break;
        }
    }
    rc = us_scenario_load_string(sc, buf, n, path, err);
fail:
    if (f) fclose(f);
    free(buf);
    return rc;
}

void us_scenario_free(us_scenario *sc) {
    free(sc->name);
    us_state_free(&sc->state);
    for (size_t i = 0; i < sc->ntimeline; i++) free(sc->timeline[i].dir);
    free(sc->timeline);
    memset(sc, 0, sizeof *sc);
}
