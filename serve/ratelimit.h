/*
 * ratelimit.h — the client-side token bucket of the API client
 * (ratelimit.c), as client-go's: burst tokens, refilled at qps a second,
 * one taken by each request as it leaves, so that in any interval of t
 * seconds at most burst + qps × t requests leave.  A token is taken only
 * when there is one (nothing is lent ahead): a loop that was busy cannot
 * then release a backlog at once.  Plain data, no I/O, no clock of its
 * own (the caller passes the time); one owner, not thread-safe.
 */
#ifndef SV_RATELIMIT_H
#define SV_RATELIMIT_H

typedef struct sv_ratelimit {
    double qps, burst;
    double tokens; /* 0..burst */
    double last;   /* the time tokens was last brought up to date */
} sv_ratelimit;

/* qps > 0, burst >= 1; the bucket starts full at time now (seconds). */
void sv_ratelimit_init(sv_ratelimit *rl, double qps, double burst, double now);

/* At time now (seconds, monotonic): take a token and return 0, or take
 * none and return the seconds until one will be there. */
double sv_ratelimit_take(sv_ratelimit *rl, double now);

#endif
