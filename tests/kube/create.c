/*
 * create.c — tests/kube/bench.sh's object creator: Kubernetes objects, one
 * JSON object a line on stdin, each POSTed to its collection on the API
 * server, many at once over HTTP/2 (libcurl's multi interface; streams
 * share connections).  kubectl creates a List one object after the other
 * under a client-side limit of 5 requests a second, which measured the
 * creator instead of the scheduler; this keeps CONCURRENCY requests in
 * flight and has no limit of its own.
 *
 *   kube-create --server URL --cacert FILE --cert FILE --key FILE
 *               [--concurrency N] [--bind SLOTS] < objects.jsonl
 *
 * --bind SLOTS: the benchmark's ceiling, a trivial binder: each Pod is
 * bound (POST pods/NAME/binding) the moment its create is answered, to the
 * node named by the next line of SLOTS (one node name a line, one line a
 * pod), no scheduling, no watch: the best create-and-bind rate the API
 * server can do here.  The Bindings go beside the CONCURRENCY creates, not
 * in their place.  Running out of slots is an error.
 *
 * Kinds: Namespace, Node, Pod, Deployment, Queue, PodGroup.  Exit 0 when
 * every object was created (201), else 1 with each failure on stderr
 * (kind, name, status, the server's message); 2 on bad arguments.
 * Owns nothing beyond one run; single-threaded.
 */
#include <cJSON.h>
#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    CURL *easy;
    struct curl_slist *headers;
    char *body, *what;
    char *answer;
    size_t alen;
    char *bind_url, *bind_body; /* --bind: the Binding POSTed after the create */
} job;

static const struct {
    const char *kind, *prefix, *plural;
    int namespaced;
} kinds[] = {
    {"Namespace", "/api/v1", "namespaces", 0},
    {"Node", "/api/v1", "nodes", 0},
    {"Pod", "/api/v1", "pods", 1},
    {"Deployment", "/apis/apps/v1", "deployments", 1},
    {"Queue", "/apis/scheduling.run.ai/v2", "queues", 0},
    {"PodGroup", "/apis/scheduling.run.ai/v2alpha2", "podgroups", 1},
};

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    job *j = ud;
    size_t len = size * n;
    /* the start of an answer is enough to say why a create failed */
    if (j->alen < 4096) {
        char *a = realloc(j->answer, j->alen + len + 1);
        if (!a) return 0;
        memcpy(a + j->alen, p, len);
        j->alen += len;
        a[j->alen] = 0;
        j->answer = a;
    }
    return len;
}

static void job_free(job *j) {
    if (!j) return;
    if (j->easy) curl_easy_cleanup(j->easy);
    curl_slist_free_all(j->headers);
    free(j->body);
    free(j->what);
    free(j->answer);
    free(j->bind_url);
    free(j->bind_body);
    free(j);
}

/* The Binding of pod ns/name onto node, for j to POST after its create;
 * false when out of memory. */
static bool job_bind(job *j, const char *server, const char *ns, const char *name, const char *node) {
    char url[1024];
    snprintf(url, sizeof url, "%s/api/v1/namespaces/%s/pods/%s/binding", server, ns, name);
    cJSON *b = cJSON_CreateObject(), *md, *t;
    bool ok = b && cJSON_AddStringToObject(b, "apiVersion", "v1") && cJSON_AddStringToObject(b, "kind", "Binding") &&
              (md = cJSON_AddObjectToObject(b, "metadata")) && cJSON_AddStringToObject(md, "name", name) &&
              (t = cJSON_AddObjectToObject(b, "target")) && cJSON_AddStringToObject(t, "apiVersion", "v1") &&
              cJSON_AddStringToObject(t, "kind", "Node") && cJSON_AddStringToObject(t, "name", node) &&
              (j->bind_url = strdup(url)) && (j->bind_body = cJSON_PrintUnformatted(b));
    cJSON_Delete(b);
    return ok;
}

