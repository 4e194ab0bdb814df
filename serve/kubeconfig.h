/*
 * kubeconfig.h — where `understory serve` finds its API server and who it
 * is there: a kubeconfig file (YAML, read with libyaml; its current
 * context or a named one) or the in-cluster service account.  Owns reading
 * and checking those; it never opens a connection (http.c does).
 *
 * Errors name the file and line and the field at fault
 * (`/etc/kube/config:12: users[0].user.client-key-data: not base64`).
 */
#ifndef SV_KUBECONFIG_H
#define SV_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes that may come from a file or inline (-data fields); exactly one of
 * file and data is set when present. */
typedef struct sv_blob {
    char *file;            /* a path, absolute (resolved against the kubeconfig's dir) */
    unsigned char *data;   /* decoded bytes (PEM), NUL-terminated */
    size_t len;
} sv_blob;

typedef struct sv_config {
    char *server;          /* "https://host:port", no trailing slash */
    sv_blob ca;            /* certificate authority; none: the system's */
    sv_blob cert, key;     /* client certificate and key; both or neither */
    char *token;           /* bearer token, or NULL */
    char *token_file;      /* read again before each use (it rotates), or NULL */
    bool insecure;         /* insecure-skip-tls-verify */
    char *name;            /* the context used, or "in-cluster" */
} sv_config;

/* Load path, using context (NULL: the file's current-context).  0, or -1
 * with err (errlen bytes) saying what and where; *out is then empty. */
int sv_kubeconfig_load(const char *path, const char *context, sv_config *out, char *err,
                       size_t errlen);

/* In-cluster: KUBERNETES_SERVICE_HOST and _PORT from the environment, the
 * token and CA in sa_dir (normally /var/run/secrets/kubernetes.io/
 * serviceaccount).  0, or -1 with err. */
int sv_kubeconfig_in_cluster(const char *sa_dir, sv_config *out, char *err, size_t errlen);

void sv_config_free(sv_config *c);

#endif
