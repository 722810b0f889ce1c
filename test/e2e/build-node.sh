#!/usr/bin/env bash
# build-node.sh builds the container runtime the end-to-end node runs, once,
# into a cache directory keyed by the versions below and the Go version:
#   containerd, containerd-shim-runc-v2, ctr   (containerd v2, module proxy)
#   runsc, containerd-shim-runsc-v1            (gVisor, module proxy)
# runc and the CNI plugins come from Debian (scripts/install-deps.sh).
#
# gVisor's shim sets its own oom_score_adj to -999 and fails when the kernel
# refuses (a VM that gives root no CAP_SYS_RESOURCE, like our CI machines).
# The build edits that one check in a private copy of the downloaded source so
# EPERM is tolerated; nothing of gVisor's is committed here.
#
# Usage: test/e2e/build-node.sh     prints the binary directory on stdout
# Env:   E2E_CACHE_DIR              cache root (see lib.sh)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=/dev/null
source "$here/lib.sh"

containerd_version=v2.4.2
# gVisor publishes no semver tags to the module proxy; this is the pseudo
# version of its "go" branch that `go install gvisor.dev/gvisor/runsc@latest`
# resolved to when pinned (2026-12-01).
gvisor_version=v0.0.0-20260905035102-160fafc42237

key="$( { echo "$containerd_version $gvisor_version oom-eperm-1"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-16)"
out="$(e2e_cache_root)/node-$key"
bins=(containerd containerd-shim-runc-v2 ctr runsc containerd-shim-runsc-v1)

complete=1
for b in "${bins[@]}"; do
	[[ -x "$out/$b" ]] || complete=0
done
if [[ $complete == 1 ]]; then
	echo "build-node: cached in $out" >&2
	echo "$out"
	exit 0
fi

echo "build-node: building containerd $containerd_version and gVisor $gvisor_version into $out (cold: 3-8 min on 2 cores)" >&2
start=$(date +%s)
tmp="$(dirname "$out")/.tmp-node-$key-$$"
rm -rf "$tmp"
mkdir -p "$tmp/bin"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
export GOFLAGS=-buildvcs=false CGO_ENABLED=0

GOBIN="$tmp/bin" go install -trimpath -ldflags='-s -w' -tags no_btrfs,no_devmapper,no_zfs \
	"github.com/containerd/containerd/v2/cmd/containerd@$containerd_version" \
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$containerd_version" \
	"github.com/containerd/containerd/v2/cmd/ctr@$containerd_version"
echo "build-node: containerd built after $(($(date +%s) - start)) s" >&2

src="$(go mod download -json "gvisor.dev/gvisor@$gvisor_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d $src ]] || { echo "build-node: go mod download gvisor.dev/gvisor@$gvisor_version gave no directory" >&2; exit 1; }
cp -r "$src" "$tmp/gvisor"
chmod -R u+w "$tmp/gvisor"
manager="$tmp/gvisor/pkg/shim/v1/manager.go"
check='if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil {'
grep -qF "$check" "$manager" || { echo "build-node: $manager no longer has the oom_score_adj check this script edits" >&2; exit 1; }
sed -i "s/$(printf '%s' "$check" | sed 's/[][\.*^$/]/\\&/g')/if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil \&\& !os.IsPermission(err) {/" "$manager"
grep -q '!os.IsPermission(err) {' "$manager" || { echo "build-node: editing $manager failed" >&2; exit 1; }
(
	cd "$tmp/gvisor"
	go build -trimpath -ldflags='-s -w' -o "$tmp/bin/runsc" ./runsc
	go build -trimpath -ldflags='-s -w' -o "$tmp/bin/containerd-shim-runsc-v1" ./shim
)
rm -rf "$out"
mv "$tmp/bin" "$out"
echo "build-node: built in $(($(date +%s) - start)) s" >&2
echo "$out"
