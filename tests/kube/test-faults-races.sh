#!/usr/bin/env bash
# tests/kube/test-faults-races.sh — writes that meet a cluster which moved
# on, and writes the API server refuses, on a real control plane:
#   - a bind answered 409: the daemon saw pod c-1 pending and is stopped
#     (SIGSTOP) before its next cycle; someone else binds the pod; on
#     SIGCONT the due cycle runs before the loop reads the watch (libuv
#     runs timers before polling), so it decides on the stale cache.  The
#     audit log holds the daemon's binding answered 409, the daemon logs
#     it, the pod stays where the other binder put it, and other pods are
#     still scheduled;
#   - a pod deleted between decision and bind (same technique): the bind
#     is answered 404, the daemon forgets the pod and goes on;
#   - binds failing with the API server's own error: a validating webhook
#     on pods/binding that cannot be reached (failurePolicy Fail) makes
#     every bind fail; the daemon tries each again with backoff, a bounded
#     number of times, reports the failure, and tries again from its
#     caches on a later cycle; the pods stay pending, the daemon healthy;
#     once the webhook is gone every pod is bound exactly once.
set -euo pipefail
. "$(dirname "$0")/lib.bash"
. "$here/faults.bash"

interval=5
faults_cluster
start_serve serve --cycle-interval "$interval"

# the pods the daemon's informer holds (a plain grep of /metrics: quick,
# so that the daemon is stopped soon after it saw a pod)
pods_held() {
	curl -sf --max-time 5 "$admin/metrics" | grep '^understory_informer_objects{resource="pods"} '
}

# stale_cycle NAME ACTION: create pod NAME, wait until the daemon holds it
# (its pods informer counts one more), stop the daemon before it binds it,
# run ACTION (a command) against the pod, sleep past the cycle interval,
# continue the daemon.  Tries up to 5 pods when a cycle bound the pod
# before the stop; prints the name of the pod used.
stale_cycle() {
	local base=$1 action=$2 try name before
	for try in 1 2 3 4 5; do
		name=$base-$try
		before=$(pods_held)
		pod_yaml "$name" | k apply -f - >/dev/null
		local end=$((SECONDS + 30))
		until [[ $(pods_held) != "$before" ]]; do
			((SECONDS < end)) || fail "the daemon never saw $name"
			sleep 0.1
		done
		# the scrape answered: let the daemon go back to waiting on its loop
		# (a daemon stopped mid-work reads its sockets first when continued)
		sleep 0.1
		kill -STOP "$serve_pid"
		if [[ -z $(k -n work get pod "$name" -o jsonpath='{.spec.nodeName}') ]]; then
			$action "$name"
			sleep $((interval + 2))
			kill -CONT "$serve_pid"
			echo "$name"
			return 0
		fi
		kill -CONT "$serve_pid" # a cycle was quicker: another pod
		sleep 1
	done
	fail "a cycle bound each of $base-1..5 before the daemon could be stopped"
}

# --- a bind answered 409 -------------------------------------------------
bind_by_hand() {
	k create --raw "/api/v1/namespaces/work/pods/$1/binding" -f - >/dev/null <<-JSON
		{"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "$1"},
		 "target": {"apiVersion": "v1", "kind": "Node", "name": "n3"}}
	JSON
}
c=$(stale_cycle c bind_by_hand)
conflict() { audit | grep -qE "^[0-9.]+ create pods/binding work/$c 409$"; }
until_ok 30 "the daemon's bind of $c answered 409 in the audit log" conflict
grep -qE "^bind work/$c -> n[1-4]: already bound \(409\): " "$work/serve.out" ||
	fail "the daemon did not log the 409 on $c"
[[ $(k -n work get pod "$c" -o jsonpath='{.spec.nodeName}') == n3 ]] || fail "$c left n3"
[[ $(audit | grep -cE "^[0-9.]+ create pods/binding work/$c 201$" || true) -eq 0 ]] ||
	fail "the daemon bound $c, which was bound already"
make_pods after409 1 3
after409() { [[ $(bound_count after409) -eq 3 ]]; }
until_ok 30 "pods created after the 409 are bound" after409
binds_once after409 3
# a later cycle does not try the pod again once the watch shows it bound
sleep $((interval + 1))
[[ $(audit | grep -cE "^[0-9.]+ create pods/binding work/$c " || true) -eq 1 ]] ||
	fail "the daemon bound $c more than once after its 409: $(audit | grep "work/$c ")"

