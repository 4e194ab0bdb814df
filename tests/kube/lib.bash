# tests/kube/lib.bash — what every Kubernetes test starts with, sourced
# after `set -euo pipefail` (tests/run.sh runs only test-*.sh): the paths
# ($here, $root, $cluster, $kubectl), the control plane built
# (tests/kube/build.sh: a no-op once built), a scratch directory $work,
# and until_ok.  Each test keeps its own fail() and cleanup trap, since
# what they show and stop differs.
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
