#!/usr/bin/env bash
# tests/kube/test-faults-pressure.sh — the API client under pressure, on a
# real control plane, proved from the API server's own audit log:
#   - the client-side rate limit: with --kube-api-qps 5 --kube-api-burst 5
#     and 40 pods to bind, the daemon's writes (the lease's apart: it has
#     a client of its own) as the server received them
#     never exceed the bucket: in any span of t seconds between two of
#     them, at most 5 + 5 t (+1: the server stamps arrival, not departure,
#     and one request may be held up on the way); and the limit does hold
#     them back (40 binds take at least (40 - 5) / 5 s of the server's
#     clock, within that same allowance);
#   - throttled for real by API Priority and Fairness (a priority level
#     with one share of concurrency and no queuing, a FlowSchema for the
#     daemon's ServiceAccount): the server answers 429 with Retry-After;
#     the daemon counts them, tries again no sooner than Retry-After (and
#     with --kube-api-retries 0, a bind given up on a 429 is sent again
#     by a later cycle no sooner either), and
#     in the end every pod is bound exactly once.
set -euo pipefail
. "$(dirname "$0")/lib.bash"
. "$here/faults.bash"

# spaced_after_429 PREFIX WHAT: from the server's clock (the audit log),
# no bind of a pod work/PREFIX-* arrived within a second (the API server's
# Retry-After) of the one before it that was answered 429, and some did
# come after one; says how many, as WHAT.
spaced_after_429() {
	audit | awk -v p="work/$1-" '$3 == "pods/binding" && index($4, p) == 1' >"$work/$1.binds"
	"$python" - "$work/$1.binds" "$2" <<-'PY'
		import sys
		last, bad, seen = {}, 0, 0
		for line in open(sys.argv[1]):
		    t, _, _, pod, code = line.split()
		    if pod in last and last[pod][1] == "429":
		        seen += 1
		        if float(t) - last[pod][0] < 1.0:
		            bad += 1
		            print("%s: again %.3f s after a 429" % (pod, float(t) - last[pod][0]), file=sys.stderr)
		    last[pod] = (float(t), code)
		print("%s: %d, too early: %d" % (sys.argv[2], seen, bad), file=sys.stderr)
		sys.exit(0 if seen and not bad else 1)
	PY
}

faults_cluster

# --- the client-side rate limit --------------------------------------------
start_serve limited --kube-api-qps 5 --kube-api-burst 5
make_pods q 1 40
all_q() { [[ $(bound_count q) -eq 40 ]]; }
until_ok 120 "40 pods bound under --kube-api-qps 5" all_q
binds_once q 40
scrape limited
waited=$(sample limited 'understory_api_rate_limiter_wait_seconds_total{} ')
"$python" -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "${waited:-0}" ||
	fail "understory_api_rate_limiter_wait_seconds_total is '$waited': no request waited for a token"
stop_serve
# the lease has a client of its own, outside the limit (serve/http.h:
# patience), as kube-scheduler's leader election: its renews are not counted
audit | awk '$3 != "leases"' >"$work/limited.audit"
[[ $(wc -l <"$work/limited.audit") -ge 40 ]] || fail "fewer than 40 writes from the daemon in the audit log"
# the bucket, over every pair of writes (i, j): j - i + 1 <= 5 + 5 (t_j - t_i) + 1
"$python" - "$work/limited.audit" <<-'PY' || fail "the daemon's writes beat the bucket (above)"
	import sys
	t = [float(l.split()[0]) for l in open(sys.argv[1])]
	worst = max((j - i + 1 - (5 + 5 * (t[j] - t[i])), i, j) for i in range(len(t)) for j in range(i, len(t)))
	print("writes: %d over %.2f s; worst excess over the bucket: %.2f" % (len(t), t[-1] - t[0], worst[0]), file=sys.stderr)
	sys.exit(0 if worst[0] <= 1 else 1)
PY
"$python" - "$work/limited.audit" <<-'PY' || fail "40 binds went faster than the bucket lets them (not held back)"
	import sys
	t = [float(l.split()[0]) for l in open(sys.argv[1]) if " pods/binding work/q-" in l]
	sys.exit(0 if len(t) == 40 and t[-1] - t[0] >= (40 - 5 - 1) / 5 else 1)
