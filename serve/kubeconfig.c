/*
 * kubeconfig.c — reading a kubeconfig file or the in-cluster service
 * account into an sv_config (see kubeconfig.h).  libyaml parses; this file
 * only walks the document Kubernetes' way: the current (or a named)
 * context names a cluster and a user; file paths are relative to the
 * kubeconfig's own directory; -data fields are base64.  It never reads a
 * token file's contents (http.c does, before each use: tokens rotate).
 */
#include "kubeconfig.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef struct ctx {
    const char *file;
    yaml_document_t *doc;
    char *err;
    size_t errlen;
} ctx;

static int fail(ctx *c, const yaml_node_t *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(ctx *c, const yaml_node_t *at, const char *fmt, ...) {
    char m[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    if (at) snprintf(c->err, c->errlen, "%s:%zu: %s", c->file, at->start_mark.line + 1, m);
    else snprintf(c->err, c->errlen, "%s: %s", c->file, m);
    return -1;
}

static const char *scalar(const yaml_node_t *n) {
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Value of key in mapping m, or NULL. */
static yaml_node_t *get(ctx *c, const yaml_node_t *m, const char *key) {
    if (!m || m->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = scalar(yaml_document_get_node(c->doc, p->key));
        if (k && strcmp(k, key) == 0) return yaml_document_get_node(c->doc, p->value);
    }
    return NULL;
}

/* A string field (absent: *out NULL); a non-string is an error naming path.key. */
static int get_str(ctx *c, const yaml_node_t *m, const char *path, const char *key, char **out) {
    yaml_node_t *v = get(c, m, key);
    *out = NULL;
    if (!v) return 0;
    if (!scalar(v)) return fail(c, v, "%s.%s: must be a string", path, key);
    if (!(*out = strdup(scalar(v)))) return fail(c, v, "out of memory");
    return 0;
}

/* The entry of list `list` (clusters, users, contexts) named name: its
 * inner object (`cluster`, `user`, `context`); its index in *idx. */
static yaml_node_t *find_named(ctx *c, const char *list, const char *inner, const char *name,
                               int *idx) {
    yaml_node_t *seq = get(c, yaml_document_get_root_node(c->doc), list);
    if (!seq || seq->type != YAML_SEQUENCE_NODE) return NULL;
    int i = 0;
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++, i++) {
        yaml_node_t *e = yaml_document_get_node(c->doc, *it);
        const char *n = scalar(get(c, e, "name"));
        if (n && strcmp(n, name) == 0) {
            *idx = i;
            return get(c, e, inner);
        }
    }
    return NULL;
}

static int b64val(int ch) {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
}

/* Standard base64 (padding optional, whitespace ignored) into a new
 * NUL-terminated buffer; -1 when s is not base64. */
static int b64decode(const char *s, unsigned char **out, size_t *len) {
    size_t n = strlen(s), k = 0;
    unsigned char *d = malloc(n / 4 * 3 + 4);
    unsigned acc = 0;
    int bits = 0, pad = 0;
    if (!d) return -1;
    for (const char *p = s; *p; p++) {
        if (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') continue;
        if (*p == '=') {
            pad++;
            continue;
        }
        int v = b64val((unsigned char)*p);
        if (v < 0 || pad) goto bad;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            d[k++] = (unsigned char)(acc >> bits);
        }
    }
    if (pad > 2 || bits >= 6) goto bad;
    d[k] = '\0';
    *out = d;
    *len = k;
    return 0;
bad:
    free(d);
    return -1;
}

/* A blob from `key` (a path, relative to dir) or `key-data` (base64). */
static int get_blob(ctx *c, const yaml_node_t *m, const char *path, const char *key, const char *dir,
                    sv_blob *out) {
    char dkey[64];
    char *file = NULL, *data = NULL;
    int rc = -1;
    memset(out, 0, sizeof *out);
    snprintf(dkey, sizeof dkey, "%s-data", key);
    if (get_str(c, m, path, key, &file) < 0 || get_str(c, m, path, dkey, &data) < 0) goto done;
    if (data && *data) {
        if (b64decode(data, &out->data, &out->len) < 0) {
            fail(c, get(c, m, dkey), "%s.%s: not base64", path, dkey);
            goto done;
        }
    } else if (file && *file) {
        size_t n = strlen(dir) + strlen(file) + 2;
        if (!(out->file = malloc(n))) {
            fail(c, NULL, "out of memory");
            goto done;
        }
        if (file[0] == '/') snprintf(out->file, n, "%s", file);
        else snprintf(out->file, n, "%s/%s", dir, file);
    }
    rc = 0;
done:
    free(file);
    free(data);
    return rc;
}

static int load_doc(ctx *c, const char *context, const char *dir, sv_config *out) {
    yaml_node_t *root = yaml_document_get_root_node(c->doc), *ctxo, *cl, *us, *v;
    char *cur = NULL, *cname = NULL, *uname = NULL, path[64];
    int ci = 0, ki = 0, ui = 0, rc = -1;
    static const char *const unsupported[] = {"exec", "auth-provider", "username", "password", NULL};

    if (!root || root->type != YAML_MAPPING_NODE) return fail(c, root, "not a kubeconfig (a YAML mapping)");
    if (!context) {
        if (get_str(c, root, "", "current-context", &cur) < 0) goto done;
        if (!cur || !*cur) {
            fail(c, root, "current-context: not set (name a context with --context)");
            goto done;
        }
        context = cur;
    }
    if (!(ctxo = find_named(c, "contexts", "context", context, &ci))) {
        fail(c, get(c, root, "contexts"), "contexts: no context named \"%s\"", context);
        goto done;
    }
    snprintf(path, sizeof path, "contexts[%d].context", ci);
    if (get_str(c, ctxo, path, "cluster", &cname) < 0 || get_str(c, ctxo, path, "user", &uname) < 0)
        goto done;
    if (!cname) {
        fail(c, ctxo, "%s.cluster: required", path);
        goto done;
    }
    if (!(cl = find_named(c, "clusters", "cluster", cname, &ki))) {
        fail(c, ctxo, "%s.cluster: no cluster named \"%s\"", path, cname);
        goto done;
    }
    snprintf(path, sizeof path, "clusters[%d].cluster", ki);
    if (get_str(c, cl, path, "server", &out->server) < 0) goto done;
    if (!out->server || strncmp(out->server, "https://", 8) != 0) {
        fail(c, cl, "%s.server: %s (an https:// URL is required)", path,
             out->server ? out->server : "missing");
        goto done;
    }
    size_t n = strlen(out->server);
    while (n > 8 && out->server[n - 1] == '/') out->server[--n] = '\0';
    if (get_blob(c, cl, path, "certificate-authority", dir, &out->ca) < 0) goto done;
    v = get(c, cl, "insecure-skip-tls-verify");
    out->insecure = scalar(v) && strcmp(scalar(v), "true") == 0;

    if (uname) {
        if (!(us = find_named(c, "users", "user", uname, &ui))) {
            fail(c, ctxo, "contexts[%d].context.user: no user named \"%s\"", ci, uname);
            goto done;
        }
        snprintf(path, sizeof path, "users[%d].user", ui);
        for (int i = 0; unsupported[i]; i++)
            if ((v = get(c, us, unsupported[i]))) {
                fail(c, v, "%s.%s: not supported (use a token, a token file or a client certificate)",
                     path, unsupported[i]);
                goto done;
            }
        if (get_blob(c, us, path, "client-certificate", dir, &out->cert) < 0 ||
            get_blob(c, us, path, "client-key", dir, &out->key) < 0 ||
            get_str(c, us, path, "token", &out->token) < 0 ||
            get_str(c, us, path, "tokenFile", &out->token_file) < 0)
            goto done;
        bool has_cert = out->cert.file || out->cert.data, has_key = out->key.file || out->key.data;
        if (has_cert != has_key) {
            fail(c, us, "%s: a client certificate needs its key, and a key its certificate", path);
            goto done;
        }
    }
    if (!(out->name = strdup(context))) {
        fail(c, NULL, "out of memory");
        goto done;
    }
    rc = 0;
done:
    free(cur);
    free(cname);
    free(uname);
    return rc;
}

int sv_kubeconfig_load(const char *path, const char *context, sv_config *out, char *err,
                       size_t errlen) {
    ctx c = {path, NULL, err, errlen};
    yaml_parser_t p;
    yaml_document_t doc;
    FILE *f = NULL;
    char *dir = NULL, *slash;
    int rc = -1;
    bool parser = false, loaded = false;
    memset(out, 0, sizeof *out);
    if (!(f = fopen(path, "rb"))) {
        fail(&c, NULL, "%s", strerror(errno));
        goto done;
    }
    if (!(dir = strdup(path))) goto nomem;
    if ((slash = strrchr(dir, '/'))) *(slash == dir ? slash + 1 : slash) = '\0';
    else strcpy(dir, ".");
    if (!yaml_parser_initialize(&p)) goto nomem;
    parser = true;
    yaml_parser_set_input_file(&p, f);
    if (!yaml_parser_load(&p, &doc)) {
        snprintf(err, errlen, "%s:%zu: not YAML: %s", path, p.problem_mark.line + 1,
                 p.problem ? p.problem : "syntax error");
        goto done;
    }
    loaded = true;
    c.doc = &doc;
    rc = load_doc(&c, context, dir, out);
    goto done;
nomem:
    fail(&c, NULL, "out of memory");
done:
    if (loaded) yaml_document_delete(&doc);
    if (parser) yaml_parser_delete(&p);
    if (f) fclose(f);
    free(dir);
    if (rc < 0) sv_config_free(out);
    return rc;
}

int sv_kubeconfig_in_cluster(const char *sa_dir, sv_config *out, char *err, size_t errlen) {
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    memset(out, 0, sizeof *out);
    if (!host || !*host || !port || !*port) {
        snprintf(err, errlen, "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not "
                              "set (not in a pod? use --kubeconfig)");
        return -1;
    }
    size_t n = strlen(host) + strlen(port) + 16, d = strlen(sa_dir) + 16;
    out->server = malloc(n);
    out->token_file = malloc(d);
    out->ca.file = malloc(d);
    out->name = strdup("in-cluster");
    if (!out->server || !out->token_file || !out->ca.file || !out->name) {
        sv_config_free(out);
        snprintf(err, errlen, "in-cluster: out of memory");
        return -1;
    }
    /* an IPv6 address goes in brackets */
    snprintf(out->server, n, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
    snprintf(out->token_file, d, "%s/token", sa_dir);
    snprintf(out->ca.file, d, "%s/ca.crt", sa_dir);
    FILE *f = fopen(out->token_file, "rb");
    if (!f) {
        snprintf(err, errlen, "in-cluster: %s: %s", out->token_file, strerror(errno));
        sv_config_free(out);
        return -1;
    }
    fclose(f);
    return 0;
}

void sv_config_free(sv_config *c) {
    free(c->server);
    free(c->ca.file);
    free(c->ca.data);
    free(c->cert.file);
    free(c->cert.data);
    free(c->key.file);
    free(c->key.data);
    free(c->token);
    free(c->token_file);
    free(c->name);
    memset(c, 0, sizeof *c);
}
