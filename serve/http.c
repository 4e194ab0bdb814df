/*
 * http.c — libcurl's multi interface on a libuv loop (see http.h), after
 * libcurl's own multi-uv example: curl tells which sockets to poll and
 * when to time out; the loop tells curl what became ready.  Each socket
 * has one uv_poll_t, freed in its close callback.
 *
 * Before curl sees it, a request other than a watch waits its turn in
 * `queue` (FIFO) for a token of the rate limit (ratelimit.h); one that
 * failed in a way worth another try waits in `backoff` until its time
 * (backoff.h, or the server's Retry-After when longer), then queues
 * again.  One timer, `wake`, serves both: nothing ever blocks the loop.
 * A request that gives up on a 429 leaves its Retry-After behind for its
 * method and path (`throttled`): the next request to them (the next
 * cycle's bind of the same pod) waits in `backoff` until then, as a retry
 * would have.
 */
#include "http.h"

#include <curl/curl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backoff.h"
#include "ratelimit.h"
#include "strmap.h"

/* A retry waits at least this long, doubling up to the cap. */
#define RETRY_BASE_MS 250
#define RETRY_CAP_MS 8000
/* A Retry-After longer than this is taken as this. */
#define RETRY_AFTER_MAX_S 60

struct sv_http {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;         /* curl's */
    uv_timer_t wake;          /* the queue's and the backoff's */
    int open;                 /* handles not closed yet (sv_http_free) */
    sv_config cfg;            /* strings owned here */
    unsigned long answered;
    struct req *inflight;     /* requests added to multi */
    struct req *queue, *queue_tail; /* waiting for a token, oldest first */
    struct req *backoff;      /* waiting to be tried again */
    sv_ratelimit limit;
    sv_backoff retry_rule;
    unsigned max_retries;
    long timeout_ms;          /* a plain request's; watches have none */
    sv_http_stats stats;
    sv_http_observe_fn observe;
    void *observe_ud;
    char *user_agent;         /* NULL: libcurl's */
    /* "METHOD path" of requests that gave up on a 429, and until when
     * the server asked them to wait (monotonic ms); expired ones are
     * dropped when the list fills */
    struct throttled {
        char *key;
        uint64_t until_ms;
    } *thr;
    size_t nthr, capthr;
    us_strmap thr_index;      /* key -> index in thr */
};

typedef struct req {
    sv_http *h;
    struct req *prev, *next;  /* in *list */
    struct req **list;        /* h->inflight, h->queue or h->backoff */
    CURL *easy;
    struct curl_slist *headers;
    char *body;               /* request body */
    char *buf;                /* collected response */
    size_t len, cap;
    sv_http_data_fn data;
    sv_http_done_fn done;
    void *ud;
    char method[16];
    char *path;               /* for the observer */
    unsigned attempts;        /* answers (or failures) so far */
    double queued_at;         /* when it began to wait for a token */
    uint64_t due_ms;          /* in backoff: when to queue again */
    char errbuf[CURL_ERROR_SIZE];
} req;

typedef struct sock {
    uv_poll_t poll;
    curl_socket_t fd;
    sv_http *h;
} sock;

static char *dup_or_null(const char *s, bool *ok) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *ok = false;
    return d;
}

static void blob_copy(sv_blob *d, const sv_blob *s, bool *ok) {
    d->file = dup_or_null(s->file, ok);
    d->data = NULL;
    d->len = s->len;
    if (s->data && (d->data = malloc(s->len + 1))) memcpy(d->data, s->data, s->len + 1);
    else if (s->data) *ok = false;
}

static void unlink_req(req *r) {
    if (!r->list) return;
    if (r->list == &r->h->queue && r->h->queue_tail == r) r->h->queue_tail = r->prev;
    if (r->prev) r->prev->next = r->next;
    else *r->list = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
    r->list = NULL;
}

/* At the head of list (inflight, backoff), or the tail of the queue. */
static void link_req(req *r, req **list) {
    sv_http *h = r->h;
    r->list = list;
    if (list == &h->queue) {
        r->prev = h->queue_tail;
        r->next = NULL;
        if (h->queue_tail) h->queue_tail->next = r;
        else h->queue = r;
        h->queue_tail = r;
        return;
    }
    r->prev = NULL;
    r->next = *list;
    if (*list) (*list)->prev = r;
    *list = r;
}

static void req_free(req *r) {
    if (!r) return;
    unlink_req(r);
    if (r->easy) curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    free(r->body);
    free(r->buf);
    free(r->path);
    free(r);
}

