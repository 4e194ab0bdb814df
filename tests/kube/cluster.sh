#!/usr/bin/env bash
# tests/kube/cluster.sh — a real Kubernetes control plane on loopback, for
# the tests and for trying understory by hand: etcd, kube-apiserver (RBAC
# on, service-account tokens), kube-controller-manager (Deployment,
# ReplicaSet, DaemonSet, Job, garbage-collector, service-account and
# node-lifecycle controllers: the last one lifts the not-ready taint once a
# node is Ready, as in a real cluster) and KWOK, which plays the kubelet of every node annotated
# `kwok.x-k8s.io/node: fake` (pods bound there run; deleted ones go after
# their grace period).  Binaries come from tests/kube/build.sh.
#
#   tests/kube/cluster.sh up DIR     start it with DIR as its working
#                                    directory; when ready, DIR/kubeconfig is
#                                    an admin kubeconfig
#   tests/kube/cluster.sh down DIR   stop everything `up DIR` started
#   tests/kube/cluster.sh restart DIR kube-apiserver|etcd|...
#                                    stop one component and start it again
#                                    as before (fault tests); returns when
#                                    the API server answers again
#   tests/kube/cluster.sh compact DIR
#                                    compact etcd at its current revision
#                                    (physical): watches from before it
#                                    that reach etcd get 410 Gone
#
# Owns DIR and the processes it starts there; never touches anything else.
# Nothing outlives its owner: `up` leaves a watchdog that runs `down` when
# the process that called `up` exits (however it dies), unless
# KUBE_CLUSTER_OWNER=none (then only `down` stops it).  Every process gets
# its own pid file in DIR/pids; logs are in DIR/logs.  Only 127.0.0.1 is
# ever listened on or talked to.
#
# DIR/audit.log is the API server's audit log (JSON lines, one per
# request that writes: create, update, patch, delete, deletecollection, at
# Metadata level, so each line names verb, objectRef, user, userAgent and
# responseStatus.code): how a test proves what a client wrote, or that it
# wrote nothing, from the server's side.
set -Eeuo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${KUBE_BIN:-$root/build/kube/bin}

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

usage() {
	echo "usage: tests/kube/cluster.sh up|down|compact DIR, or restart DIR COMPONENT" >&2
	exit 2
}

# A TCP port on 127.0.0.1 that nothing listens on and that this run has not
# handed out yet, outside the kernel's ephemeral range: a port from that
# range may be taken by any outgoing connection between the check and the
# component's bind.
declare -A taken=()
eph_lo=32768 eph_hi=60999
read -r eph_lo eph_hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
free_port() {
	local p lo=10000 hi=$((eph_lo - 1))
	((hi - lo >= 1000)) || { lo=$((eph_hi + 1)); hi=65535; }
	for _ in $(seq 200); do
		p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
		[[ -n ${taken[$p]:-} ]] && continue
		if ! (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then
			taken[$p]=1
			echo "$p"
			return 0
		fi
	done
	die "no free port on 127.0.0.1"
}

# start NAME CMD...: run CMD in its own session (so `down` can stop its
# whole process group), output to DIR/logs/NAME.log, pid in DIR/pids.
start() {
	local name=$1
	shift
	mkdir -p "$DIR/cmd"
	printf '%s\0' "$@" >"$DIR/cmd/$name" # for restart
	setsid "$@" >"$DIR/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$DIR/pids/$name.pid"
}

# wait_for WHAT SECONDS CMD...: until CMD succeeds; fails naming WHAT and
# showing the log of the component that is not ready.
wait_for() {
	local what=$1 secs=$2 log=$3
	shift 3
	local end=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= end)); then
			echo "cluster.sh: $what not ready after ${secs}s; last lines of $log:" >&2
			tail -n 20 "$log" >&2 || true
			return 1
		fi
		for f in "$DIR"/pids/*.pid; do
			[[ $f == */watchdog.pid ]] && continue
			kill -0 "$(cat "$f")" 2>/dev/null || {
				echo "cluster.sh: $(basename "$f" .pid) exited; last lines of its log:" >&2
				tail -n 20 "$DIR/logs/$(basename "$f" .pid).log" >&2 || true
				return 1
			}
		done
		sleep 0.5
	done
}