/* A job that POSTs line (a JSON object) to its collection; NULL with a
 * message on stderr when the line is not an object of a known kind. */
static job *job_new(const char *server, const char *const tls[3], const char *line, long lineno, FILE *slots) {
    cJSON *o = cJSON_Parse(line);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(md, "name");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(md, "namespace");
    job *j = NULL;
    size_t k = sizeof kinds / sizeof kinds[0];
    if (cJSON_IsString(kind))
        for (k = 0; k < sizeof kinds / sizeof kinds[0] && strcmp(kinds[k].kind, kind->valuestring); k++) {}
    if (!cJSON_IsObject(o) || k == sizeof kinds / sizeof kinds[0] || !cJSON_IsString(name) ||
        (kinds[k].namespaced && !cJSON_IsString(ns))) {
        fprintf(stderr, "kube-create: line %ld: not an object of a kind it creates (Namespace, Node, Pod, "
                        "Deployment, Queue, PodGroup) with a name%s\n",
                lineno, k < sizeof kinds / sizeof kinds[0] && kinds[k].namespaced ? " and a namespace" : "");
        goto out;
    }
    char url[1024], what[600];
    if (kinds[k].namespaced)
        snprintf(url, sizeof url, "%s%s/namespaces/%s/%s", server, kinds[k].prefix, ns->valuestring, kinds[k].plural);
    else
        snprintf(url, sizeof url, "%s%s/%s", server, kinds[k].prefix, kinds[k].plural);
    snprintf(what, sizeof what, "%s %s%s%s", kinds[k].kind, kinds[k].namespaced ? ns->valuestring : "",
             kinds[k].namespaced ? "/" : "", name->valuestring);
    if (!(j = calloc(1, sizeof *j)) || !(j->body = strdup(line)) || !(j->what = strdup(what)) ||
        !(j->easy = curl_easy_init()) ||
        !(j->headers = curl_slist_append(NULL, "Content-Type: application/json")) ||
        !curl_slist_append(j->headers, "Accept: application/json")) {
        fprintf(stderr, "kube-create: line %ld: out of memory\n", lineno);
        job_free(j);
        j = NULL;
        goto out;
    }
    if (slots && !strcmp(kinds[k].kind, "Pod")) {
        char node[256];
        if (!fgets(node, sizeof node, slots) || !(node[strcspn(node, "\r\n")] = '\0', node[0])) {
            fprintf(stderr, "kube-create: line %ld: no slot left in --bind's file for %s\n", lineno, what);
            job_free(j);
            j = NULL;
            goto out;
        }
        if (!job_bind(j, server, ns->valuestring, name->valuestring, node)) {
            fprintf(stderr, "kube-create: line %ld: out of memory\n", lineno);
            job_free(j);
            j = NULL;
            goto out;
        }
    }
    curl_easy_setopt(j->easy, CURLOPT_URL, url);
    curl_easy_setopt(j->easy, CURLOPT_PRIVATE, j);
    curl_easy_setopt(j->easy, CURLOPT_POSTFIELDS, j->body);
    curl_easy_setopt(j->easy, CURLOPT_HTTPHEADER, j->headers);
    curl_easy_setopt(j->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(j->easy, CURLOPT_WRITEDATA, j);
    curl_easy_setopt(j->easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
    /* wait for the connection being set up rather than open one per request */
    curl_easy_setopt(j->easy, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(j->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(j->easy, CURLOPT_TIMEOUT_MS, 120000L);
    curl_easy_setopt(j->easy, CURLOPT_CAINFO, tls[0]);
    curl_easy_setopt(j->easy, CURLOPT_SSLCERT, tls[1]);
    curl_easy_setopt(j->easy, CURLOPT_SSLKEY, tls[2]);
out:
    cJSON_Delete(o);
    return j;
}

int main(int argc, char **argv) {
    const char *server = NULL, *tls[3] = {NULL, NULL, NULL};
    long concurrency = 64;
    FILE *slots = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        if (!strcmp(argv[i], "--server")) server = v;
        else if (!strcmp(argv[i], "--cacert")) tls[0] = v;
        else if (!strcmp(argv[i], "--cert")) tls[1] = v;
        else if (!strcmp(argv[i], "--key")) tls[2] = v;
        else if (!strcmp(argv[i], "--concurrency")) concurrency = strtol(v, NULL, 10);
        else if (!strcmp(argv[i], "--bind")) {
            if (slots) fclose(slots);
            if (!(slots = fopen(v, "r"))) {
                perror(v);
                return 2;
            }
        } else goto usage;
        i++;
    }
    if (!server || !tls[0] || !tls[1] || !tls[2] || concurrency < 1 || concurrency > 10000) goto usage;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
    CURLM *multi = curl_multi_init();
    if (!multi) return 1;
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    char *line = NULL;
    size_t cap = 0;
    /* inflight: creates under way (at most CONCURRENCY); binding: --bind's
     * Bindings under way, beside them, as a scheduler's binds go beside
     * the creator's requests in the scheduler's run */
    long lineno = 0, inflight = 0, binding = 0, created = 0, bound = 0, failed = 0;
    int eof = 0, running = 0;
    while (!eof || inflight > 0 || binding > 0) {
        while (!eof && inflight < concurrency) {
            ssize_t n = getline(&line, &cap, stdin);
            if (n < 0) {
                eof = 1;
                break;
            }
            lineno++;
            if (n <= 1) continue;
            job *j = job_new(server, tls, line, lineno, slots);
            if (!j || curl_multi_add_handle(multi, j->easy) != CURLM_OK) {
                job_free(j);
                failed++;
                continue;
            }
            inflight++;
        }
        if (curl_multi_perform(multi, &running) != CURLM_OK) break;
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(multi, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            job *j;
            long code = 0;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&j);
            curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            bool is_bind = j->bind_url && !j->bind_body; /* the Binding's answer (its body given away) */
            if (is_bind) binding--;
            else inflight--;
            if (m->data.result == CURLE_OK && code == 201) {
                if (is_bind) bound++;
                else created++;
                if (j->bind_url && !is_bind) {
                    /* the same handle and stream slot, now for the Binding */
                    curl_multi_remove_handle(multi, m->easy_handle);
                    free(j->body);
                    j->body = j->bind_body;
                    j->bind_body = NULL;
                    free(j->answer);
                    j->answer = NULL;
                    j->alen = 0;
                    curl_easy_setopt(j->easy, CURLOPT_URL, j->bind_url);
                    curl_easy_setopt(j->easy, CURLOPT_POSTFIELDS, j->body);
                    if (curl_multi_add_handle(multi, j->easy) == CURLM_OK) {
                        binding++;
                        continue;
                    }
                    failed++;
                    fprintf(stderr, "kube-create: %s: binding not started\n", j->what);
                    job_free(j);
                    continue;
                }
            } else {
                failed++;
                fprintf(stderr, "kube-create: %s: %s %ld %s\n", j->what,
                        m->data.result == CURLE_OK ? "status" : curl_easy_strerror(m->data.result), code,
                        j->answer ? j->answer : "");
            }
            curl_multi_remove_handle(multi, m->easy_handle);
            job_free(j);
        }
        if (inflight > 0 || binding > 0) curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
    free(line);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    if (slots) {
        fclose(slots);
        fprintf(stderr, "kube-create: %ld created, %ld bound, %ld failed\n", created, bound, failed);
    } else
        fprintf(stderr, "kube-create: %ld created, %ld failed\n", created, failed);
    return failed || inflight || binding ? 1 : 0;
usage:
    fprintf(stderr, "usage: kube-create --server URL --cacert FILE --cert FILE --key FILE [--concurrency N] "
                    "[--bind SLOTS] < objects.jsonl\n");
    return 2;
}