static double now_s(void) { return (double)uv_hrtime() / 1e9; }
static uint64_t now_ms(void) { return uv_hrtime() / 1000000u; }

static void pump(sv_http *h);

/* ---- Retry-After outliving a request ------------------------------------------ */

static char *throttle_key(const char *method, const char *path) {
    size_t n = strlen(method) + strlen(path) + 2;
    char *k = malloc(n);
    if (k) snprintf(k, n, "%s %s", method, path);
    return k;
}

/* Drop the entries whose time has passed, and index the rest afresh. */
static int throttle_prune(sv_http *h, uint64_t ms) {
    size_t m = 0;
    for (size_t i = 0; i < h->nthr; i++) {
        if (h->thr[i].until_ms <= ms) free(h->thr[i].key);
        else h->thr[m++] = h->thr[i];
    }
    h->nthr = m;
    us_strmap_free(&h->thr_index);
    memset(&h->thr_index, 0, sizeof h->thr_index);
    for (size_t i = 0; i < m; i++)
        if (us_strmap_add(&h->thr_index, h->thr[i].key, (int)i) < 0) return -1;
    return 0;
}

/* Requests to method and path wait until until_ms (a later time wins).
 * Best effort: out of memory, nothing is remembered. */
static void throttle_note(sv_http *h, const char *method, const char *path, uint64_t until_ms) {
    char *k = throttle_key(method, path);
    if (!k) return;
    int at = us_strmap_get(&h->thr_index, k);
    if (at >= 0) {
        if (h->thr[at].until_ms < until_ms) h->thr[at].until_ms = until_ms;
        free(k);
        return;
    }
    if (h->nthr == h->capthr && throttle_prune(h, now_ms()) == 0 && h->nthr == h->capthr) {
        size_t ncap = h->capthr ? 2 * h->capthr : 16;
        struct throttled *t = realloc(h->thr, ncap * sizeof *t);
        if (t) {
            h->thr = t;
            h->capthr = ncap;
        }
    }
    if (h->nthr == h->capthr || us_strmap_add(&h->thr_index, k, (int)h->nthr) < 0) {
        free(k);
        return;
    }
    h->thr[h->nthr++] = (struct throttled){k, until_ms};
}

/* When a request to method and path may leave: 0 (now), or the time a
 * 429 before it asked for. */
static uint64_t throttle_until(const sv_http *h, const char *method, const char *path) {
    if (h->nthr == 0) return 0;
    char *k = throttle_key(method, path);
    int at = k ? us_strmap_get(&h->thr_index, k) : -1;
    free(k);
    return at >= 0 && h->thr[at].until_ms > now_ms() ? h->thr[at].until_ms : 0;
}

static void throttle_free(sv_http *h) {
    for (size_t i = 0; i < h->nthr; i++) free(h->thr[i].key);
    free(h->thr);
    us_strmap_free(&h->thr_index);
}

/* Hand r to curl now. */
static void start(req *r) {
    sv_http *h = r->h;
    if (curl_multi_add_handle(h->multi, r->easy) != CURLM_OK) {
        /* curl cannot take it: the request fails as if unanswered */
        if (h->observe) h->observe(h->observe_ud, r->method, r->path, 0);
        r->done(r->ud, 0, "", 0, "libcurl refused the request");
        req_free(r);
        return;
    }
    link_req(r, &h->inflight);
}

static void on_wake(uv_timer_t *t) { pump(t->data); }

/* Requests whose backoff is over join the queue; queued ones leave while
 * the bucket has tokens; the timer is set for whichever comes next. */
static void pump(sv_http *h) {
    uint64_t ms = now_ms(), next = UINT64_MAX;
    for (req *r = h->backoff, *nx; r; r = nx) {
        nx = r->next;
        if (r->due_ms <= ms) {
            unlink_req(r);
            r->queued_at = now_s();
            link_req(r, &h->queue);
        } else if (r->due_ms < next) {
            next = r->due_ms;
        }
    }
    while (h->queue) {
        double t = now_s(), wait = sv_ratelimit_take(&h->limit, t);
        if (wait > 0) {
            uint64_t at = ms + (uint64_t)ceil(wait * 1000);
            if (at < next) next = at;
            break;
        }
        req *r = h->queue;
        unlink_req(r);
        h->stats.limiter_wait_seconds += t - r->queued_at;
        start(r);
    }
    if (next == UINT64_MAX) uv_timer_stop(&h->wake);
    else uv_timer_start(&h->wake, on_wake, next > ms ? next - ms : 1, 0);
}

