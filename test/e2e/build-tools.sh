#!/usr/bin/env bash
# build-tools.sh builds the Kubernetes and agent-sandbox binaries the
# end-to-end harness runs (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kubectl, agent-sandbox-controller, sandbox-router)
# from the versions pinned in test/e2e/tools/go.mod, once, into a cache
# directory keyed by that module's go.mod, go.sum and the Go version. Later
# runs reuse them.
#
# Usage: test/e2e/build-tools.sh            prints the binary directory on stdout
# Env:   E2E_CACHE_DIR  cache root (default: /var/cache/go-runtime-sandbox/e2e,
#                       or <repo>/.cache/e2e when that is not writable)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=/dev/null
source "$here/lib.sh"
tools="$here/tools"

key="$( { cat "$tools/go.mod" "$tools/go.sum"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-16)"
bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl agent-sandbox-controller sandbox-router)

complete() {
	local b
	for b in "${bins[@]}"; do
		[[ -x "$1/$b" ]] || return 1
	done
}
# A user other than root (make lint's kubectl) uses root's build when it
# is there, rather than building its own into the repo's .cache/e2e.
shared=/var/cache/go-runtime-sandbox/e2e/tools-$key
if [[ -z ${E2E_CACHE_DIR:-} ]] && complete "$shared"; then
	echo "build-tools: cached in $shared" >&2
	echo "$shared"
	exit 0
fi
out="$(e2e_cache_root)/tools-$key"
if complete "$out"; then
	echo "build-tools: cached in $out" >&2
	echo "$out"
	exit 0
fi

# The version Kubernetes binaries report (kubelet registers it on its Node):
# without these they say v0.0.0, and the apiserver and kubelet disagree.
kver="$(cd "$tools" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
kmajor="${kver#v}"
kminor="${kmajor#*.}"
kmajor="${kmajor%%.*}"
kminor="${kminor%%.*}"
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$kver -X $vpkg.gitMajor=$kmajor -X $vpkg.gitMinor=$kminor -X $vpkg.gitTreeState=clean"

echo "build-tools: building ${bins[*]} ($kver) into $out (cold: 10-20 min on 2 cores)" >&2
start=$(date +%s)
tmp="$(dirname "$out")/.tmp-tools-$key-$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
(
	cd "$tools"
	# One go build for all of them shares the compile of their common packages.
	GOFLAGS=-buildvcs=false CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$tmp/" \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler \
		k8s.io/kubernetes/cmd/kubelet \
		k8s.io/kubernetes/cmd/kubectl \
		sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller \
		sigs.k8s.io/agent-sandbox/sandbox-router/cmd
)
mv "$tmp/cmd" "$tmp/sandbox-router"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "build-tools: built in $(($(date +%s) - start)) s" >&2
echo "$out"
