#!/usr/bin/env bash
# tests/kube/bench.sh — `make bench-kube`: KAI's scale-test shape on a
# real control plane on this machine (tests/kube/cluster.sh: etcd,
# kube-apiserver, kube-controller-manager and KWOK on the same cores as the
# daemon), scheduled by `understory serve`, and what it cost:
#   NODES KWOK nodes of 8 GPUs (default 500); BURN background burn-in pods
#   of one GPU (default 500, a Deployment labelled background) bound first;
#   then PODS single-GPU AI pods (default 4000), each in a PodGroup of its
#   own, across QUEUES queues (default 4), created by kube-create
#   (tests/kube/create.c) with CONCURRENCY requests in flight (default 64).
# Reported (tests/kube/bench-report.py, from the API server's audit log
# and the daemon): binds per second from the first AI pod created to the
# last bound, the creation rate, the bind rate from first bind to last,
# the time from each AI pod's creation to its bind (median, p99, max),
# API requests by verb (the daemon's /metrics), the daemon's CPU seconds
# and peak memory, and its cycle durations.
#   First, on a control plane of its own started the same way, the ceiling:
# the same nodes, PodGroups and AI pods (no burn-in: nothing to evict),
# each pod bound by kube-create --bind the moment its create is answered,
# onto the next free GPU, no scheduler at all: the best binds/s this API
# server does here.  The report gives understory's binds/s as a ratio of it.
#   tests/kube/bench.sh [--nodes N] [--pods N] [--burn N] [--queues N]
#                       [--concurrency N] [--cycle-interval S]
#                       [--check]     (every AI pod bound: exit 1 if not)
#                       [--no-ceiling] (skip the trivial binder's run)
#                       [-- SERVE-ARGS...]  (more flags for the daemon)
set -euo pipefail
. "$(dirname "$0")/lib.bash"
understory=${UNDERSTORY:-$root/build/release/understory}
creator=${KUBE_CREATE:-$(dirname "$understory")/bench/kube-create}
nodes=500 pods=4000 burn=500 queues=4 concurrency=64 interval=1 check=0 ceiling=1
serve_args=()
while (($#)); do
	case $1 in
	--nodes) nodes=$2; shift 2 ;;
	--pods) pods=$2; shift 2 ;;
	--burn) burn=$2; shift 2 ;;
	--queues) queues=$2; shift 2 ;;
	--concurrency) concurrency=$2; shift 2 ;;
	--cycle-interval) interval=$2; shift 2 ;;
	--check) check=1; shift ;;
	--no-ceiling) ceiling=0; shift ;;
	--) shift; serve_args=("$@"); break ;;
	*) echo "bench.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done

serve_pid=
cleanup() {
	if [[ -n $serve_pid ]]; then
		kill -KILL "$serve_pid" 2>/dev/null || true
		wait "$serve_pid" 2>/dev/null || true
	fi
	"$cluster" down "$work/ceil" 2>/dev/null
	"$cluster" down "$work/c" 2>/dev/null
	[[ -n ${KEEP_WORK:-} ]] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	for f in "$work"/serve.err "$work"/create.err; do
		[[ -f $f ]] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
	done
	exit 1
}
say() { echo "bench: $*" >&2; }

# the control plane k and create_all talk to: $work/c, or $work/ceil for the ceiling
cp=$work/c
k() { "$kubectl" --kubeconfig "$cp/kubeconfig" "$@"; }
# gen WHAT ARGS...: the objects, one JSON object a line
gen() { python3 "$here/bench-objects.py" "$@"; }
# create_all FILE [ARGS...]: every object of FILE created, CONCURRENCY
# requests in flight at once over HTTP/2 (kube-create: kubectl creates one
# object after another under a limit of 5 requests a second)
create_all() {
	local f=$1
	shift
	"$creator" --server "https://127.0.0.1:$(cat "$cp/api-port")" --cacert "$cp/certs/ca.crt" \
		--cert "$cp/certs/admin.crt" --key "$cp/certs/admin.key" --concurrency "$concurrency" "$@" \
		<"$f" 2>>"$work/create.err" || fail "creating the objects of $(basename "$f") failed"
}
# setup_cluster: the control plane $cp up, with the CRDs, RBAC and the nodes Ready
setup_cluster() {
	"$cluster" up "$cp"
	k apply -f "$root/examples/kubernetes/rbac.yaml" >/dev/null
	k apply -f "$root/examples/kubernetes/crds.yaml" >/dev/null
	k wait --for condition=established --timeout=60s crd/queues.scheduling.run.ai crd/podgroups.scheduling.run.ai >/dev/null
	create_all "$work/setup.jsonl"
	until_ok 300 "KWOK made the $nodes nodes Ready" ready_nodes
}
ready_nodes() { [[ $(k get nodes --no-headers 2>/dev/null | grep -c ' Ready ') -eq $nodes ]]; }