/* The server's Retry-After in seconds (0: none, or a date). */
static long retry_after(CURL *e) {
    struct curl_header *hd;
    if (curl_easy_header(e, "Retry-After", 0, CURLH_HEADER, -1, &hd) != CURLHE_OK) return 0;
    char *end;
    long s = strtol(hd->value, &end, 10);
    if (end == hd->value || s < 0) return 0;
    return s > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : s;
}

/* A request that ended with status (0: no answer) is tried again later:
 * not a watch (its informer decides), tries left, and an answer that may
 * differ next time: none, 429 or 5xx.  Every request the daemon makes is
 * safe to repeat (writes are idempotent on retry: KUBERNETES.md). */
static bool again(sv_http *h, req *r, long status) {
    if (r->data || r->attempts > h->max_retries) return false;
    if (status == 0) h->stats.retries_unanswered++;
    else if (status == 429) h->stats.retries_throttled++;
    else if (status >= 500) h->stats.retries_server_error++;
    else return false;
    long ra = status ? retry_after(r->easy) : 0;
    unsigned ms = sv_backoff_delay(&h->retry_rule, r->attempts - 1);
    if (ra * 1000 > (long)ms) ms = (unsigned)ra * 1000;
    char why[CURL_ERROR_SIZE + 32];
    if (status) snprintf(why, sizeof why, "HTTP %ld%s", status, ra ? " with Retry-After" : "");
    else snprintf(why, sizeof why, "%s", r->errbuf[0] ? r->errbuf : "no answer");
    fprintf(stderr, "understory serve: %s %s: %s; again in %u ms (retry %u of %u)\n", r->method, r->path, why, ms,
            r->attempts, h->max_retries);
    r->len = 0;
    r->errbuf[0] = '\0';
    r->due_ms = now_ms() + ms;
    link_req(r, &h->backoff);
    return true;
}

static void check_done(sv_http *h) {
    CURLMsg *m;
    int left;
    bool retried = false;
    while ((m = curl_multi_info_read(h->multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        req *r = NULL;
        long status = 0;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        if (m->data.result == CURLE_OK) curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &status);
        curl_multi_remove_handle(h->multi, m->easy_handle);
        unlink_req(r);
        h->answered++;
        r->attempts++;
        const char *why = m->data.result == CURLE_OK ? NULL
                          : r->errbuf[0] ? r->errbuf : curl_easy_strerror(m->data.result);
        if (h->observe) h->observe(h->observe_ud, r->method, r->path, status);
        if (again(h, r, status)) {
            retried = true;
            continue;
        }
        long ra = status == 429 ? retry_after(r->easy) : 0;
        if (ra > 0) throttle_note(h, r->method, r->path, now_ms() + (uint64_t)ra * 1000);
        if (r->buf) r->buf[r->len] = '\0';
        r->done(r->ud, status, r->buf ? r->buf : "", r->len, why);
        req_free(r);
    }
    if (retried) pump(h);
}

static void on_poll(uv_poll_t *p, int status, int events) {
    sock *s = p->data;
    int running, flags = 0;
    if (status < 0) flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
    sv_http *h = s->h;
    curl_multi_socket_action(h->multi, s->fd, flags, &running);
    check_done(h);
}

static void on_timer(uv_timer_t *t) {
    sv_http *h = t->data;
    int running;
    curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(h);
}

static void free_sock(uv_handle_t *hd) { free(hd->data); }

static int socket_cb(CURL *easy, curl_socket_t fd, int action, void *userp, void *socketp) {
    sv_http *h = userp;
    sock *s = socketp;
    (void)easy;
    if (action == CURL_POLL_REMOVE) {
        if (s) {
            uv_poll_stop(&s->poll);
            uv_close((uv_handle_t *)&s->poll, free_sock);
            curl_multi_assign(h->multi, fd, NULL);
        }
        return 0;
    }
    if (!s) {
        if (!(s = calloc(1, sizeof *s))) return -1;
        s->fd = fd;
        s->h = h;
        if (uv_poll_init_socket(h->loop, &s->poll, fd) < 0) {
            free(s);
            return -1;
        }
        s->poll.data = s;
        curl_multi_assign(h->multi, fd, s);
    }
    int ev = 0;
    if (action & CURL_POLL_IN) ev |= UV_READABLE;
    if (action & CURL_POLL_OUT) ev |= UV_WRITABLE;
    uv_poll_start(&s->poll, ev, on_poll);
    return 0;
}

static int timer_cb(CURLM *multi, long ms, void *userp) {
    sv_http *h = userp;
    (void)multi;
    if (ms < 0) uv_timer_stop(&h->timer);
    else uv_timer_start(&h->timer, on_timer, (uint64_t)ms, 0);
    return 0;
}

sv_http *sv_http_new(uv_loop_t *loop, const sv_config *cfg, char *err, size_t errlen) {
    static int global = 0;
    bool ok = true;
    if (!global) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            snprintf(err, errlen, "libcurl did not initialise");
            return NULL;
        }
        global = 1;
    }
    sv_http *h = calloc(1, sizeof *h);
    if (!h) goto nomem;
    h->loop = loop;
    h->cfg.server = dup_or_null(cfg->server, &ok);
    h->cfg.token = dup_or_null(cfg->token, &ok);
    h->cfg.token_file = dup_or_null(cfg->token_file, &ok);
    h->cfg.name = dup_or_null(cfg->name, &ok);
    h->cfg.insecure = cfg->insecure;
    blob_copy(&h->cfg.ca, &cfg->ca, &ok);
    blob_copy(&h->cfg.cert, &cfg->cert, &ok);
    blob_copy(&h->cfg.key, &cfg->key, &ok);
    if (!ok || !(h->multi = curl_multi_init())) goto nomem;
    uv_timer_init(loop, &h->timer);
    uv_timer_init(loop, &h->wake);
    h->timer.data = h->wake.data = h;
    h->open = 2;
    sv_ratelimit_init(&h->limit, SV_HTTP_DEFAULT_QPS, SV_HTTP_DEFAULT_BURST, now_s());
    /* jitter differs between processes: replicas that fail together part */
    sv_backoff_init(&h->retry_rule, RETRY_BASE_MS, RETRY_CAP_MS, (uint64_t)getpid() * 0x9e3779b97f4a7c15u);
    h->max_retries = SV_HTTP_MAX_RETRIES;
    h->timeout_ms = 60000;
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
    return h;
