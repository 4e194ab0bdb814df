/*
 * admin.c — the admin HTTP/1.1 server (admin.h): uv_tcp on the daemon's
 * loop, requests parsed by http-parser, answered by the routes' handlers.
 * Owns connections and their limits; never parses HTTP by hand, never
 * blocks, never answers for a route (the handler does).
 *
 * A connection's life: a deadline runs from its opening (and again after
 * each answer) to the end of the next request, so a client that trickles
 * bytes cannot hold it longer than that.  An error (400, 408, 413, 431,
 * 503) or "Connection: close" ends it gracefully: the answer is written,
 * the write side shut, and what the client still sends is read and
 * dropped until it closes or a short linger ends, so it reads the answer
 * instead of a reset.  A client that pipelines requests without reading
 * the answers is dropped once MAX_UNSENT bytes wait for it.
 */
#include "admin.h"

#include <http_parser.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINGER_MS 1000
/* Answers queued but not yet taken by a client that pipelines requests
 * and does not read: past this, the connection is dropped rather than
 * let the daemon's memory grow. */
#define MAX_UNSENT (4u << 20)

typedef struct route {
    char *method, *path;
    sv_admin_fn fn;
    void *ud;
} route;

typedef struct bytes {
    char *p;
    size_t n, cap;
} bytes;

typedef struct conn conn;

struct sv_admin {
    uv_loop_t *loop;
    uv_tcp_t listener;
    sv_admin_limits lim;
    route *routes;
    size_t nroutes;
    conn *conns;               /* open connections, a doubly linked list */
    unsigned nconns;
    unsigned live;             /* the listener + connections not yet freed */
    bool closing;
    int port;
};

struct conn {
    sv_admin *a;
    conn *prev, *next;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shut;
    http_parser parser;
    bytes url, body;
    size_t header_bytes;
    int fail;                  /* an error status a callback decided */
    int handles;               /* open among tcp and timer */
    bool in_request;           /* bytes of a request seen, not yet answered */
    bool done;                 /* answered for the last time: drain, close */
    bool closed;
};

struct sv_admin_reply {
    int status;
    char *content_type, *body;
    size_t len;
    bool oom;
};

typedef struct wreq {
    uv_write_t req;
    conn *c;
    char *data;
} wreq;

static const char *reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 422: return "Unprocessable Content";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

static int append(bytes *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 256;
        while (b->n + n + 1 > ncap) ncap *= 2;
        char *p = realloc(b->p, ncap);
        if (!p) return -1;
        b->p = p;
        b->cap = ncap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

static void admin_release(sv_admin *a) {
    if (--a->live > 0 || !a->closing) return;
    for (size_t i = 0; i < a->nroutes; i++) {
        free(a->routes[i].method);
        free(a->routes[i].path);
    }
    free(a->routes);
    free(a);
}

static void conn_closed(uv_handle_t *h) {
    conn *c = h->data;
    if (--c->handles > 0) return;
    sv_admin *a = c->a;
    free(c->url.p);
    free(c->body.p);
    free(c);
    admin_release(a);
}

static void conn_close(conn *c) {
    if (c->closed) return;
    c->closed = true;
    sv_admin *a = c->a;
    if (c->prev) c->prev->next = c->next;
    else a->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    a->nconns--;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, conn_closed);
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void on_written(uv_write_t *w, int status) {
    wreq *r = (wreq *)w;
    if (status < 0 && status != UV_ECANCELED) conn_close(r->c);
    free(r->data);
    free(r);
}

/* Queue one answer.  extra: more header lines ("Name: value\r\n"). */
static void write_answer(conn *c, int status, const char *ctype, const char *body, size_t len, const char *extra,
                         bool keep) {
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: %s\r\n\r\n",
                      status, reason(status), ctype, len, extra ? extra : "", keep ? "keep-alive" : "close");
    wreq *r = malloc(sizeof *r);
    char *data = hn > 0 && (size_t)hn < sizeof head ? malloc((size_t)hn + len) : NULL;
    if (!r || !data) {
        free(r);
        free(data);
        conn_close(c);
        return;
    }
    memcpy(data, head, (size_t)hn);
    if (len) memcpy(data + hn, body, len);
    r->c = c;
    r->data = data;
    uv_buf_t buf = uv_buf_init(data, (unsigned)((size_t)hn + len));
    if (uv_write(&r->req, (uv_stream_t *)&c->tcp, &buf, 1, on_written) < 0) {
        free(data);
        free(r);
        conn_close(c);
    }
}

static void on_shutdown(uv_shutdown_t *s, int status) {
    (void)s;
    (void)status;
}

static void on_linger(uv_timer_t *t) { conn_close(t->data); }

/* The last answer was queued: shut the write side once it is out, drop
 * what still comes, close at EOF or after the linger. */
static void finish(conn *c) {
    if (c->done || c->closed) return;
    c->done = true;
    uv_timer_stop(&c->timer);
    uv_timer_start(&c->timer, on_linger, LINGER_MS, 0);
    c->shut.data = c;
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, on_shutdown) < 0) conn_close(c);
}

