/*
 * leader.h — leader election of `understory serve` replicas on a
 * coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
 * acquire or renew every retry period with optimistic concurrency (the
 * lease's resourceVersion on update, create when absent); take over
 * another holder's lease only once its record has not changed for its
 * leaseDurationSeconds by our own clock; lead only while the last renew
 * is younger than the renew deadline; give the lease up on request
 * (client-go's ReleaseOnCancel).  Owns the lease requests and a timer on
 * the daemon's loop (through serve/http.c, no threads); it never writes
 * anything but the lease, and decides nothing but who leads.
 */
#ifndef SV_LEADER_H
#define SV_LEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "http.h"

typedef struct sv_leader sv_leader;

typedef struct sv_leader_opts {
    const char *namespace_, *name; /* the Lease */
    const char *identity;          /* this replica: holderIdentity */
    double lease_duration;         /* seconds, whole: leaseDurationSeconds */
    double renew_deadline;         /* a leader that has not renewed for this long stops leading */
    double retry_period;           /* between two tries */
} sv_leader_opts;

/* kube-scheduler's timings */
#define SV_LEADER_LEASE_DURATION 15.0
#define SV_LEADER_RENEW_DEADLINE 10.0
#define SV_LEADER_RETRY_PERIOD 2.0

/* Called when this replica starts (true) or stops (false) leading. */
typedef void (*sv_leader_fn)(void *ud, bool leading);

/* Check o: timings above 0, the lease duration whole seconds, renew
 * deadline < lease duration, retry period < renew deadline, names set.
 * 0, or -1 with err naming the flag at fault (--lease-duration, ...). */
int sv_leader_check_opts(const sv_leader_opts *o, char *err, size_t errlen);

/* Start contending for the lease of o (copied; checked first) through h
 * (borrowed: it must outlive the elector) on loop; the first try is at
 * once.  fn reports transitions.  NULL with err. */
sv_leader *sv_leader_start(sv_http *h, uv_loop_t *loop, const sv_leader_opts *o, sv_leader_fn fn, void *ud,
                           char *err, size_t errlen);

/* Whether this replica leads now: it holds the lease and renewed it less
 * than the renew deadline ago by the monotonic clock.  When the deadline
 * has just passed this is where leading ends (logged, fn called), so a
 * caller that asks before each write never writes past it.  NULL: false. */
bool sv_leader_leading(sv_leader *l);

/* Stop contending; if leading, stop leading now and give the lease up
 * (holderIdentity empty, leaseDurationSeconds 1) so a standby takes over
 * at its next try.  done(ud) runs on the loop once the release is
 * answered or after at most 5 seconds (from a timer, never from inside
 * this call or an HTTP callback: done may free the client).  Then free
 * the elector with sv_leader_free. */
void sv_leader_release(sv_leader *l, void (*done)(void *ud), void *ud);

/* Stop and free (its timer closes on the next loop run).  Lease requests
 * in flight must be gone first (sv_http_free cancels them) or must be
 * let finish: call after sv_http_free, or after release's done.  NULL is
 * fine. */
void sv_leader_free(sv_leader *l);

/* "15s", "500ms", "2m", "1h" or plain seconds ("1.5") into seconds; false
 * when it is none of those or not above 0. */
bool sv_leader_parse_duration(const char *v, double *out);

/* This replica's identity, client-go's way: the host name, "_", and 16
 * random hex digits (pods of one Deployment may share nothing else).
 * -1 when the host name cannot be read. */
int sv_leader_identity(char *buf, size_t len);

#endif