[[ -x $creator ]] || fail "no $creator (make $(dirname "$understory")/bench/kube-create)"
say "$nodes nodes, $queues queues, burn-in $burn, $pods AI pods; kube-create x$concurrency"
gen setup --nodes "$nodes" --queues "$queues" --pods "$pods" >"$work/setup.jsonl"
gen podgroups --pods "$pods" --queues "$queues" >"$work/podgroups.jsonl"
gen pods --pods "$pods" >"$work/pods.jsonl"

ceiling_args=()
if ((ceiling)); then
	cp=$work/ceil
	setup_cluster
	create_all "$work/podgroups.jsonl"
	# one slot a GPU, node by node, as many as there are pods
	for ((n = 0; n < nodes; n++)); do for g in 1 2 3 4 5 6 7 8; do printf 'bench-n%04d\n' "$n"; done; done |
		head -n "$pods" >"$work/slots"
	say "ceiling: $pods AI pods created and bound by kube-create --bind, no scheduler"
	create_all "$work/pods.jsonl" --bind "$work/slots"
	"$cluster" down "$cp"
	ceiling_args=(--ceiling-audit "$cp/audit.log")
	cp=$work/c
fi

setup_cluster

sa_kubeconfig 2h
say "serve --cycle-interval $interval ${serve_args[*]}"
"$understory" serve --kubeconfig "$work/understory.kubeconfig" --admin-address 127.0.0.1:0 \
	--cycle-interval "$interval" "${serve_args[@]}" >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
admin_port() { grep -o 'admin endpoint on http://127.0.0.1:[0-9]*' "$work/serve.err" | grep -o '[0-9]*$'; }
has_port() { admin_port >/dev/null; }
until_ok 30 "the daemon's admin endpoint" has_port
port=$(admin_port)
ready() { curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; }
until_ok 120 "the daemon synced its caches" ready

# bound_count NS: pods of NS with a node
bound_count() { k -n "$1" get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true; }
if ((burn > 0)); then
	gen burn --replicas "$burn" >"$work/burn.jsonl"
	create_all "$work/burn.jsonl"
	burned() { [[ $(bound_count bench-bg) -ge $burn ]]; }
	until_ok 600 "the burn-in bound ($burn pods)" burned
	say "burn-in bound: $burn pods"
fi

create_all "$work/podgroups.jsonl"
say "creating $pods AI pods"
start=$(date +%s.%N)
create_all "$work/pods.jsonl"
created=$(date +%s.%N)
say "created in $(awk -v a="$start" -v b="$created" 'BEGIN {printf "%.1f", b - a}') s"
all_bound() { [[ $(bound_count bench) -eq $pods ]]; }
until_ok $((600 + pods / 5)) "every AI pod bound ($pods)" all_bound
say "all $pods AI pods bound"

curl -sf "http://127.0.0.1:$port/metrics" >"$work/metrics.txt"
pid=$serve_pid
read -r utime stime < <(awk '{print $14, $15}' "/proc/$pid/stat")
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
ticks=$(getconf CLK_TCK)
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "the daemon did not stop cleanly on SIGTERM"
serve_pid=
dup=$(grep -E '^bind .*: done' "$work/serve.out" | awk '{print $2}' | sort | uniq -d | head -3)
[[ -z $dup ]] || fail "bound twice: $dup"

python3 "$here/bench-report.py" --audit "$work/c/audit.log" --metrics "$work/metrics.txt" \
	--namespace bench --pods "$pods" --cpu-seconds "$(awk -v u="$utime" -v s="$stime" -v t="$ticks" 'BEGIN {print (u + s) / t}')" \
	--peak-kib "$hwm" --rss-kib "$rss" --serve-out "$work/serve.out" "${ceiling_args[@]}" \
	--shape "$nodes nodes x 8 GPUs, $queues queues, burn-in $burn, $pods AI pods in $pods PodGroups, kube-create x$concurrency, cycle interval $interval s${serve_args:+, serve ${serve_args[*]}}" \
	$( ((check)) && echo --check)