PY

# --- throttled by the API server: 429 --------------------------------------
start_serve throttled
k apply -f - >/dev/null <<-YAML
	apiVersion: flowcontrol.apiserver.k8s.io/v1
	kind: PriorityLevelConfiguration
	metadata: {name: understory-tiny}
	spec:
	  type: Limited
	  limited:
	    nominalConcurrencyShares: 1
	    lendablePercent: 0
	    limitResponse: {type: Reject}
	---
	apiVersion: flowcontrol.apiserver.k8s.io/v1
	kind: FlowSchema
	metadata: {name: understory-tiny}
	spec:
	  priorityLevelConfiguration: {name: understory-tiny}
	  matchingPrecedence: 100
	  distinguisherMethod: {type: ByUser}
	  rules:
	  - subjects:
	    - kind: ServiceAccount
	      serviceAccount: {name: understory, namespace: understory-system}
	    resourceRules:
	    - verbs: ["*"]
	      apiGroups: ["*"]
	      resources: ["*"]
	      namespaces: ["*"]
	      clusterScope: true
YAML
make_pods t 1 60
all_t() { [[ $(bound_count t) -eq 60 ]]; }
until_ok 180 "60 pods bound while the API server throttles the daemon" all_t
binds_once t 60
scrape throttled
throttled=$(sample throttled 'understory_api_retries_total{reason="throttled"} ')
[[ ${throttled%.*} -ge 1 ]] || fail "the daemon counted no retry after a 429 ('$throttled')"
[[ -n $(sample throttled 'understory_api_requests_total{code="429",' | head -1) ]] ||
	fail "no request answered 429 in understory_api_requests_total"
[[ $(audit | awk '$5 == 429' | wc -l) -ge 1 ]] || fail "the audit log shows no 429 to the daemon"
# Retry-After honoured: each retry after a 429 waited at least its seconds
grep -E ': HTTP 429 with Retry-After; again in [0-9]+ ms' "$work/throttled.err" >"$work/429.lines" ||
	fail "the daemon did not log a 429 with Retry-After"
awk '{for (i = 1; i < NF; i++) if ($i == "in") ms = $(i + 1); if (ms < 1000) bad++} END {exit bad > 0}' "$work/429.lines" ||
	fail "a retry after a 429 waited less than Retry-After's second: $(head -3 "$work/429.lines")"
# and from the server's clock: a bind answered 429 came back no sooner
# than the Retry-After second after (the retry left at least 1 s after the
# answer, which came after the request arrived)
spaced_after_429 t "retries after a 429 seen by the server" ||
	fail "a bind came back sooner than Retry-After after its 429 (above)"
curl -sf -o /dev/null --max-time 5 "$admin/healthz" || fail "/healthz while throttled"
stop_serve

# --- binds given up on a 429: the next cycle's bind waits it out too -------
# With --kube-api-retries 0 every bind answered 429 is given up at once
# ("failed (429)") and the next cycle binds the pod again; that bind waits
# out the 429's Retry-After as a retry would (serve/http.c): from the
# server's clock, no bind of a pod arrives within a second of the one
# before it that was answered 429.  The level above still throttles.
start_serve gaveup --kube-api-retries 0
make_pods g 1 40
all_g() { [[ $(bound_count g) -eq 40 ]]; }
until_ok 180 "40 pods bound while every throttled bind is given up" all_g
binds_once g 40
grep -q 'failed (429)' "$work/gaveup.out" || fail "no bind given up on a 429: $(tail -3 "$work/gaveup.out")"
! grep -q 'again in' "$work/gaveup.err" || fail "a request was tried again under --kube-api-retries 0: $(grep -m1 'again in' "$work/gaveup.err")"
spaced_after_429 g "binds sent again by a later cycle after a 429" ||
	fail "a bind came back sooner than Retry-After after a 429 it gave up on (above)"
stop_serve
echo "ok: the rate limit holds, 429s are retried, and waited out after a bind gives up; every pod bound once"
