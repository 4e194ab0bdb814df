/*
 * admin.h — the daemon's admin HTTP/1.1 server (/healthz, /readyz,
 * /metrics, ...) on its libuv loop.  Owns the listening socket, the
 * connections, parsing (Debian's http-parser) and the limits that keep a
 * bad client from hurting the loop; what a route answers is its
 * handler's.  It never blocks: a slow or stalled client costs only its
 * own connection.
 */
#ifndef SV_ADMIN_H
#define SV_ADMIN_H

#include <stddef.h>
#include <uv.h>

typedef struct sv_admin sv_admin;
typedef struct sv_admin_reply sv_admin_reply;

typedef struct sv_admin_limits {
    size_t max_header_bytes;     /* request line + headers; more: 431 */
    size_t max_body_bytes;       /* more: 413 */
    unsigned read_timeout_ms;    /* a request not complete this long after
                                    its connection opened or the previous
                                    answer: 408 and close */
    unsigned max_connections;    /* more open at once: 503 and close */
} sv_admin_limits;

/* 8 KiB of headers, 64 KiB of body, 10 s to send a request, 64 connections. */
#define SV_ADMIN_LIMITS_DEFAULT {8192, 65536, 10000, 64}
#define SV_ADMIN_DEFAULT_ADDRESS "127.0.0.1:10351"

typedef struct sv_admin_request {
    const char *method;          /* "GET", "POST", ... */
    const char *path;            /* without the query */
    const char *query;           /* after '?', or "" */
    const char *body;            /* NUL-terminated */
    size_t body_len;
} sv_admin_request;

/* A route's handler: answers with sv_admin_respond before it returns
 * (no answer: 500).  Runs on the loop; must not block. */
typedef void (*sv_admin_fn)(void *ud, const sv_admin_request *rq, sv_admin_reply *rp);

/* Listen on address "HOST:PORT" (IPv4, or [IPv6]; port 0 picks a free
 * one, see sv_admin_port); lim NULL: the defaults.  NULL with err naming
 * the address and what is wrong. */
sv_admin *sv_admin_start(uv_loop_t *loop, const char *address, const sv_admin_limits *lim, char *err,
                         size_t errlen);
/* Route method + path (exact match) to fn.  0, or -1 when out of memory. */
int sv_admin_route(sv_admin *a, const char *method, const char *path, sv_admin_fn fn, void *ud);
/* The port it listens on. */
int sv_admin_port(const sv_admin *a);
/* Close the listener and every connection; memory is released as the
 * loop closes the handles.  NULL is fine. */
void sv_admin_close(sv_admin *a);

/* The answer: status, content type, body (copied).  0, or -1 when out of
 * memory (the client then gets 500). */
int sv_admin_respond(sv_admin_reply *rp, int status, const char *content_type, const char *body, size_t len);

#endif
