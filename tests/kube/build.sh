#!/usr/bin/env bash
# Builds the control plane the Kubernetes tests run -- etcd, kube-apiserver,
# kube-controller-manager, kwok and kubectl -- from the Go module pinned in
# this folder into build/kube/bin. Owns only that folder; never touches the
# engine's build. Skips the build when every binary is newer than go.sum
# (the pin); otherwise Go's build cache makes a rebuild cheap.
#   tests/kube/build.sh [OUTDIR]      (default: build/kube/bin)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/kube/bin}
bins=(etcd kube-apiserver kube-controller-manager kwok kubectl)

fresh() {
	for b in "${bins[@]}"; do
		[[ -x $out/$b && $out/$b -nt $here/go.sum ]] || return 1
	done
}
fresh && exit 0
# one build at a time: a second caller waits, then finds the binaries fresh
mkdir -p "$out"
exec 9>"$out/.build.lock"
flock 9
fresh && exit 0

export PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { echo "build.sh: go not found (expected /usr/local/go/bin/go)" >&2; exit 1; }
mkdir -p "$out"
cd "$here"
# -trimpath: the binaries do not depend on where the module cache is.
# nice: the control plane is big and the machine's cores are shared.
start=$(date +%s)
nice -n 19 go build -trimpath -o "$out/etcd" go.etcd.io/etcd/server/v3
nice -n 19 go build -trimpath -o "$out/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kubectl \
	sigs.k8s.io/kwok/cmd/kwok
for b in "${bins[@]}"; do
	[[ -x $out/$b ]] || { echo "build.sh: $out/$b was not built" >&2; exit 1; }
	touch "$out/$b"
done
echo "build.sh: control plane built in $(($(date +%s) - start)) s into $out" >&2
