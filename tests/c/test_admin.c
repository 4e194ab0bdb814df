/*
 * test_admin.c — serve's admin HTTP server (serve/admin.c) on a real libuv
 * loop (its own thread) and real sockets on 127.0.0.1: routes, 404 and
 * 405 with Allow, keep-alive and pipelining, and each bad client —
 * malformed (400), oversized headers (431) and bodies (413), slow and
 * trickling (408), too many connections (503) — answered and closed
 * while everyone else is served at once and the loop's timers keep
 * running.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "admin.h"
#include "check.h"

#define MAX_CONNS 8

static uv_loop_t loop;
static uv_async_t stop_async;
static uv_timer_t ticker;
static sv_admin *admin;
static atomic_long ticks;
static int port;

/* ---- the server thread --------------------------------------------------- */

static void hello(void *ud, const sv_admin_request *rq, sv_admin_reply *rp) {
    char b[256];
    int n = snprintf(b, sizeof b, "hello %s", rq->query);
    (void)ud;
    sv_admin_respond(rp, 200, "text/plain", b, (size_t)n);
}

static void echo(void *ud, const sv_admin_request *rq, sv_admin_reply *rp) {
    (void)ud;
    sv_admin_respond(rp, 200, "application/octet-stream", rq->body, rq->body_len);
}

static void silent(void *ud, const sv_admin_request *rq, sv_admin_reply *rp) {
    (void)ud, (void)rq, (void)rp; /* answers nothing: the server says 500 */
}

static void on_tick(uv_timer_t *t) {
    (void)t;
    atomic_fetch_add(&ticks, 1);
}

static void close_cb(uv_handle_t *h) { (void)h; }

static void on_stop(uv_async_t *a) {
    sv_admin_close(admin);
    uv_close((uv_handle_t *)&ticker, close_cb);
    uv_close((uv_handle_t *)a, close_cb);
}

static void *server(void *arg) {
    (void)arg;
    uv_run(&loop, UV_RUN_DEFAULT);
    return NULL;
}

/* ---- a blocking client ----------------------------------------------------- */

typedef struct client {
    int fd;
    char buf[65536];
    size_t n;
} client;

typedef struct response {
    int status;
    char head[2048];
    char body[8192];
    size_t body_len;
} response;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int connect_client(client *c) {
    struct sockaddr_in sa;
    struct timeval tv = {5, 0}; /* a hung server fails the test, not the run */
    memset(c, 0, sizeof *c);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0) return -1;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return connect(c->fd, (struct sockaddr *)&sa, sizeof sa);
}