certs() {
	local c=$DIR/certs
	mkdir -p "$c"
	cd "$c"
	# quiet: openssl writes progress dots to stderr
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
		-subj "/CN=understory-test-ca" 2>/dev/null
	cat >serving.ext <<-EOF
		subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
		extendedKeyUsage=serverAuth
	EOF
	echo "extendedKeyUsage=clientAuth" >client.ext
	# name subject extfile
	issue() {
		openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
		openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
			-extfile "$3" -out "$1.crt" 2>/dev/null
		rm -f "$1.csr"
	}
	issue apiserver "/CN=kube-apiserver" serving.ext
	issue admin "/O=system:masters/CN=admin" client.ext
	issue controller-manager "/O=system:masters/CN=system:kube-controller-manager" client.ext
	issue kwok "/O=system:masters/CN=kwok" client.ext
	# service-account token signing
	openssl genrsa -out sa.key 2048 2>/dev/null
	openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
	cd - >/dev/null
}

# kubeconfig FILE USER: a kubeconfig for USER's client certificate, with the
# certificates inline (the file stands alone).
kubeconfig() {
	local c=$DIR/certs
	cat >"$1" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: understory-test
		  cluster:
		    server: https://127.0.0.1:$API_PORT
		    certificate-authority-data: $(base64 -w0 "$c/ca.crt")
		users:
		- name: $2
		  user:
		    client-certificate-data: $(base64 -w0 "$c/$2.crt")
		    client-key-data: $(base64 -w0 "$c/$2.key")
		contexts:
		- name: $2@understory-test
		  context:
		    cluster: understory-test
		    user: $2
		current-context: $2@understory-test
	EOF
}

up() {
	[[ -e $DIR/pids ]] && die "$DIR already holds a cluster (run: tests/kube/cluster.sh down $DIR)"
	for b in etcd kube-apiserver kube-controller-manager kwok kubectl; do
		[[ -x $BIN/$b ]] || die "$BIN/$b is missing: run tests/kube/build.sh first"
	done
	command -v openssl >/dev/null || die "openssl is not installed (make deps installs it)"
	mkdir -p "$DIR/pids" "$DIR/logs"
	DIR=$(cd "$DIR" && pwd)
	local owner=${KUBE_CLUSTER_OWNER:-$PPID}
	if [[ $owner != none ]]; then
		# the watchdog: when the owner is gone, so is the cluster
		setsid bash -c 'while kill -0 "$1" 2>/dev/null && [[ -e "$2/pids" ]]; do sleep 1; done
			[[ -e "$2/pids" ]] && KUBE_CLUSTER_WATCHDOG=1 "$3" down "$2"' watchdog "$owner" "$DIR" "$here/cluster.sh" \
			>"$DIR/logs/watchdog.log" 2>&1 </dev/null &
		echo $! >"$DIR/pids/watchdog.pid"
	fi
	# a failure half-way stops what was started
	trap 'down_quiet' ERR

	certs
	local etcd_port peer_port
	etcd_port=$(free_port)
	peer_port=$(free_port)
	API_PORT=$(free_port)
	echo "$API_PORT" >"$DIR/api-port"
	echo "$etcd_port" >"$DIR/etcd-port"

	start etcd "$BIN/etcd" --name understory-test --data-dir "$DIR/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" \
		--advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$peer_port" \
		--initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
		--initial-cluster "understory-test=http://127.0.0.1:$peer_port" \
		--unsafe-no-fsync
	wait_for etcd 60 "$DIR/logs/etcd.log" curl -sf "http://127.0.0.1:$etcd_port/health"

	local c=$DIR/certs
	# the audit policy: writes only (reads would drown them), Metadata
	cat >"$DIR/audit-policy.yaml" <<-EOF
		apiVersion: audit.k8s.io/v1
		kind: Policy
		omitStages: [RequestReceived]
		rules:
		- level: Metadata
		  verbs: [create, update, patch, delete, deletecollection]
		- level: None
	EOF
	# The endpoint reconciler is off: it would publish 127.0.0.1 as the
	# kubernetes Service's endpoint, which Endpoints validation refuses.
	start kube-apiserver "$BIN/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
		--cert-dir "$DIR/apiserver" \
		--tls-cert-file "$c/apiserver.crt" --tls-private-key-file "$c/apiserver.key" \
		--client-ca-file "$c/ca.crt" \
		--authorization-mode RBAC \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$c/sa.pub" \
		--service-account-signing-key-file "$c/sa.key" \
		--service-cluster-ip-range 10.96.0.0/16 \
		--endpoint-reconciler-type none \
		--audit-policy-file "$DIR/audit-policy.yaml" --audit-log-path "$DIR/audit.log" \
		--audit-log-format json --audit-log-mode blocking --audit-log-maxbackup 0 \
		--profiling=false
	kubeconfig "$DIR/kubeconfig" admin
	kubeconfig "$DIR/controller-manager.kubeconfig" controller-manager
	kubeconfig "$DIR/kwok.kubeconfig" kwok
	wait_for kube-apiserver 120 "$DIR/logs/kube-apiserver.log" \
		curl -sf --cacert "$c/ca.crt" --cert "$c/admin.crt" --key "$c/admin.key" \
		"https://127.0.0.1:$API_PORT/readyz"

	start kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig "$DIR/controller-manager.kubeconfig" \
		--controllers deployment-controller,replicaset-controller,daemonset-controller,job-controller,garbage-collector-controller,serviceaccount-controller,serviceaccount-token-controller,pod-garbage-collector-controller,namespace-controller,node-lifecycle-controller \
		--service-account-private-key-file "$c/sa.key" --root-ca-file "$c/ca.crt" \
		--use-service-account-credentials=false \
		--kube-api-qps 200 --kube-api-burst 400 \
		--leader-elect=false --secure-port 0 --profiling=false

	local kwok_port
	kwok_port=$(free_port)
	start kwok "$BIN/kwok" --kubeconfig "$DIR/kwok.kubeconfig" --config "$here/kwok-stages.yaml" \
		--manage-all-nodes=false \
		--manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
		--node-ip 127.0.0.1 --cidr 10.244.0.1/16 \
		--server-address "127.0.0.1:$kwok_port"
	wait_for kwok 60 "$DIR/logs/kwok.log" curl -sf "http://127.0.0.1:$kwok_port/healthz"
	# pods need the namespace's ServiceAccount, made by the controller manager
	wait_for kube-controller-manager 60 "$DIR/logs/kube-controller-manager.log" \
		"$BIN/kubectl" --kubeconfig "$DIR/kubeconfig" -n default get serviceaccount default
	trap - ERR
	echo "cluster.sh: up: kubectl --kubeconfig $DIR/kubeconfig (API server https://127.0.0.1:$API_PORT)" >&2
}