nomem:
    if (h) {
        sv_config_free(&h->cfg);
        free(h);
    }
    snprintf(err, errlen, "out of memory");
    return NULL;
}

static void free_client(uv_handle_t *hd) {
    sv_http *h = hd->data;
    if (--h->open == 0) free(h);
}

void sv_http_free(sv_http *h) {
    if (!h) return;
    /* requests in flight or waiting: detach and free them without calling back */
    while (h->inflight) {
        req *r = h->inflight;
        curl_multi_remove_handle(h->multi, r->easy);
        req_free(r);
    }
    while (h->queue) req_free(h->queue);
    while (h->backoff) req_free(h->backoff);
    throttle_free(h);
    curl_multi_cleanup(h->multi);
    sv_config_free(&h->cfg);
    free(h->user_agent);
    uv_timer_stop(&h->timer);
    uv_timer_stop(&h->wake);
    uv_close((uv_handle_t *)&h->timer, free_client);
    uv_close((uv_handle_t *)&h->wake, free_client);
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud) {
    req *r = ud;
    size_t n = size * nmemb;
    if (r->data) {
        r->data(r->ud, ptr, n);
        return n;
    }
    if (r->len + n + 1 > r->cap) {
        size_t ncap = r->cap ? r->cap : 4096;
        while (ncap < r->len + n + 1) ncap *= 2;
        char *b = realloc(r->buf, ncap);
        if (!b) return 0; /* curl fails the request: CURLE_WRITE_ERROR */
        r->buf = b;
        r->cap = ncap;
    }
    memcpy(r->buf + r->len, ptr, n);
    r->len += n;
    return n;
}

/* The token for this request: the file's contents (it rotates), else the
 * fixed one; NULL when none.  Caller frees a file token. */
static char *read_token(const sv_http *h, bool *owned) {
    *owned = false;
    if (!h->cfg.token_file) return h->cfg.token;
    FILE *f = fopen(h->cfg.token_file, "rb");
    if (!f) return h->cfg.token;
    char *t = calloc(1, 16384);
    if (t && fread(t, 1, 16383, f) > 0) {
        t[strcspn(t, "\r\n")] = '\0';
        *owned = true;
    } else {
        free(t);
        t = h->cfg.token;
    }
    fclose(f);
    return t;
}

static void set_blob(CURL *e, CURLoption blob, CURLoption file, const sv_blob *b) {
    if (b->data) {
        struct curl_blob cb = {b->data, b->len, CURL_BLOB_COPY};
        curl_easy_setopt(e, blob, &cb);
    } else if (b->file) {
        curl_easy_setopt(e, file, b->file);
    }
}