static void fail_with(conn *c, int status, const char *why) {
    char body[128];
    int n = snprintf(body, sizeof body, "%s\n", why);
    write_answer(c, status, "text/plain; charset=utf-8", body, (size_t)n, NULL, false);
    finish(c);
}

static void on_deadline(uv_timer_t *t) {
    conn *c = t->data;
    if (c->in_request) fail_with(c, 408, "request not complete in time");
    else conn_close(c); /* idle between requests: nothing to answer */
}

static void arm_deadline(conn *c) {
    uv_timer_stop(&c->timer);
    uv_timer_start(&c->timer, on_deadline, c->a->lim.read_timeout_ms, 0);
}

/* ---- parser callbacks ---------------------------------------------------- */

static int header_bytes(conn *c, size_t n) {
    c->header_bytes += n;
    if (c->header_bytes > c->a->lim.max_header_bytes) {
        c->fail = 431;
        return 1;
    }
    return 0;
}

static int on_begin(http_parser *p) {
    conn *c = p->data;
    c->in_request = true;
    c->url.n = c->body.n = c->header_bytes = 0;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n) {
    conn *c = p->data;
    if (header_bytes(c, n)) return 1;
    if (append(&c->url, at, n) < 0) {
        c->fail = 500;
        return 1;
    }
    return 0;
}

static int on_header(http_parser *p, const char *at, size_t n) {
    (void)at; /* no header changes an answer: only their size counts */
    return header_bytes(p->data, n);
}

static int on_headers_complete(http_parser *p) {
    conn *c = p->data;
    /* content_length is ULLONG_MAX when the request gave none */
    if (p->content_length != (uint64_t)-1 && p->content_length > c->a->lim.max_body_bytes) {
        c->fail = 413;
        return -1; /* neither 0 (go on) nor 1 (no body): an error, which stops the parser */
    }
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
    conn *c = p->data;
    if (c->body.n + n > c->a->lim.max_body_bytes) {
        c->fail = 413;
        return 1;
    }
    if (append(&c->body, at, n) < 0) {
        c->fail = 500;
        return 1;
    }
    return 0;
}

static void dispatch(conn *c, bool keep) {
    sv_admin *a = c->a;
    struct http_parser_url u;
    const char *method = http_method_str((enum http_method)c->parser.method);
    char path[1024], allow[256] = "";
    const char *query = "";
    http_parser_url_init(&u);
    if (!c->url.p || http_parser_parse_url(c->url.p, c->url.n, 0, &u) != 0 || !(u.field_set & (1 << UF_PATH)) ||
        u.field_data[UF_PATH].len >= sizeof path) {
        fail_with(c, 400, "bad request target");
        return;
    }
    memcpy(path, c->url.p + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
    path[u.field_data[UF_PATH].len] = '\0';
    if (u.field_set & (1 << UF_QUERY)) {
        c->url.p[u.field_data[UF_QUERY].off + u.field_data[UF_QUERY].len] = '\0';
        query = c->url.p + u.field_data[UF_QUERY].off;
    }
    const route *r = NULL;
    size_t an = 0;
    for (size_t i = 0; i < a->nroutes; i++) {
        if (strcmp(a->routes[i].path, path) != 0) continue;
        if (strcmp(a->routes[i].method, method) == 0) r = &a->routes[i];
        an += (size_t)snprintf(allow + an, an < sizeof allow ? sizeof allow - an : 0, "%s%s", an ? ", " : "",
                               a->routes[i].method);
    }
    if (!r && !an) {
        write_answer(c, 404, "text/plain; charset=utf-8", "not found\n", 10, NULL, keep);
        return;
    }
    if (!r) {
        char extra[300];
        snprintf(extra, sizeof extra, "Allow: %s\r\n", allow);
        write_answer(c, 405, "text/plain; charset=utf-8", "method not allowed\n", 19, extra, keep);
        return;
    }
    sv_admin_request rq = {method, path, query, c->body.p ? c->body.p : "", c->body.n};
    sv_admin_reply rp = {0};
    r->fn(r->ud, &rq, &rp);
    if (rp.oom || !rp.status) write_answer(c, 500, "text/plain; charset=utf-8", "no answer\n", 10, NULL, keep);
    else write_answer(c, rp.status, rp.content_type, rp.body ? rp.body : "", rp.len, NULL, keep);
    free(rp.content_type);
    free(rp.body);
}

static int on_complete(http_parser *p) {
    conn *c = p->data;
    bool keep = http_should_keep_alive(p) && !p->upgrade;
    c->in_request = false;
    dispatch(c, keep);
    if (c->done || c->closed) return 1;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > MAX_UNSENT) {
        conn_close(c);
        return 1;
    }
    if (!keep) {
        finish(c);
        return 1;
    }
    arm_deadline(c); /* the next request has the same time */
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_begin,
    .on_url = on_url,
    .on_header_field = on_header,
    .on_header_value = on_header,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_complete,
};

