/*
 * test_pressure.c — the API client's rules under pressure, on their own:
 * the token bucket of --kube-api-qps/--kube-api-burst (serve/ratelimit.c)
 * never lets more than burst + qps × t requests leave in t seconds, and
 * lets them leave as soon as that allows; the retry backoff
 * (serve/backoff.c) doubles from its base to its cap, jittered into the
 * upper half, the same for the same seed.
 */
#include <math.h>
#include <stdbool.h>

#include "backoff.h"
#include "check.h"
#include "ratelimit.h"

TEST(bucket_starts_full_then_refills_at_qps) {
    sv_ratelimit rl;
    sv_ratelimit_init(&rl, 5, 5, 100);
    for (int i = 0; i < 5; i++) CHECK(sv_ratelimit_take(&rl, 100) == 0);
    double w = sv_ratelimit_take(&rl, 100);
    CHECK(fabs(w - 0.2) < 1e-9); /* one token in 1/qps */
    CHECK(sv_ratelimit_take(&rl, 100.1) > 0); /* half a token: none taken */
    CHECK(sv_ratelimit_take(&rl, 100.2) == 0);
    /* idle for long: the bucket holds burst tokens, no more */
    for (int i = 0; i < 5; i++) CHECK(sv_ratelimit_take(&rl, 1000) == 0);
    CHECK(sv_ratelimit_take(&rl, 1000) > 0);
}

/* A client that asks again exactly when told: every window of its sends
 * holds at most burst + qps × (its length), and over the run it gets the
 * rate it was allowed (the limit is not stricter than it says). */
TEST(greedy_client_never_beats_the_bucket) {
    const double qps = 5, burst = 5;
    double sent[400], t = 0;
    int n = 0;
    sv_ratelimit rl;
    sv_ratelimit_init(&rl, qps, burst, 0);
    while (n < 400) {
        double w = sv_ratelimit_take(&rl, t);
        if (w == 0) sent[n++] = t;
        else t += w;
    }
    bool within = true;
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++)
            if (j - i + 1 > burst + qps * (sent[j] - sent[i]) + 1e-6) within = false;
    CHECK(within);
    /* 400 sends: burst at once, the other 395 at qps */
    CHECK(fabs(sent[n - 1] - (400 - burst) / qps) < 1e-6);
}

TEST(backoff_doubles_to_its_cap_jittered_in_the_upper_half) {
    sv_backoff b, c;
    sv_backoff_init(&b, 250, 8000, 42);
    sv_backoff_init(&c, 250, 8000, 42);
    unsigned d = 250;
    for (unsigned attempt = 0; attempt < 12; attempt++) {
        unsigned x = sv_backoff_delay(&b, attempt);
        CHECK(x >= (d + 1) / 2 && x <= d);
        CHECK(x == sv_backoff_delay(&c, attempt)); /* same seed, same waits */
        d = d * 2 > 8000 ? 8000 : d * 2;
    }
    /* the jitter does vary: 50 waits at the cap are not all one value */
    unsigned first = sv_backoff_delay(&b, 20), differ = 0;
    for (int i = 0; i < 50; i++) differ += sv_backoff_delay(&b, 20) != first;
    CHECK(differ > 0);
    /* a huge attempt number neither overflows nor passes the cap */
    unsigned x = sv_backoff_delay(&b, 4000000000u);
    CHECK(x >= 4000 && x <= 8000);
}

int main(void) {
    RUN(bucket_starts_full_then_refills_at_qps);
    RUN(greedy_client_never_beats_the_bucket);
    RUN(backoff_doubles_to_its_cap_jittered_in_the_upper_half);
    return check_report();
}