int sv_http_request(sv_http *h, const char *method, const char *path, const char *body,
                    sv_http_data_fn data, sv_http_done_fn done, void *ud) {
    req *r = calloc(1, sizeof *r);
    char *url = NULL, *auth = NULL, *token = NULL;
    bool owned = false;
    if (!r) return -1;
    r->h = h;
    r->data = data;
    r->done = done;
    r->ud = ud;
    snprintf(r->method, sizeof r->method, "%s", method);
    if (!(r->path = strdup(path)) || !(r->easy = curl_easy_init())) goto fail;
    size_t n = strlen(h->cfg.server) + strlen(path) + 1;
    if (!(url = malloc(n))) goto fail;
    snprintf(url, n, "%s%s", h->cfg.server, path);
    curl_easy_setopt(r->easy, CURLOPT_URL, url);
    curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
    curl_easy_setopt(r->easy, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    /* a plain request that takes a minute has failed; a watch lives as long
     * as the server keeps it (its timeoutSeconds), kept alive by TCP */
    if (!data) curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, h->timeout_ms);
    curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(r->easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, method);
    if (h->user_agent) curl_easy_setopt(r->easy, CURLOPT_USERAGENT, h->user_agent);
    if (h->cfg.insecure) {
        curl_easy_setopt(r->easy, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(r->easy, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    set_blob(r->easy, CURLOPT_CAINFO_BLOB, CURLOPT_CAINFO, &h->cfg.ca);
    set_blob(r->easy, CURLOPT_SSLCERT_BLOB, CURLOPT_SSLCERT, &h->cfg.cert);
    set_blob(r->easy, CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEY, &h->cfg.key);
    r->headers = curl_slist_append(NULL, "Accept: application/json");
    if (body) {
        /* a PATCH is a strategic merge patch: conditions merge by type */
        struct curl_slist *s = curl_slist_append(r->headers, strcmp(method, "PATCH") == 0
                                                                 ? "Content-Type: application/strategic-merge-patch+json"
                                                                 : "Content-Type: application/json");
        if (!s || !(r->body = strdup(body))) goto fail;
        r->headers = s;
        curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body);
    }
    if ((token = read_token(h, &owned))) {
        size_t an = strlen(token) + 32;
        if (!(auth = malloc(an))) goto fail;
        snprintf(auth, an, "Authorization: Bearer %s", token);
        struct curl_slist *s = curl_slist_append(r->headers, auth);
        if (!s) goto fail;
        r->headers = s;
    }
    if (!r->headers) goto fail;
    curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
    if (data) { /* a watch: exempt from the rate limit, as client-go's */
        if (curl_multi_add_handle(h->multi, r->easy) != CURLM_OK) goto fail;
        link_req(r, &h->inflight);
    } else if ((r->due_ms = throttle_until(h, method, path)) > 0) {
        /* a 429 before it asked to wait: it waits as a retry would */
        link_req(r, &h->backoff);
        uv_timer_start(&h->wake, on_wake, 0, 0);
    } else {
        r->queued_at = now_s();
        link_req(r, &h->queue);
        /* the queue moves on the timer, never inside this call, so no done
         * callback runs before the caller has its request in hand; a queue
         * that had others in it has its timer set already */
        if (h->queue == r) uv_timer_start(&h->wake, on_wake, 0, 0);
    }
    free(url);
    free(auth);
    if (owned) free(token);
    return 0;
fail:
    free(url);
    free(auth);
    if (owned) free(token);
    req_free(r);
    return -1;
}

unsigned long sv_http_count(const sv_http *h) { return h->answered; }

int sv_http_user_agent(sv_http *h, const char *ua) {
    char *d = strdup(ua);
    if (!d) return -1;
    free(h->user_agent);
    h->user_agent = d;
    return 0;
}

void sv_http_set_limit(sv_http *h, double qps, unsigned burst) {
    sv_ratelimit_init(&h->limit, qps, burst, now_s());
}

void sv_http_set_patience(sv_http *h, unsigned retries, double timeout) {
    h->max_retries = retries;
    h->timeout_ms = timeout > 0 ? (long)(timeout * 1000) : 60000;
}

void sv_http_get_stats(const sv_http *h, sv_http_stats *out) { *out = h->stats; }

void sv_http_observe(sv_http *h, sv_http_observe_fn fn, void *ud) {
    h->observe = fn;
    h->observe_ud = ud;
}