# stop NAME: TERM its process group, KILL after 10 s.
stop() {
	local f=$DIR/pids/$1.pid pid
	[[ -f $f ]] || return 0
	pid=$(cat "$f")
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	rm -f "$f"
}

down() {
	[[ -d $DIR/pids ]] || return 0
	# clients first, etcd last; the watchdog is not waited for (it may be
	# the one running this)
	for name in kwok kube-controller-manager kube-apiserver etcd; do stop "$name"; done
	for f in "$DIR"/pids/*.pid; do
		[[ -e $f ]] || continue
		[[ $f == */watchdog.pid ]] && continue
		stop "$(basename "$f" .pid)"
	done
	local wd
	wd=$(cat "$DIR/pids/watchdog.pid" 2>/dev/null || true)
	rm -rf "$DIR/pids"
	# the watchdog goes too, unless it is the one running this
	[[ -n $wd && -z ${KUBE_CLUSTER_WATCHDOG:-} ]] && { kill -TERM "$wd" 2>/dev/null || true; }
	return 0
}

restart() {
	local name=$1 args=()
	[[ -f $DIR/cmd/$name && -d $DIR/pids ]] || die "$DIR has no running $name"
	stop "$name"
	mapfile -d '' args <"$DIR/cmd/$name"
	start "$name" "${args[@]}"
	local c=$DIR/certs
	wait_for kube-apiserver 120 "$DIR/logs/kube-apiserver.log" \
		curl -sf --cacert "$c/ca.crt" --cert "$c/admin.crt" --key "$c/admin.key" \
		"https://127.0.0.1:$(cat "$DIR/api-port")/readyz"
}

compact() {
	local etcd rev
	etcd=http://127.0.0.1:$(cat "$DIR/etcd-port")
	rev=$(curl -sf -X POST "$etcd/v3/kv/range" -d '{"key": "AA=="}' | sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')
	[[ -n $rev ]] || die "could not read etcd's revision at $etcd"
	curl -sf -X POST "$etcd/v3/kv/compaction" -d "{\"revision\": \"$rev\", \"physical\": true}" >/dev/null ||
		die "could not compact etcd at $etcd to revision $rev"
}

down_quiet() {
	echo "cluster.sh: up failed; stopping what was started (logs in $DIR/logs)" >&2
	down
}

[[ $# -eq 2 || ($# -eq 3 && $1 == restart) ]] || usage
DIR=$2
case $1 in
restart)
	DIR=$(cd "$DIR" && pwd)
	restart "$3"
	;;
up)
	mkdir -p "$DIR"
	up
	;;
compact)
	DIR=$(cd "$DIR" && pwd)
	compact
	;;
down)
	[[ -d $DIR ]] || exit 0
	DIR=$(cd "$DIR" && pwd)
	down
	;;
*) usage ;;
esac
