/*
 * test_leader.c — what serve/leader.c decides without a cluster: the lease
 * flags' durations and their order (a bad one must stop `serve` at start,
 * naming the flag), and replica identities (two replicas on one host must
 * differ).  The election itself runs against a real API server in
 * tests/kube/test-leader.sh.
 */
#include <unistd.h>

#include "check.h"
#include "leader.h"

TEST(durations) {
    double d = 0;
    CHECK(sv_leader_parse_duration("15s", &d) && d == 15);
    CHECK(sv_leader_parse_duration("500ms", &d) && d == 0.5);
    CHECK(sv_leader_parse_duration("2m", &d) && d == 120);
    CHECK(sv_leader_parse_duration("1h", &d) && d == 3600);
    CHECK(sv_leader_parse_duration("1.5", &d) && d == 1.5);
    d = 7;
    CHECK(!sv_leader_parse_duration("", &d));
    CHECK(!sv_leader_parse_duration("s", &d));
    CHECK(!sv_leader_parse_duration("10x", &d));
    CHECK(!sv_leader_parse_duration("0s", &d));
    CHECK(!sv_leader_parse_duration("-1s", &d));
    CHECK(!sv_leader_parse_duration("2d", &d));
    CHECK(d == 7); /* untouched when refused */
}

TEST(timings_in_order) {
    char err[256];
    sv_leader_opts o = {"understory-system", "understory", "me", SV_LEADER_LEASE_DURATION,
                        SV_LEADER_RENEW_DEADLINE, SV_LEADER_RETRY_PERIOD};
    CHECK(sv_leader_check_opts(&o, err, sizeof err) == 0);
    o.renew_deadline = 15;
    CHECK(sv_leader_check_opts(&o, err, sizeof err) < 0);
    CHECK_HAS(err, "--renew-deadline");
    o.renew_deadline = 10;
    o.retry_period = 10;
    CHECK(sv_leader_check_opts(&o, err, sizeof err) < 0);
    CHECK_HAS(err, "--retry-period");
    o.retry_period = 2;
    o.lease_duration = 15.5; /* leaseDurationSeconds is whole seconds */
    CHECK(sv_leader_check_opts(&o, err, sizeof err) < 0);
    CHECK_HAS(err, "--lease-duration");
    o.lease_duration = 15;
    o.name = "";
    CHECK(sv_leader_check_opts(&o, err, sizeof err) < 0);
    CHECK_HAS(err, "--lease-name");
}

TEST(identities_differ) {
    char a[300], b[300], host[256];
    CHECK(sv_leader_identity(a, sizeof a) == 0);
    CHECK(sv_leader_identity(b, sizeof b) == 0);
    CHECK(strcmp(a, b) != 0);
    CHECK(gethostname(host, sizeof host) == 0);
    host[sizeof host - 1] = '\0';
    CHECK(strncmp(a, host, strlen(host)) == 0 && a[strlen(host)] == '_' && strlen(a) == strlen(host) + 17);
    CHECK(sv_leader_identity(a, 5) < 0); /* too small: refused, not cut */
}

int main(void) {
    RUN(durations);
    RUN(timings_in_order);
    RUN(identities_differ);
    return check_report();
}