/* ---- the loop's side ----------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    static char slab[65536]; /* one read at a time on the one loop thread */
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(slab, sizeof slab);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    conn *c = s->data;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (nread == 0 || c->done || c->closed) return;
    if (!c->in_request) c->in_request = true; /* a byte of the next request */
    size_t used = http_parser_execute(&c->parser, &settings, buf->base, (size_t)nread);
    if (c->done || c->closed) return;
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
    if (c->fail == 431 || e == HPE_HEADER_OVERFLOW) fail_with(c, 431, "request header fields too large");
    else if (c->fail == 413) fail_with(c, 413, "request body too large");
    else if (c->fail) fail_with(c, c->fail, "out of memory");
    else if (e != HPE_OK) fail_with(c, 400, http_errno_description(e));
    else if (used != (size_t)nread) fail_with(c, 400, "protocol upgrade not supported");
}

static void on_connection(uv_stream_t *server, int status) {
    sv_admin *a = server->data;
    if (status < 0 || a->closing) return;
    conn *c = calloc(1, sizeof *c);
    if (!c) return; /* the kernel keeps it queued; a later accept may take it */
    c->a = a;
    uv_tcp_init(a->loop, &c->tcp);
    uv_timer_init(a->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles = 2;
    c->next = a->conns;
    if (a->conns) a->conns->prev = c;
    a->conns = c;
    a->nconns++;
    a->live++;
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0 || uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (a->nconns > a->lim.max_connections) {
        fail_with(c, 503, "too many connections");
        return;
    }
    arm_deadline(c);
}

static void listener_closed(uv_handle_t *h) { admin_release(h->data); }

static int parse_address(const char *address, struct sockaddr_storage *ss, char *err, size_t errlen) {
    char host[256];
    const char *colon = address ? strrchr(address, ':') : NULL;
    char *end;
    if (!colon || colon == address || (size_t)(colon - address) >= sizeof host) goto bad;
    long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || port < 0 || port > 65535) goto bad;
    size_t hn = (size_t)(colon - address);
    memcpy(host, address, hn);
    host[hn] = '\0';
    if (host[0] == '[' && host[hn - 1] == ']') {
        host[hn - 1] = '\0';
        if (uv_ip6_addr(host + 1, (int)port, (struct sockaddr_in6 *)ss) == 0) return 0;
    } else if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0) {
        return 0;
    }
bad:
    snprintf(err, errlen, "admin address '%s': expected HOST:PORT with a numeric IPv4 or [IPv6] host and a port 0-65535",
             address ? address : "");
    return -1;
}

sv_admin *sv_admin_start(uv_loop_t *loop, const char *address, const sv_admin_limits *lim, char *err,
                         size_t errlen) {
    static const sv_admin_limits defaults = SV_ADMIN_LIMITS_DEFAULT;
    struct sockaddr_storage ss;
    int rc, len = sizeof ss;
    if (parse_address(address, &ss, err, errlen) < 0) return NULL;
    sv_admin *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    a->loop = loop;
    a->lim = lim ? *lim : defaults;
    a->live = 1;
    uv_tcp_init(loop, &a->listener);
    a->listener.data = a;
    if ((rc = uv_tcp_bind(&a->listener, (struct sockaddr *)&ss, 0)) < 0 ||
        (rc = uv_listen((uv_stream_t *)&a->listener, 128, on_connection)) < 0 ||
        (rc = uv_tcp_getsockname(&a->listener, (struct sockaddr *)&ss, &len)) < 0) {
        snprintf(err, errlen, "admin address %s: %s", address, uv_strerror(rc));
        sv_admin_close(a);
        return NULL;
    }
    a->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return a;
}

int sv_admin_route(sv_admin *a, const char *method, const char *path, sv_admin_fn fn, void *ud) {
    route *r = realloc(a->routes, (a->nroutes + 1) * sizeof *r);
    if (!r) return -1;
    a->routes = r;
    r = &a->routes[a->nroutes];
    r->fn = fn;
    r->ud = ud;
    if (!(r->method = strdup(method)) || !(r->path = strdup(path))) {
        free(r->method);
        return -1;
    }
    a->nroutes++;
    return 0;
}

int sv_admin_port(const sv_admin *a) { return a->port; }

void sv_admin_close(sv_admin *a) {
    if (!a || a->closing) return;
    a->closing = true;
    while (a->conns) conn_close(a->conns);
    uv_close((uv_handle_t *)&a->listener, listener_closed);
}

int sv_admin_respond(sv_admin_reply *rp, int status, const char *content_type, const char *body, size_t len) {
    free(rp->content_type);
    free(rp->body);
    rp->status = status;
    rp->len = len;
    rp->content_type = strdup(content_type ? content_type : "text/plain; charset=utf-8");
    rp->body = malloc(len + 1);
    if (!rp->content_type || !rp->body) {
        rp->oom = true;
        return -1;
    }
    if (len) memcpy(rp->body, body, len);
    rp->body[len] = '\0';
    return 0;
}
