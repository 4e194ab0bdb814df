/*
 * leader.c — the Lease elector of leader.h.  One try every retry period:
 * GET the lease; absent: POST one naming us; held by another whose record
 * changed less than its leaseDurationSeconds ago (by our clock, from when
 * we saw it change; clocks of two machines are never compared): stand by;
 * else PUT it back naming us, with the resourceVersion we read, so two
 * replicas that try at once cannot both win (the second gets 409).
 *
 * Why renew deadline < lease duration: a leader stops writing once its
 * last successful try was sent renew_deadline ago; a standby may take
 * over no earlier than lease_duration after it saw that renew, which is
 * later than it was sent.  The difference is the margin for two clocks
 * that run at slightly different rates.
 */
#include "leader.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define RELEASE_BOUND 5.0 /* seconds a release may take before shutdown goes on */

struct sv_leader {
    sv_http *http;
    uv_timer_t timer;
    char *ns, *name, *identity;
    char path[512], collection[400];
    double duration, renew_deadline, retry;
    sv_leader_fn fn;
    void *ud;
    bool leading;
    double renewed;     /* monotonic time the last successful try was sent */
    bool busy;          /* a try in flight */
    bool creating;      /* it is a create (POST), not an update */
    double sent;        /* when it was sent */
    char *observed;     /* the lease's spec as last seen (unformatted JSON) */
    double observed_at; /* when we saw it change */
    char *written;      /* the lease as our last write left it (release puts it back) */
    bool stopped;       /* released: tries answered now are ignored */
    void (*done)(void *);
    void *done_ud;
    bool released;      /* done is due */
    char last_error[256];
};

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Now as a Kubernetes MicroTime. */
static void micro_now(char *buf, size_t len) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + k, len - k, ".%06ldZ", ts.tv_nsec / 1000);
}

bool sv_leader_parse_duration(const char *v, double *out) {
    char *end;
    double d = strtod(v, &end), unit = 1;
    if (end == v) return false;
    if (!strcmp(end, "ms")) unit = 0.001;
    else if (!strcmp(end, "m")) unit = 60;
    else if (!strcmp(end, "h")) unit = 3600;
    else if (*end && strcmp(end, "s") != 0) return false;
    d *= unit;
    if (!(d > 0) || d > 86400) return false;
    *out = d;
    return true;
}

int sv_leader_check_opts(const sv_leader_opts *o, char *err, size_t errlen) {
    if (!o->namespace_ || !*o->namespace_ || !o->name || !*o->name) {
        snprintf(err, errlen, "--lease-namespace and --lease-name must not be empty");
        return -1;
    }
    if (!o->identity || !*o->identity) {
        snprintf(err, errlen, "leader election needs an identity");
        return -1;
    }
    if (!(o->lease_duration >= 1) || o->lease_duration != (double)(long)o->lease_duration) {
        snprintf(err, errlen, "--lease-duration: %g s is not a whole number of seconds (at least 1)",
                 o->lease_duration);
        return -1;
    }
    if (!(o->renew_deadline > 0) || !(o->renew_deadline < o->lease_duration)) {
        snprintf(err, errlen, "--renew-deadline (%g s) must be above 0 and shorter than --lease-duration (%g s)",
                 o->renew_deadline, o->lease_duration);
        return -1;
    }
    if (!(o->retry_period > 0) || !(o->retry_period < o->renew_deadline)) {
        snprintf(err, errlen, "--retry-period (%g s) must be above 0 and shorter than --renew-deadline (%g s)",
                 o->retry_period, o->renew_deadline);
        return -1;
    }
    return 0;
}

int sv_leader_identity(char *buf, size_t len) {
    char host[256];
    unsigned char r[8];
    if (gethostname(host, sizeof host) < 0) return -1;
    host[sizeof host - 1] = '\0';
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        /* no entropy source: the pid and the clock still tell two replicas apart */
        unsigned long long v = (unsigned long long)getpid() << 32 ^ (unsigned long long)(mono() * 1e9);
        for (size_t i = 0; i < sizeof r; i++) r[i] = (unsigned char)(v >> (8 * i));
    }
    int n = snprintf(buf, len, "%s_%02x%02x%02x%02x%02x%02x%02x%02x", host, r[0], r[1], r[2], r[3], r[4], r[5],
                     r[6], r[7]);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

static void set_leading(sv_leader *l, bool leading, const char *why) {
    if (l->leading == leading) return;
    l->leading = leading;
    if (leading) printf("leader: acquired lease %s/%s as %s\n", l->ns, l->name, l->identity);
    else printf("leader: lost lease %s/%s (%s); writes stopped\n", l->ns, l->name, why);
    fflush(stdout);
    if (l->fn) l->fn(l->ud, leading);
}

bool sv_leader_leading(sv_leader *l) {
    if (!l) return false;
    if (l->leading && !l->stopped && mono() - l->renewed >= l->renew_deadline)
        set_leading(l, false, "not renewed within the renew deadline");
    return l->leading && !l->stopped;
}

