/*
 * ratelimit.c — a token bucket (see ratelimit.h).
 */
#include "ratelimit.h"

void sv_ratelimit_init(sv_ratelimit *rl, double qps, double burst, double now) {
    rl->qps = qps;
    rl->burst = burst;
    rl->tokens = burst;
    rl->last = now;
}

double sv_ratelimit_take(sv_ratelimit *rl, double now) {
    if (now > rl->last) {
        rl->tokens += (now - rl->last) * rl->qps;
        if (rl->tokens > rl->burst) rl->tokens = rl->burst;
        rl->last = now;
    }
    if (rl->tokens >= 1 - 1e-9) { /* a wait computed to the token, give or take rounding */
        rl->tokens = rl->tokens > 1 ? rl->tokens - 1 : 0;
        return 0;
    }
    return (1 - rl->tokens) / rl->qps;
}