# --- a pod deleted between decision and bind: 404 --------------------------
delete_it() { k -n work delete pod "$1" --wait=false >/dev/null; }
d=$(stale_cycle d delete_it)
gone() { audit | grep -qE "^[0-9.]+ create pods/binding work/$d 404$"; }
until_ok 30 "the daemon's bind of the deleted $d answered 404 in the audit log" gone
grep -qE "^bind work/$d -> n[1-4]: gone \(404\): " "$work/serve.out" || fail "the daemon did not log the 404 on $d"
make_pods after404 1 3
after404() { [[ $(bound_count after404) -eq 3 ]]; }
until_ok 30 "pods created after the 404 are bound" after404
binds_once after404 3
[[ $(audit | grep -cE "^[0-9.]+ create pods/binding work/$d " || true) -eq 1 ]] ||
	fail "the daemon tried to bind the deleted $d again"

# --- binds failing: a webhook that cannot be reached ----------------------
closed=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
k apply -f - >/dev/null <<-YAML
	apiVersion: admissionregistration.k8s.io/v1
	kind: ValidatingWebhookConfiguration
	metadata: {name: refuse-binds}
	webhooks:
	- name: refuse-binds.understory.test
	  clientConfig: {url: "https://127.0.0.1:$closed/validate"}
	  rules:
	  - operations: [CREATE]
	    apiGroups: [""]
	    apiVersions: [v1]
	    resources: [pods/binding]
	  failurePolicy: Fail
	  sideEffects: None
	  admissionReviewVersions: [v1]
	  timeoutSeconds: 2
YAML
# the API server applies it once its informer has it: a bind by hand of a
# pod no scheduler takes says so (a new pod each try: one bind may pass)
probes=0
refused() {
	probes=$((probes + 1))
	pod_yaml "probe-$probes" nobody | k apply -f - >/dev/null
	! bind_by_hand "probe-$probes" 2>"$work/probe.err" && grep -q 'refuse-binds' "$work/probe.err"
}
until_ok 30 "the webhook refuses binds" refused
make_pods e 1 4
# each bind is tried 1 + 5 times, then reported, then tried again by a
# later cycle: wait for a failure reported after its retries
reported() { grep -qE '^bind work/e-[1-4] -> n[1-4]: failed \(500\): ' "$work/serve.out"; }
until_ok 90 "a bind refused by the webhook reported failed (500) after its retries" reported
code=$(audit | awk '$2 == "create" && $3 == "pods/binding" && $4 ~ /^work\/e-/ {print $5}' | sort -u)
[[ $code == 500 ]] || fail "the API server answered the refused binds with '$code', expected 500 only"
grep -qE 'POST /api/v1/namespaces/work/pods/e-[1-4]/binding: HTTP 500; again in [0-9]+ ms \(retry 5 of 5\)' "$work/serve.err" ||
	fail "the daemon did not retry a refused bind 5 times"
# bounded: each try series is 6 requests; the next series starts only after
# the failure was reported (a later cycle), so per pod the tries so far are
# at most 6 × (reported failures + 1)
for i in 1 2 3 4; do
	tries=$(audit | grep -cE "^[0-9.]+ create pods/binding work/e-$i 500$" || true)
	reports=$(grep -cE "^bind work/e-$i -> n[1-4]: failed \(500\): " "$work/serve.out" || true)
	((tries <= 6 * (reports + 1))) || fail "e-$i: $tries tries for $reports reported failures"
done
[[ $(bound_count e) -eq 0 ]] || fail "a pod was bound through a webhook that refuses every bind"
curl -sf -o /dev/null --max-time 5 "$admin/healthz" || fail "/healthz while binds fail"
scrape failing
retries=$(sample failing 'understory_api_retries_total{reason="server_error"} ')
[[ ${retries%.*} -ge 5 ]] || fail "understory_api_retries_total{reason=\"server_error\"} is '$retries'"
[[ -n $(sample failing 'understory_api_requests_total{code="500",verb="create"} ') ]] ||
	fail "no create answered 500 in understory_api_requests_total"

k delete validatingwebhookconfiguration refuse-binds >/dev/null
all_e() { [[ $(bound_count e) -eq 4 ]]; }
until_ok 90 "every pod is bound once the webhook is gone" all_e
binds_once e 4
stop_serve
echo "ok: 409, 404 and 500 on bind handled"