/* A failed request, logged once until the next different one. */
static void note_error(sv_leader *l, const char *what, long status, const char *body, const char *errmsg) {
    char line[256];
    cJSON *b = body && *body ? cJSON_Parse(body) : NULL;
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(b, "message");
    snprintf(line, sizeof line, "%s lease %s/%s: %s%ld: %s", what, l->ns, l->name, status ? "HTTP " : "", status,
             cJSON_IsString(msg) ? msg->valuestring : errmsg ? errmsg : "no message");
    cJSON_Delete(b);
    if (strcmp(line, l->last_error) != 0) {
        fprintf(stderr, "understory serve: leader: %s\n", line);
        snprintf(l->last_error, sizeof l->last_error, "%s", line);
    }
}

/* Remember spec as last seen; its change restarts the holder's term. */
static int observe(sv_leader *l, const cJSON *spec) {
    char *now = spec ? cJSON_PrintUnformatted(spec) : strdup("");
    if (!now) return -1;
    if (!l->observed || strcmp(now, l->observed) != 0) {
        free(l->observed);
        l->observed = now;
        l->observed_at = mono();
    } else {
        free(now);
    }
    return 0;
}

/* spec of lease (created when absent) naming holder; acquire: a new term. */
static int fill_spec(sv_leader *l, cJSON *lease, const char *holder, double duration, bool acquire) {
    char now[40];
    micro_now(now, sizeof now);
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
    if (!cJSON_IsObject(spec)) {
        cJSON_DeleteItemFromObjectCaseSensitive(lease, "spec");
        if (!(spec = cJSON_AddObjectToObject(lease, "spec"))) return -1;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(spec, "leaseTransitions");
    double transitions = cJSON_IsNumber(t) ? t->valuedouble : 0;
    if (acquire && cJSON_IsNumber(t)) transitions += 1;
    static const char *const keys[] = {"holderIdentity", "leaseDurationSeconds", "renewTime", "acquireTime",
                                       "leaseTransitions"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (i != 3 || acquire) cJSON_DeleteItemFromObjectCaseSensitive(spec, keys[i]);
    (void)l;
    bool ok = cJSON_AddStringToObject(spec, "holderIdentity", holder) &&
              cJSON_AddNumberToObject(spec, "leaseDurationSeconds", duration) &&
              cJSON_AddStringToObject(spec, "renewTime", now) &&
              (!acquire || cJSON_AddStringToObject(spec, "acquireTime", now)) &&
              cJSON_AddNumberToObject(spec, "leaseTransitions", transitions);
    return ok ? 0 : -1;
}

static void on_written(void *ud, long status, const char *body, size_t n, const char *errmsg);

/* PUT (or POST when create) lease; the answer ends the try. */
static void send_lease(sv_leader *l, cJSON *lease, bool create) {
    char *text = cJSON_PrintUnformatted(lease);
    l->creating = create;
    if (!text || sv_http_request(l->http, create ? "POST" : "PUT", create ? l->collection : l->path, text, NULL,
                                 on_written, l) < 0) {
        fprintf(stderr, "understory serve: leader: out of memory\n");
        l->busy = false;
    }
    free(text);
}

static void on_got(void *ud, long status, const char *body, size_t n, const char *errmsg) {
    sv_leader *l = ud;
    (void)n;
    if (l->stopped) return;
    if (mono() - l->sent >= l->renew_deadline) {
        /* an answer this late (the process was frozen, or the server is
         * that slow) may name a holder long replaced: read again */
        l->busy = false;
        sv_leader_leading(l);
        return;
    }
    if (status == 404) {
        cJSON *lease = cJSON_CreateObject(), *md;
        bool ok = lease && cJSON_AddStringToObject(lease, "apiVersion", "coordination.k8s.io/v1") &&
                  cJSON_AddStringToObject(lease, "kind", "Lease") && (md = cJSON_AddObjectToObject(lease, "metadata")) &&
                  cJSON_AddStringToObject(md, "name", l->name) && cJSON_AddStringToObject(md, "namespace", l->ns) &&
                  fill_spec(l, lease, l->identity, l->duration, true) == 0;
        if (ok) send_lease(l, lease, true);
        else l->busy = false;
        cJSON_Delete(lease);
        return;
    }
    cJSON *lease = status == 200 ? cJSON_Parse(body) : NULL;
    if (!lease) {
        note_error(l, "get", status, body, status == 200 ? "not JSON" : errmsg);
        l->busy = false;
        return;
    }
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(spec, "holderIdentity");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(spec, "leaseDurationSeconds");
    const char *holder = cJSON_IsString(h) ? h->valuestring : "";
    double term = cJSON_IsNumber(d) ? d->valuedouble : l->duration;
    if (observe(l, spec) < 0) {
        cJSON_Delete(lease);
        l->busy = false;
        return;
    }
    bool mine = !strcmp(holder, l->identity);
    if (*holder && !mine && mono() < l->observed_at + term) {
        /* another replica holds it and renewed it within its term */
        char why[300];
        snprintf(why, sizeof why, "the holder is now %s", holder);
        set_leading(l, false, why);
        l->busy = false;
        cJSON_Delete(lease);
        return;
    }
    if (!mine && l->leading) set_leading(l, false, "the lease changed hands");
    if (fill_spec(l, lease, l->identity, l->duration, !mine) == 0) send_lease(l, lease, false);
    else l->busy = false;
    cJSON_Delete(lease);
}

static void on_written(void *ud, long status, const char *body, size_t n, const char *errmsg) {
    sv_leader *l = ud;
    (void)n;
    if (l->stopped) return;
    l->busy = false;
    if (status == 200 || status == 201) {
        cJSON *lease = cJSON_Parse(body);
        char *copy = strdup(body);
        if (copy) {
            free(l->written);
            l->written = copy;
        }
        observe(l, cJSON_GetObjectItemCaseSensitive(lease, "spec"));
        cJSON_Delete(lease);
        l->renewed = l->sent;
        l->last_error[0] = '\0';
        /* an answer that came after the deadline renews nothing we can trust */
        if (mono() - l->renewed < l->renew_deadline) set_leading(l, true, NULL);
        return;
    }
    if (status == 409) {
        /* someone else wrote the lease since we read it */
        set_leading(l, false, "409 Conflict on renew: another replica wrote the lease");
        return;
    }
    note_error(l, l->creating ? "create" : "update", status, body, errmsg);
}

static void try_lease(uv_timer_t *t) {
    sv_leader *l = t->data;
    if (l->stopped) return;
    sv_leader_leading(l); /* the deadline may have passed meanwhile */
    if (l->busy) return;
    l->busy = true;
    l->sent = mono();
    if (sv_http_request(l->http, "GET", l->path, NULL, NULL, on_got, l) < 0) {
        fprintf(stderr, "understory serve: leader: out of memory\n");
        l->busy = false;
    }
}

sv_leader *sv_leader_start(sv_http *h, uv_loop_t *loop, const sv_leader_opts *o, sv_leader_fn fn, void *ud,
                           char *err, size_t errlen) {
    if (sv_leader_check_opts(o, err, errlen) < 0) return NULL;
    sv_leader *l = calloc(1, sizeof *l);
    if (!l || !(l->ns = strdup(o->namespace_)) || !(l->name = strdup(o->name)) ||
        !(l->identity = strdup(o->identity))) {
        if (l) {
            free(l->ns);
            free(l->name);
            free(l);
        }
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->http = h;
    l->duration = o->lease_duration;
    l->renew_deadline = o->renew_deadline;
    l->retry = o->retry_period;
    l->fn = fn;
    l->ud = ud;
    snprintf(l->collection, sizeof l->collection, "/apis/coordination.k8s.io/v1/namespaces/%s/leases", l->ns);
    snprintf(l->path, sizeof l->path, "%s/%s", l->collection, l->name);
    uv_timer_init(loop, &l->timer);
    l->timer.data = l;
    uint64_t ms = (uint64_t)(l->retry * 1000);
    uv_timer_start(&l->timer, try_lease, 0, ms ? ms : 1);
    return l;
}

static void call_done(uv_timer_t *t) {
    sv_leader *l = t->data;
    uv_timer_stop(t);
    if (l->released) return;
    l->released = true;
    if (l->done) l->done(l->done_ud);
}

static void on_released(void *ud, long status, const char *body, size_t n, const char *errmsg) {
    sv_leader *l = ud;
    (void)n;
    if (status == 200) printf("leader: released lease %s/%s\n", l->ns, l->name);
    else note_error(l, "release", status, body, errmsg);
    fflush(stdout);
    uv_timer_start(&l->timer, call_done, 0, 0);
}

void sv_leader_release(sv_leader *l, void (*done)(void *ud), void *ud) {
    bool leading = sv_leader_leading(l);
    l->stopped = true;
    l->done = done;
    l->done_ud = ud;
    uv_timer_stop(&l->timer);
    /* the lease as we last wrote it: its resourceVersion makes the
     * release fail (409) should another replica have taken it since */
    cJSON *lease = leading && l->written ? cJSON_Parse(l->written) : NULL;
    char *text = NULL;
    if (leading) {
        l->leading = false;
        printf("leader: stopped leading %s/%s (shutting down); writes stopped\n", l->ns, l->name);
        fflush(stdout);
        if (l->fn) l->fn(l->ud, false);
    }
    if (lease && fill_spec(l, lease, "", 1, false) == 0 && (text = cJSON_PrintUnformatted(lease)) &&
        sv_http_request(l->http, "PUT", l->path, text, NULL, on_released, l) == 0)
        uv_timer_start(&l->timer, call_done, (uint64_t)(RELEASE_BOUND * 1000), 0);
    else
        uv_timer_start(&l->timer, call_done, 0, 0);
    free(text);
    cJSON_Delete(lease);
}

static void free_leader(uv_handle_t *h) {
    sv_leader *l = h->data;
    free(l->ns);
    free(l->name);
    free(l->identity);
    free(l->observed);
    free(l->written);
    free(l);
}

void sv_leader_free(sv_leader *l) {
    if (!l) return;
    l->stopped = true;
    uv_timer_stop(&l->timer);
    uv_close((uv_handle_t *)&l->timer, free_leader);
}