static int send_str(client *c, const char *s) {
    size_t n = strlen(s), off = 0;
    while (off < n) {
        ssize_t w = send(c->fd, s + off, n - off, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    return 0;
}

/* Bytes waiting to be read right now (without blocking)? */
static int readable_now(client *c) {
    struct pollfd p = {c->fd, POLLIN, 0};
    return c->n > 0 || poll(&p, 1, 0) > 0;
}

/* One whole response off the connection: 0, or -1 (closed or timed out
 * before a whole one came). */
static int read_response(client *c, response *r) {
    memset(r, 0, sizeof *r);
    for (;;) {
        c->buf[c->n] = '\0';
        char *end = strstr(c->buf, "\r\n\r\n");
        if (end) {
            size_t hl = (size_t)(end - c->buf) + 4, bl = 0;
            const char *cl = strstr(c->buf, "Content-Length: ");
            if (cl && cl < end) bl = (size_t)atol(cl + 16);
            if (c->n >= hl + bl && hl < sizeof r->head && bl < sizeof r->body) {
                memcpy(r->head, c->buf, hl);
                memcpy(r->body, c->buf + hl, bl);
                r->body_len = bl;
                r->status = atoi(c->buf + 9);
                memmove(c->buf, c->buf + hl + bl, c->n - hl - bl);
                c->n -= hl + bl;
                return 0;
            }
        }
        if (c->n + 1 >= sizeof c->buf) return -1;
        ssize_t got = recv(c->fd, c->buf + c->n, sizeof c->buf - 1 - c->n, 0);
        if (got <= 0) return -1;
        c->n += (size_t)got;
    }
}

/* The server closed the connection (EOF after what it sent). */
static int closed_by_server(client *c) {
    char b[256];
    if (c->n) return 0;
    return recv(c->fd, b, sizeof b, 0) == 0;
}

/* send one request on a new connection and read its answer */
static int ask(const char *req, response *r) {
    client c;
    int rc = -1;
    if (connect_client(&c) == 0 && send_str(&c, req) == 0) rc = read_response(&c, r);
    close(c.fd);
    return rc;
}

#define GET_HELLO "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"

/* ---- tests ------------------------------------------------------------------- */

TEST(routes) {
    response r;
    CHECK(ask("GET /hello?a=1&b=2 HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 0);
    CHECK(r.status == 200);
    CHECK_STR(r.body, "hello a=1&b=2");
    CHECK_HAS(r.head, "Content-Type: text/plain\r\n");
    CHECK(ask("GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 0);
    CHECK(r.status == 404);
    CHECK(ask("DELETE /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 0);
    CHECK(r.status == 405);
    CHECK_HAS(r.head, "Allow: GET, POST\r\n");
    static const char nul[] = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello\0world";
    client c;
    CHECK(connect_client(&c) == 0);
    CHECK(send(c.fd, nul, sizeof nul - 1, MSG_NOSIGNAL) == (ssize_t)sizeof nul - 1);
    CHECK(read_response(&c, &r) == 0 && r.status == 200 && r.body_len == 11);
    CHECK(memcmp(r.body, "hello\0world", 11) == 0); /* bodies are bytes, NULs and all */
    close(c.fd);
    CHECK(ask("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
              &r) == 0);
    CHECK(r.status == 200 && r.body_len == 11);
    CHECK_STR(r.body, "hello world");
    CHECK(ask("GET /silent HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 0);
    CHECK(r.status == 500);
}

/* Two requests one after the other on one connection, then two sent in
 * one write (pipelined): all answered, in order; "Connection: close" and
 * HTTP/1.0 end it. */
TEST(keep_alive) {
    client c;
    response r;
    CHECK(connect_client(&c) == 0);
    CHECK(send_str(&c, "GET /hello?first HTTP/1.1\r\nHost: x\r\n\r\n") == 0);
    CHECK(read_response(&c, &r) == 0 && r.status == 200);
    CHECK_STR(r.body, "hello first");
    CHECK_HAS(r.head, "Connection: keep-alive\r\n");
    CHECK(send_str(&c, "GET /hello?second HTTP/1.1\r\nHost: x\r\n\r\n") == 0);
    CHECK(read_response(&c, &r) == 0 && r.status == 200);
    CHECK_STR(r.body, "hello second");
    CHECK(send_str(&c, "GET /hello?third HTTP/1.1\r\nHost: x\r\n\r\n"
                       "GET /hello?fourth HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") == 0);
    CHECK(read_response(&c, &r) == 0 && r.status == 200);
    CHECK_STR(r.body, "hello third");
    CHECK(read_response(&c, &r) == 0 && r.status == 200);
    CHECK_STR(r.body, "hello fourth");
    CHECK_HAS(r.head, "Connection: close\r\n");
    CHECK(closed_by_server(&c));
    close(c.fd);
    CHECK(connect_client(&c) == 0);
    CHECK(send_str(&c, "GET /hello HTTP/1.0\r\n\r\n") == 0);
    CHECK(read_response(&c, &r) == 0 && r.status == 200);
    CHECK(closed_by_server(&c));
    close(c.fd);
}

/* Whatever http-parser refuses gets 400 and the connection closed; the
 * server goes on serving. */
TEST(malformed) {
    static const char *const bad[] = {
        "GARBAGE\r\n\r\n",
        "GET /hello HTTP/9.9.9\r\n\r\n",
        "GET /hello HTTP/1.1\r\nHost x\r\n\r\n",
        "GET /hello HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        "GET /hello HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "GET /hel\x01lo HTTP/1.1\r\n\r\n",
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", /* a TLS hello */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        client c;
        response r;
        CHECK(connect_client(&c) == 0);
        CHECK(send(c.fd, bad[i], i == 7 ? 11 : strlen(bad[i]), MSG_NOSIGNAL) > 0);
        int got = read_response(&c, &r);
        CHECK(got == 0 && r.status == 400);
        if (got != 0 || r.status != 400) fprintf(stderr, "  request %zu: status %d\n", i, r.status);
        CHECK_HAS(r.head, "Connection: close\r\n");
        CHECK(closed_by_server(&c));
        close(c.fd);
    }
    response r;
    CHECK(ask(GET_HELLO, &r) == 0 && r.status == 200);
}

/* Headers past the limit: 431; a body past it, announced or chunked: 413
 * (answered before the client sent it all). */
TEST(oversized) {
    char big[4096];
    response r;
    client c;
    snprintf(big, sizeof big, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: %03000d\r\n\r\n", 0);
    CHECK(ask(big, &r) == 0 && r.status == 431);
    snprintf(big, sizeof big, "GET /hello?%03000d HTTP/1.1\r\nHost: x\r\n\r\n", 0);
    CHECK(ask(big, &r) == 0 && r.status == 431);
    CHECK(connect_client(&c) == 0);
    CHECK(send_str(&c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n") == 0);
    CHECK(read_response(&c, &r) == 0 && r.status == 413);
    CHECK(closed_by_server(&c));
    close(c.fd);
    CHECK(connect_client(&c) == 0);
    CHECK(send_str(&c, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n") == 0);
    snprintf(big, sizeof big, "%x\r\n%03000d\r\n", 3000, 0);
    CHECK(send_str(&c, big) == 0 && send_str(&c, big) == 0);
    CHECK(read_response(&c, &r) == 0 && r.status == 413);
    close(c.fd);
    /* right at the limit is fine */
    static char req[8192];
    int n = snprintf(req, sizeof req, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n");
    memset(req + n, 'b', 4096);
    req[n + 4096] = '\0';
    CHECK(connect_client(&c) == 0);
    CHECK(send_str(&c, req) == 0);
    CHECK(read_response(&c, &r) == 0 && r.status == 200 && r.body_len == 4096);
    close(c.fd);
    CHECK(ask(GET_HELLO, &r) == 0 && r.status == 200);
}

/* A client sends half a request and waits: another is answered at once
 * (before the stalled one hears anything), the loop's timer keeps
 * ticking, and the stalled one gets 408 and is closed.  One that trickles
 * a byte at a time cannot push the deadline back. */
TEST(slow_client) {
    client slow;
    response r;
    CHECK(connect_client(&slow) == 0);
    CHECK(send_str(&slow, "GET /hello HTTP/1.1\r\nHost: x\r\n") == 0);
    long t0 = atomic_load(&ticks);
    for (int i = 0; i < 5; i++) {
        CHECK(ask(GET_HELLO, &r) == 0 && r.status == 200);
        CHECK(!readable_now(&slow)); /* the stalled one is still waiting */
    }
    CHECK(read_response(&slow, &r) == 0 && r.status == 408);
    CHECK(closed_by_server(&slow));
    close(slow.fd);
    /* a 5 ms timer across a 400 ms deadline: the loop was never held */
    CHECK(atomic_load(&ticks) - t0 >= 20);

    client drip;
    const char *req = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    size_t sent = 0, n = strlen(req);
    CHECK(connect_client(&drip) == 0);
    while (sent < n && !readable_now(&drip)) {
        if (send(drip.fd, req + sent, 1, MSG_NOSIGNAL) != 1) break;
        sent++;
        sleep_ms(20); /* 150 bytes * 20 ms = 3 s, far past the deadline */
    }
    CHECK(sent < n);
    CHECK(read_response(&drip, &r) == 0 && r.status == 408);
    close(drip.fd);
}

/* Up to the cap, connections are served; one more gets 503 and is closed,
 * the others still work; closed ones free their place. */
TEST(many_connections) {
    client c[MAX_CONNS], extra;
    response r;
    for (int i = 0; i < MAX_CONNS; i++) CHECK(connect_client(&c[i]) == 0);
    /* the server has accepted them all once one answers on the last */
    CHECK(send_str(&c[MAX_CONNS - 1], GET_HELLO) == 0);
    CHECK(read_response(&c[MAX_CONNS - 1], &r) == 0 && r.status == 200);
    CHECK(connect_client(&extra) == 0);
    CHECK(read_response(&extra, &r) == 0 && r.status == 503);
    CHECK(closed_by_server(&extra));
    close(extra.fd);
    for (int i = 0; i < MAX_CONNS; i++) {
        CHECK(send_str(&c[i], GET_HELLO) == 0);
        CHECK(read_response(&c[i], &r) == 0 && r.status == 200);
    }
    for (int i = 0; i < MAX_CONNS; i++) close(c[i].fd);
    /* once the server has seen those close, a new one is served */
    int status = 0;
    for (int tries = 0; tries < 100 && status != 200; tries++) {
        if (ask(GET_HELLO, &r) == 0) status = r.status;
        if (status != 200) sleep_ms(10);
    }
    CHECK(status == 200);
    /* many more than the cap, one after another: none is refused */
    int served = 0;
    for (int i = 0; i < 10 * MAX_CONNS; i++) served += ask(GET_HELLO, &r) == 0 && r.status == 200;
    CHECK(served == 10 * MAX_CONNS);
}

/* Addresses that are not HOST:PORT are refused with what is wrong; port 0
 * picks a free port. */
TEST(addresses) {
    char err[256];
    uv_loop_t l;
    uv_loop_init(&l);
    static const char *const bad[] = {"", "10351", "localhost:10351", "127.0.0.1:", "127.0.0.1:70000",
                                      "127.0.0.1:-1", "127.0.0.1:12x", "[::1", "::1:10351"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        CHECK(sv_admin_start(&l, bad[i], NULL, err, sizeof err) == NULL);
        CHECK_HAS(err, "expected HOST:PORT");
    }
    sv_admin *a = sv_admin_start(&l, "127.0.0.1:0", NULL, err, sizeof err);
    CHECK(a && sv_admin_port(a) > 0 && sv_admin_port(a) != port);
    char taken[64];
    snprintf(taken, sizeof taken, "127.0.0.1:%d", port);
    CHECK(sv_admin_start(&l, taken, NULL, err, sizeof err) == NULL);
    CHECK_HAS(err, "address already in use");
    sv_admin *six = sv_admin_start(&l, "[::1]:0", NULL, err, sizeof err);
    sv_admin_close(six); /* ::1 may be missing in a container: only no crash */
    sv_admin_close(a);
    uv_run(&l, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&l) == 0); /* every handle closed and released */
}

int main(void) {
    char err[256];
    sv_admin_limits lim = {1024, 4096, 400, MAX_CONNS};
    pthread_t th;
    if (uv_loop_init(&loop) < 0) return 2;
    admin = sv_admin_start(&loop, "127.0.0.1:0", &lim, err, sizeof err);
    if (!admin) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    port = sv_admin_port(admin);
    if (sv_admin_route(admin, "GET", "/hello", hello, NULL) < 0 || sv_admin_route(admin, "GET", "/echo", echo, NULL) < 0 ||
        sv_admin_route(admin, "POST", "/echo", echo, NULL) < 0 || sv_admin_route(admin, "GET", "/silent", silent, NULL) < 0)
        return 2;
    uv_timer_init(&loop, &ticker);
    uv_timer_start(&ticker, on_tick, 5, 5);
    uv_async_init(&loop, &stop_async, on_stop);
    if (pthread_create(&th, NULL, server, NULL) != 0) return 2;
    RUN(routes);
    RUN(keep_alive);
    RUN(malformed);
    RUN(oversized);
    RUN(slow_client);
    RUN(many_connections);
    RUN(addresses);
    uv_async_send(&stop_async);
    pthread_join(th, NULL);
    if (uv_loop_close(&loop) != 0) {
        printf("FAIL the loop still had handles open\n");
        return 1;
    }
    return check_report();
}
