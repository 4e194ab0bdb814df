#!/usr/bin/env bash
# tests/kube/test-deploy.sh — `kubectl apply -f examples/kubernetes/` gives
# a running scheduler, and its RBAC is the least that works.
#
# There is no kubelet for the container, so the test plays the kubelet:
# it runs the binary in place of the image with the command and arguments
# of the applied Deployment (read back with kubectl, not repeated here),
# the ServiceAccount's token in the in-cluster layout (token, ca.crt,
# namespace; UNDERSTORY_SERVICE_ACCOUNT_DIR points there instead of
# /var/run/secrets/kubernetes.io/serviceaccount), the container's
# environment (the Downward API's pod name and namespace) and the policy
# ConfigMap's files in the kubelet's layout (a ..data symlink to a
# timestamped directory).  Two differences, both because the replicas
# share this host's network: --admin-address listens on 127.0.0.1 port 0
# (the probes are then asked on the port each replica logs), and mount
# paths are this test's directories.
#   - the two replicas elect one leader; the probes' paths answer 200 on
#     both; the seed story is scheduled (burn-in on the 28 idle GPUs,
#     serve-1's condition, training evicting exactly its room with an
#     Evict event) and the standby writes nothing (audit log);
#   - least RBAC: for every verb of every rule of the ClusterRole and the
#     Role, the verb is removed (kubectl auth can-i confirms), one daemon
#     runs, and the test names the verb and the failure it caused (a 403
#     on the call that needs it); then the rule is restored.
set -euo pipefail
. "$(dirname "$0")/lib.bash"
understory=${UNDERSTORY:-$root/build/release/understory}
story=$root/examples/kubernetes/seed-story
sa=system:serviceaccount:understory-system:understory

