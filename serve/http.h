/*
 * http.h — requests to the Kubernetes API server: libcurl's multi
 * interface driven by a libuv loop (socket and timer callbacks), so every
 * request, long watches included, runs on the daemon's one thread.  Owns
 * connections, TLS identity (from an sv_config) and the bearer token (a
 * token file is read again before each request: it rotates).  It never
 * interprets what the server answers beyond the status code.
 *
 * Under pressure it behaves as client-go: every request but a watch
 * takes a token of a client-side rate limit first (--kube-api-qps,
 * --kube-api-burst), waiting on the loop's timer when there is none; a
 * request that got no answer, a 429 or a 5xx is tried again (the same
 * request, so writes must be idempotent: serve/writes.c) after a
 * jittered exponential backoff, or the server's Retry-After when longer,
 * at most SV_HTTP_MAX_RETRIES times; its done callback sees only the
 * last answer.  A request that gave up on a 429 with Retry-After makes
 * the next request to the same method and path wait that long too.  Not
 * thread-safe: one loop, one thread.
 */
#ifndef SV_HTTP_H
#define SV_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "kubeconfig.h"

typedef struct sv_http sv_http;

/* kube-scheduler's defaults for its client. */
#define SV_HTTP_DEFAULT_QPS 50
#define SV_HTTP_DEFAULT_BURST 100
/* Tries after the first, before a failure is the caller's. */
#define SV_HTTP_MAX_RETRIES 5

/* Streaming body bytes (watches): called as they arrive. */
typedef void (*sv_http_data_fn)(void *ud, const char *buf, size_t n);
/* The request ended: status is the HTTP code, or 0 when no answer came
 * (errmsg says why).  Without a data callback, body holds the whole body
 * (NUL-terminated; valid during the call only). */
typedef void (*sv_http_done_fn)(void *ud, long status, const char *body, size_t n,
                                const char *errmsg);

/* A client for cfg (copied) on loop; NULL with err on failure. */
sv_http *sv_http_new(uv_loop_t *loop, const sv_config *cfg, char *err, size_t errlen);
/* Cancels what is in flight (their done callbacks are not called).  The
 * loop must run once more for the handles to close. */
void sv_http_free(sv_http *h);

/* Start `method path` (path includes the query) with an optional JSON
 * body (copied; NULL: none; a PATCH's is a strategic merge patch).  data
 * NULL: the body is collected for done, and the request is rate limited
 * and retried (above); data set: a watch, neither.  0, or -1 when the
 * request could not be made (out of memory). */
int sv_http_request(sv_http *h, const char *method, const char *path, const char *body,
                    sv_http_data_fn data, sv_http_done_fn done, void *ud);

/* The User-Agent of every request from now on (copied), so the API
 * server's audit log tells replicas apart; 0, or -1 when out of memory
 * (the old one stays).  Default: libcurl's. */
int sv_http_user_agent(sv_http *h, const char *ua);

/* Called as each try of a request ends (before its done callback, or its
 * retry), with its method, path (query included) and status (0: no
 * answer): how the daemon counts what it asks of the API server
 * (serve/monitor.c).  One observer; NULL stops it. */
typedef void (*sv_http_observe_fn)(void *ud, const char *method, const char *path, long status);
void sv_http_observe(sv_http *h, sv_http_observe_fn fn, void *ud);

/* Requests answered so far, by HTTP status (0: no answer), for logs. */
unsigned long sv_http_count(const sv_http *h);

/* The rate limit: qps > 0 tokens a second, burst >= 1 at most (the
 * bucket starts full).  Default SV_HTTP_DEFAULT_QPS/_BURST. */
void sv_http_set_limit(sv_http *h, double qps, unsigned burst);

/* How long a plain request may take (seconds; default 60) and how many
 * times it is tried again (default SV_HTTP_MAX_RETRIES).  The lease's
 * client has no retries and the renew deadline as its timeout, as
 * kube-scheduler's leader-election client: the elector's own retry
 * period is its retry, and an answer later than the deadline is useless. */
void sv_http_set_patience(sv_http *h, unsigned retries, double timeout);

/* What pressure did, since sv_http_new (serve/monitor.c's metrics). */
typedef struct sv_http_stats {
    unsigned long retries_unanswered;   /* tried again: no answer came */
    unsigned long retries_throttled;    /* tried again after a 429 */
    unsigned long retries_server_error; /* tried again after a 5xx */
    double limiter_wait_seconds;        /* summed over requests: waiting for a token */
} sv_http_stats;
void sv_http_get_stats(const sv_http *h, sv_http_stats *out);

#endif
