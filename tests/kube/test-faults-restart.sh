#!/usr/bin/env bash
# tests/kube/test-faults-restart.sh — the API server restarted in the
# middle of a run (tests/kube/cluster.sh restart): 30 pods are being
# bound when it stops (the daemon runs with --kube-api-qps 5, so that its
# binds take seconds and the restart lands among them: some are answered
# by no one and tried again), 30 more are created one by one around the
# outage (each as soon as the API server takes it).  Then:
#   - every pod is bound, and exactly once: the audit log holds one
#     binding created (201) by the daemon per pod, whatever was retried;
#   - the pods created while the daemon's watches were down are bound too
#     (no decision lost): the watches resumed or relisted (metrics);
#   - the daemon is alive and healthy throughout.
set -euo pipefail
. "$(dirname "$0")/lib.bash"
. "$here/faults.bash"

faults_cluster
start_serve serve --kube-api-qps 5 --kube-api-burst 5

make_pods a 1 30
# b-1..b-30, one at a time, each tried until the API server takes it
(
	for i in $(seq 1 30); do
		until pod_yaml "b-$i" | k apply -f - >/dev/null 2>&1; do sleep 0.2; done
		sleep 0.1
	done
) &
creator=$!
pids+=("$creator")
"$cluster" restart "$work/c" kube-apiserver
wait "$creator" || fail "the pods b-* could not be created"
kill -0 "$serve_pid" 2>/dev/null || fail "the daemon died when the API server restarted"

all_a() { [[ $(bound_count a) -eq 30 ]]; }
all_b() { [[ $(bound_count b) -eq 30 ]]; }
until_ok 120 "the 30 pods a-* are bound after the restart" all_a
until_ok 120 "the 30 pods b-* (created around the outage) are bound" all_b
binds_once a 30
binds_once b 30
# the daemon's own account agrees: 60 binds done, none twice
dup=$(grep -E '^bind work/[ab]-[0-9]+ -> n[1-4]: done \(201\)$' "$work/serve.out" | awk '{print $2}' | sort | uniq -d)
[[ -z $dup ]] || fail "the daemon logged two successful binds of: $dup"
[[ $(grep -cE '^bind work/[ab]-[0-9]+ -> n[1-4]: done \(201\)$' "$work/serve.out") -eq 60 ]] ||
	fail "the daemon did not log 60 successful binds"

# the restart did land among the binds: some were tried again
grep -qE '^understory serve: POST /api/v1/namespaces/work/pods/[ab]-[0-9]+/binding: .*; again in [0-9]+ ms' \
	"$work/serve.err" || fail "no bind was in flight during the restart (none tried again)"
# the watches ended with the old API server and came back (resumed or
# relisted), and the daemon says so
scrape after
restarts=$(sample after 'understory_informer_watch_restarts_total{resource="pods"} ')
[[ ${restarts%.*} -ge 1 ]] || fail "the pods watch was not restarted (watch restarts: '$restarts')"
grep -qE 'watch /api/v1/pods: |list /api/v1/pods: ' "$work/serve.err" ||
	fail "the daemon did not log the broken pods watch"
curl -sf -o /dev/null --max-time 5 "$admin/healthz" || fail "/healthz after the restart"
curl -sf -o /dev/null --max-time 5 "$admin/readyz" || fail "/readyz after the restart"
stop_serve
echo "ok: 60 pods bound exactly once across an API server restart"
