#!/usr/bin/env bash
# build-tools.sh builds the control-plane binaries the end-to-end harness runs
# (kube-apiserver, kubectl, agent-sandbox-controller, sandbox-router) from the
# versions pinned in test/e2e/tools/go.mod, once, into a cache directory keyed
# by that module's go.mod, go.sum and the Go version. Later runs reuse them.
#
# Usage: test/e2e/build-tools.sh            prints the binary directory on stdout
# Env:   E2E_CACHE_DIR  cache root (default: /var/cache/go-runtime-sandbox/e2e-bin
#                       when writable, so fresh clones (CI, make lint) reuse one
#                       build; else <repo>/.cache/e2e-bin)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
tools="$here/tools"
cache_root="${E2E_CACHE_DIR:-/var/cache/go-runtime-sandbox/e2e-bin}"
if ! mkdir -p "$cache_root" 2>/dev/null || [[ ! -w $cache_root ]]; then
	cache_root="$repo/.cache/e2e-bin"
fi

key="$( { cat "$tools/go.mod" "$tools/go.sum"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-16)"
out="$cache_root/tools-$key"
bins=(kube-apiserver kubectl agent-sandbox-controller sandbox-router)

complete=1
for b in "${bins[@]}"; do
	[[ -x "$out/$b" ]] || complete=0
done
if [[ $complete == 1 ]]; then
	echo "build-tools: cached in $out" >&2
	echo "$out"
	exit 0
fi

echo "build-tools: building ${bins[*]} into $out (cold build: several minutes on 2 cores)" >&2
start=$(date +%s)
tmp="$cache_root/.tmp-$key-$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
(
	cd "$tools"
	# One go build for all four shares the compile of their common packages.
	GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' -o "$tmp/" \
		k8s.io/kubernetes/cmd/kube-apiserver \
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