declare -A pid
cleanup() {
	for r in "${!pid[@]}"; do
		kill -KILL "${pid[$r]}" 2>/dev/null || true
		wait "${pid[$r]}" 2>/dev/null || true
	done
	"$cluster" down "$work/c" 2>/dev/null
	[[ -n ${KEEP_WORK:-} ]] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	for f in "$work"/*.out "$work"/*.err; do
		[[ -f $f ]] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
	done
	exit 1
}

"$cluster" up "$work/c"
k() { "$kubectl" --kubeconfig "$work/c/kubeconfig" "$@"; }
# the CRDs first: nothing else waits for them to be established
k apply -f "$root/examples/kubernetes/crds.yaml" >/dev/null
k wait --for condition=established --timeout=60s crd/queues.scheduling.run.ai crd/podgroups.scheduling.run.ai >/dev/null
k apply -f "$root/examples/kubernetes/" >"$work/applied" || fail "kubectl apply -f examples/kubernetes/ failed"
k apply -f "$story/00-cluster.yaml" >/dev/null

# --- play the kubelet ------------------------------------------------------
k -n understory-system get deployment understory -o json >"$work/deployment.json"
[[ $(jq '.spec.replicas' "$work/deployment.json") -eq 2 ]] || fail "the Deployment does not ask for two replicas"
container='.spec.template.spec.containers[0]'
[[ $(jq -r '.spec.template.spec.serviceAccountName' "$work/deployment.json") == understory ]] ||
	fail "the Deployment does not run as the ServiceAccount understory"
mapfile -t command < <(jq -r "$container.command[]" "$work/deployment.json")
mapfile -t args < <(jq -r "$container.args[]" "$work/deployment.json")
[[ ${command[0]} == understory ]] || fail "the container's command is not understory: ${command[*]}"
printf '%s\n' "${args[@]}" | grep -qx -- --leader-elect || fail "the Deployment does not pass --leader-elect"
# the admin endpoint the arguments name is the port the probes use
admin_port=$(printf '%s\n' "${args[@]}" | grep -A1 -x -- --admin-address | tail -n 1 | sed 's/.*://')
probe_port=$(jq -r "$container.ports[] | select(.name == \"admin\") | .containerPort" "$work/deployment.json")
[[ -n $admin_port && $admin_port == "$probe_port" ]] ||
	fail "--admin-address port ($admin_port) is not the probes' port ($probe_port)"
readiness=$(jq -r "$container.readinessProbe.httpGet | select(.port == \"admin\") | .path" "$work/deployment.json")
liveness=$(jq -r "$container.livenessProbe.httpGet | select(.port == \"admin\") | .path" "$work/deployment.json")
[[ $readiness == /readyz && $liveness == /healthz ]] ||
	fail "probes: readiness $readiness, liveness $liveness; expected /readyz and /healthz on the admin port"

# the service account, as the kubelet projects it
mkdir -p "$work/sa"
k -n understory-system create token understory --duration 1h >"$work/sa/token"
cp "$work/c/certs/ca.crt" "$work/sa/ca.crt"
printf understory-system >"$work/sa/namespace"
# mount MOUNTPATH of the container: its ConfigMap's files in the kubelet's
# atomic-writer layout under $work/mounts, printed
materialise() {
	local path=$1 vol cm dir stamp
	vol=$(jq -r "$container.volumeMounts[] | select(.mountPath == \"$path\") | .name" "$work/deployment.json")
	cm=$(jq -r ".spec.template.spec.volumes[] | select(.name == \"$vol\") | .configMap.name" "$work/deployment.json")
	[[ -n $cm && $cm != null ]] || fail "$path is not a ConfigMap volume of the Deployment"
	dir=$work/mounts/$vol
	stamp=..$(date -u +%Y_%m_%d_%H_%M_%S.%N)
	mkdir -p "$dir/$stamp"
	k -n understory-system get configmap "$cm" -o json >"$work/$cm.json"
	for key in $(jq -r '.data | keys[]' "$work/$cm.json"); do
		jq -j --arg k "$key" '.data[$k]' "$work/$cm.json" >"$dir/$stamp/$key"
		ln -sfn "..data/$key" "$dir/$key"
	done
	ln -sfn "$stamp" "$dir/..data"
	echo "$dir"
}
# the arguments with mount paths made this test's directories, the admin
# address on loopback port 0; --policies dropped while the binary lacks it
run_args=()
has_policies=$("$understory" serve --help | grep -c -- '--policies' || true)
for ((i = 0; i < ${#args[@]}; i++)); do
	a=${args[i]}
	if [[ $a == --admin-address ]]; then
		run_args+=("$a" 127.0.0.1:0)
		i=$((i + 1))
	elif [[ $a == --policies && $has_policies -eq 0 ]]; then
		echo "note: this understory has no --policies yet; the mount is checked, the flag not passed" >&2
		i=$((i + 1))
	elif [[ -n $(jq -r --arg p "$a" "$container.volumeMounts[] | select(.mountPath == \$p) | .name" "$work/deployment.json") ]]; then
		run_args+=("$(materialise "$a")")
	else
		run_args+=("$a")
	fi
done
# the policies mounted are the files of policies/, byte for byte
policies_mount=$(jq -r "$container.volumeMounts[] | select(.name == \"policies\") | .mountPath" "$work/deployment.json")
pdir=$(materialise "$policies_mount")
for f in "$root"/policies/*.lua; do
	cmp -s "$f" "$pdir/$(basename "$f")" || fail "the ConfigMap's $(basename "$f") is not policies/$(basename "$f")"
done
[[ $(find -L "$pdir" -maxdepth 1 -type f -name '*.lua' | wc -l) -eq $(ls "$root"/policies/*.lua | wc -l) ]] ||
	fail "the ConfigMap holds other files than policies/"

# the container's environment as the kubelet sets it: values, and the
# Downward API's pod name (understory-NAME here) and namespace
pod_env() {
	local name value field
	# fields joined by the unit separator: tabs would collapse an empty value
	while IFS=$'\x1f' read -r name value field; do
		case $field in
		"") printf '%s=%s\n' "$name" "$value" ;;
		metadata.name) printf '%s=understory-%s\n' "$name" "$1" ;;
		metadata.namespace) printf '%s=understory-system\n' "$name" ;;
		*) fail "the test does not provide $field (env $name of the Deployment)" ;;
		esac
	done < <(jq -r "$container.env // [] | .[] | [.name, (.value // \"\"), (.valueFrom.fieldRef.fieldPath // \"\")] | join(\"\\u001f\")" "$work/deployment.json")
}
pod_env check >/dev/null # every variable is one the test can provide
# start NAME: one replica as the Deployment runs it
start() {
	local envs
	mapfile -t envs < <(pod_env "$1")
	env -u KUBECONFIG "${envs[@]}" KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$(cat "$work/c/api-port")" \
		UNDERSTORY_SERVICE_ACCOUNT_DIR="$work/sa" "$understory" "${command[@]:1}" "${run_args[@]}" \
		>"$work/$1.out" 2>"$work/$1.err" &
	pid[$1]=$!
}
stop() {
	kill -TERM "${pid[$1]}"
	wait "${pid[$1]}" || fail "$1 did not stop cleanly on SIGTERM"
	unset "pid[$1]"
}
port_of() { sed -n 's|^understory serve: admin endpoint on http://127.0.0.1:\([0-9]*\)$|\1|p' "$work/$1.err" 2>/dev/null; }
probe() { # probe NAME PATH: the path answers 200
	local port
	port=$(port_of "$1")
	[[ -n $port && $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$2") == 200 ]]
}
identity() { sed -n 's|^understory serve: leader election on lease understory-system/understory as ||p' "$work/$1.err"; }
holder() { k -n understory-system get lease understory -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }
bound_count() {
	k -n "$1" get pods -l "$2" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . || true
}

# --- two replicas elect a leader and schedule the seed story --------------
start r1
start r2
for r in r1 r2; do
	until_ok 60 "$r ready ($readiness)" probe "$r" "$readiness"
	probe "$r" "$liveness" || fail "$r: $liveness is not 200"
done
elected() { [[ -n $(holder) && ($(holder) == "$(identity r1)" || $(holder) == "$(identity r2)") ]]; }
until_ok 30 "one of the two replicas holds the lease" elected
if [[ $(holder) == "$(identity r1)" ]]; then leader=r1 standby=r2; else leader=r2 standby=r1; fi
echo "elected: $leader leads, $standby stands by"
k apply -f "$story/10-background.yaml" -f "$story/20-serve.yaml" >/dev/null
burn28() { [[ $(bound_count infra app=gpu-burn) -eq 28 ]]; }
until_ok 120 "the burn-in fills the idle GPUs (28 bound)" burn28
serve1() {
	[[ $(k -n team-a get pod serve-1 -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}') == Unschedulable ]]
}
until_ok 30 "serve-1 PodScheduled=False Unschedulable" serve1
k apply -f "$story/30-train.yaml" >/dev/null
until_ok 120 "training binds once its room is free" train_bound
until_ok 30 "training runs (both pods Running)" train_runs
[[ $(k -n infra get events.events.k8s.io -o jsonpath='{range .items[?(@.reason=="Evict")]}{.reportingInstance}{"\n"}{end}' | sort -u) == "$(identity $leader)" ]] ||
	fail "the Evict events are not all the leader's (reportingInstance)"
# started together, both may have tried to create the lease: the server
# let one create it and refused the other (409); nothing else of the standby
standby_writes=$(jq -r --arg ua "understory/$(identity $standby)" 'select(.userAgent == $ua)
	| select(.objectRef.resource != "leases" or .responseStatus.code != 409) | .verb + " " + .requestURI' "$work/c/audit.log")
[[ -z $standby_writes ]] || fail "the standby wrote: $standby_writes"
leader_binds=$(jq -r --arg ua "understory/$(identity $leader)" 'select(.userAgent == $ua and .objectRef.subresource == "binding" and .responseStatus.code == 201) | .objectRef.name' "$work/c/audit.log" | wc -l)
refused=$(jq -r --arg ua "understory/$(identity $standby)" 'select(.userAgent == $ua) | .verb' "$work/c/audit.log" | wc -l)
echo "full RBAC: the leader made $leader_binds bindings and the Evict events; the standby wrote nothing ($refused lease writes refused)"
# training leaves: the burn-in comes back, for the eviction runs below
train_runs || fail "training stopped before it was deleted: phases $(train_phases)"
k -n team-a delete job train-1 --wait=true >/dev/null
k -n team-a delete podgroup train-1 >/dev/null
until_ok 120 "the burn-in back on every idle GPU (28 bound)" burn28
stop "$standby"
stop "$leader"

# --- least RBAC: every verb is needed ---------------------------------------
# can KIND INDEX VERB: whether the ServiceAccount may VERB the first
# resource of rule INDEX of KIND (clusterrole or role)
can() {
	local rule res sub group ns=()
	rule=$(jq -c ".rules[$2]" "$work/$1.json")
	res=$(jq -r '.resources[0]' <<<"$rule")
	group=$(jq -r '.apiGroups[0]' <<<"$rule")
	sub=${res#*/}
	[[ $sub == "$res" ]] && sub= || res=${res%%/*}
	[[ -n $group ]] && res=$res.$group
	[[ $1 == role ]] && ns=(-n understory-system)
	k auth can-i "$3" "$res" ${sub:+--subresource "$sub"} "${ns[@]}" --as "$sa" >/dev/null 2>&1
}
cannot() { ! can "$@"; }
# clean KIND: the object as applied, writable back with kubectl replace
k get clusterrole understory -o json | jq 'del(.metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp, .metadata.managedFields)' >"$work/clusterrole.json"
k -n understory-system get role understory-leader-election -o json |
	jq 'del(.metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp, .metadata.managedFields)' >"$work/role.json"

run=0
# without KIND INDEX VERB: the daemon with VERB removed from that rule
without() {
	local kind=$1 i=$2 verb=$3 resources pattern trigger=
	resources=$(jq -r ".rules[$i].resources | join(\",\")" "$work/$kind.json")
	case "$resources:$verb" in
	*:list | *:watch)
		pattern="^understory serve: $verb /[^ ]*/($(jq -r ".rules[$i].resources | join(\"|\")" "$work/$kind.json")): HTTP 403" ;;
	pods/binding:create)
		trigger=bind
		pattern='^bind team-a/rbac-bind -> [^ ]*: failed \(403\)' ;;
	pods/status:patch)
		trigger=status
		pattern='^pending team-a/rbac-status: .*: failed \(403\)' ;;
	pods:delete)
		trigger=train
		pattern='^evict infra/gpu-burn-[^ ]* from [^ ]* \(backgroundpods\): failed \(403\)' ;;
	events:create)
		trigger=train
		pattern='^event Evict backgroundpods [^ ]*: failed \(403\)' ;;
	leases:get) pattern='^understory serve: leader: get lease understory-system/understory: HTTP 403' ;;
	leases:create)
		trigger=nolease
		pattern='^understory serve: leader: create lease understory-system/understory: HTTP 403' ;;
	leases:update) pattern='^understory serve: leader: update lease understory-system/understory: HTTP 403' ;;
	*) fail "no check for verb $verb on $resources: add one to this test" ;;
	esac
	jq --argjson i "$i" --arg v "$verb" '.rules[$i].verbs -= [$v] | .rules |= map(select(.verbs | length > 0))' \
		"$work/$kind.json" | k replace -f - >/dev/null
	until_ok 30 "RBAC without $verb on $resources in effect" cannot "$kind" "$i" "$verb"
	case $trigger in
	nolease) k -n understory-system delete lease understory --ignore-not-found >/dev/null ;;
	train) k apply -f "$story/30-train.yaml" >/dev/null ;;
	bind | status)
		# rbac-bind fits anywhere; rbac-status (9 GPUs) nowhere: only its condition is written
		resources_of_pod='{requests: {cpu: 100m, memory: 128Mi}}'
		[[ $trigger == status ]] && resources_of_pod='{requests: {cpu: 100m, nvidia.com/gpu: "9"}, limits: {nvidia.com/gpu: "9"}}'
		k apply -f - >/dev/null <<-YAML
			apiVersion: v1
			kind: Pod
			metadata: {name: rbac-$trigger, namespace: team-a}
			spec:
			  schedulerName: understory
			  priorityClassName: train
			  containers:
			  - name: c
			    image: registry.example/train:1
			    resources: $resources_of_pod
		YAML
		;;
	esac
	run=$((run + 1))
	start "v$run"
	broke() { cat "$work/v$run.out" "$work/v$run.err" 2>/dev/null | grep -qE "$pattern"; }
	until_ok 60 "the daemon without $verb on $resources failed with a 403" broke
	echo "without $verb on $resources: $(cat "$work/v$run.out" "$work/v$run.err" | grep -E "$pattern" | head -n 1)"
	stop "v$run"
	[[ $trigger == bind || $trigger == status ]] && k -n team-a delete pod "rbac-$trigger" --wait=false >/dev/null
	k replace -f "$work/$kind.json" >/dev/null
	until_ok 30 "RBAC with $verb on $resources back" can "$kind" "$i" "$verb"
}
# the ClusterRole's rules first: the Role's runs leave the lease held
for kind in clusterrole role; do
	for i in $(jq -r '.rules | keys[]' "$work/$kind.json"); do
		for verb in $(jq -r ".rules[$i].verbs[]" "$work/$kind.json"); do
			without "$kind" "$i" "$verb"
		done
	done
done
echo "ok: examples/kubernetes/ deployed (two replicas, one leader, the seed story scheduled); each of $run verbs of its RBAC is needed"
