# tests/kube/lib.bash — what every Kubernetes test starts with, sourced
# after `set -euo pipefail` (tests/run.sh runs only test-*.sh): the paths
# ($here, $root, $cluster, $kubectl), the control plane built
# (tests/kube/build.sh: a no-op once built), a scratch directory $work,
# and until_ok.  Then the set-up the daemon's tests share: fail, k,
# kube_up (the control plane with RBAC and CRDs, and the cleanup trap),
# queue_namespace (a KAI Queue and the Namespace whose pods go to it),
# gpu_pod (a pod of ours asking GPUs), sa_kubeconfig (the daemon's ServiceAccount credentials), start_serve,
# stop_serve, and train_bound and train_runs (the seed story's training
# is bound, and runs).  A test whose failure output or cleanup differs
# defines its own fail() or trap after sourcing this.
# A command that stops the test under `set -e` names itself and its line:
# a failure outside fail() would otherwise leave no message at all.
set -E
trap 'echo "FAIL: ${BASH_SOURCE[0]##*/}:$LINENO: \"$BASH_COMMAND\" exited $?" >&2' ERR
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster=$here/cluster.sh
kubectl=$root/build/kube/bin/kubectl
"$here/build.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/understory-kube.XXXXXX")

# until_ok SECONDS WHAT CMD...: CMD succeeds within SECONDS, else fail
# (the test's own) naming WHAT.
until_ok() {
	local secs=$1 what=$2
	local end=$((SECONDS + secs))
	shift 2
	until "$@"; do
		((SECONDS < end)) || fail "$what (after waiting $secs s)"
		sleep 1
	done
}

# Processes the test started in the background (daemons, load generators):
# kube_cleanup stops them.
pids=()

# kube_cleanup: the EXIT trap kube_up sets: every process in $pids resumed
# (one may be SIGSTOPped) and killed, the control plane stopped, $work
# removed unless KEEP_WORK is set.
kube_cleanup() {
	for p in "${pids[@]}"; do
		kill -CONT "$p" 2>/dev/null || true
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	"$cluster" down "$work/c" 2>/dev/null
	[[ -n ${KEEP_WORK:-} ]] && echo "kept $work" >&2 || rm -rf "$work"
}

# fail MESSAGE: say it, show the tail of every log in $work, exit 1.
fail() {
	echo "FAIL: $*" >&2
	for f in "$work"/*.out "$work"/*.err; do
		[[ -f $f ]] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }
	done
	exit 1
}

# k ARGS...: kubectl as the control plane's administrator.
k() { "$kubectl" --kubeconfig "$work/c/kubeconfig" "$@"; }

# kube_up: kube_cleanup as the EXIT trap, a control plane in $work/c, the
# daemon's ServiceAccount and RBAC (examples/kubernetes/rbac.yaml) and the
# KAI CRDs (crds.yaml), established.
kube_up() {
	trap kube_cleanup EXIT
	"$cluster" up "$work/c"
	k apply -f "$root/examples/kubernetes/rbac.yaml" >/dev/null
	k apply -f "$root/examples/kubernetes/crds.yaml" >/dev/null
	k wait --for condition=established --timeout=60s crd/queues.scheduling.run.ai crd/podgroups.scheduling.run.ai >/dev/null
}

# queue_namespace NAME GPU_QUOTA: the YAML of a KAI Queue NAME (GPU_QUOTA
# GPUs, -1: none; cpu and memory without quota or limit) and of a
# Namespace NAME whose pods go to it, for `k apply -f -`.
queue_namespace() {
	cat <<-YAML
		apiVersion: scheduling.run.ai/v2
		kind: Queue
		metadata: {name: $1}
		spec:
		  resources:
		    gpu: {quota: $2, overQuotaWeight: 1, limit: -1}
		    cpu: {quota: -1, overQuotaWeight: 1, limit: -1}
		    memory: {quota: -1, overQuotaWeight: 1, limit: -1}
		---
		apiVersion: v1
		kind: Namespace
		metadata:
		  name: $1
		  labels: {kai.scheduler/queue: $1}
	YAML
}

# gpu_pod NAME NAMESPACE APP GPUS: the YAML of a pod of ours (scheduler
# understory) labelled app=APP, asking 1 core, 1Gi and GPUS GPUs,
# tolerating the fake nodes, deleted at once (no grace), for `k apply -f -`.
gpu_pod() {
	cat <<-YAML
		apiVersion: v1
		kind: Pod
		metadata: {name: $1, namespace: $2, labels: {app: $3}}
		spec:
		  schedulerName: understory
		  terminationGracePeriodSeconds: 0
		  tolerations: [{key: kwok.x-k8s.io/node, operator: Exists}]
		  containers:
		  - name: c
		    image: fake
		    resources:
		      requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "$4"}
		      limits: {nvidia.com/gpu: "$4"}
		---
	YAML
}

# sa_kubeconfig [DURATION]: $work/understory.kubeconfig, the daemon's
# credentials: a token of the ServiceAccount understory-system/understory
# (valid DURATION, default 1h).
sa_kubeconfig() {
	cat >"$work/understory.kubeconfig" <<-YAML
		apiVersion: v1
		kind: Config
		clusters:
		- name: test
		  cluster:
		    server: https://127.0.0.1:$(cat "$work/c/api-port")
		    certificate-authority: $work/c/certs/ca.crt
		users:
		- name: understory
		  user:
		    token: $(k -n understory-system create token understory --duration "${1:-1h}")
		contexts:
		- name: understory
		  context: {cluster: test, user: understory}
		current-context: understory
	YAML
}

# start_serve NAME [ARGS...]: `understory serve` ($understory) with ARGS as
# the ServiceAccount, output in $work/NAME.out/.err, pid in $serve_pid (and
# $pids), admin endpoint in $admin; returns once every informer has listed
# (/readyz).  Environment given before the call reaches the daemon.
start_serve() {
	local name=$1
	shift
	"$understory" serve --kubeconfig "$work/understory.kubeconfig" --admin-address 127.0.0.1:0 "$@" \
		>"$work/$name.out" 2>"$work/$name.err" &
	serve_pid=$!
	pids+=("$serve_pid")
	local port= end=$((SECONDS + 30))
	until port=$(sed -n 's|^understory serve: admin endpoint on http://127.0.0.1:\([0-9]*\)$|\1|p' "$work/$name.err" 2>/dev/null) &&
		[[ -n $port ]]; do
		((SECONDS < end)) || fail "serve ($name) did not say where its admin endpoint is"
		sleep 0.2
	done
	admin=http://127.0.0.1:$port
	until_ok 60 "serve ($name) is ready" curl -sf -o /dev/null --max-time 5 "$admin/readyz"
}

# stop_serve: SIGTERM the last daemon started, and it stops cleanly.
stop_serve() {
	kill -TERM "$serve_pid"
	wait "$serve_pid" || fail "serve did not stop cleanly on SIGTERM"
}

# train_bound: both of the seed story's training pods (Job train-1 in
# team-a) are bound to a node.
train_bound() {
	[[ $(k -n team-a get pods -l job-name=train-1 -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true) -eq 2 ]]
}
# train_phases: the phases of the seed story's training pods (Job train-1
# in team-a), sorted, on one line: "Running Running" while it runs.  The
# test cluster runs a pod until it is deleted (kwok-stages.yaml), as a
# kubelet runs training for hours; a phase other than Running here means a
# member ended early, which strands a gang of minMember 2.
train_phases() {
	k -n team-a get pods -l job-name=train-1 -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | sort | xargs
}
train_runs() { [[ $(train_phases) == "Running Running" ]]; }
