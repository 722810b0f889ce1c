#!/usr/bin/env bash
# make demo: the host's one-time setup (scripts/host-setup.sh: bubblewrap,
# uidmap, the host settings and, for a user other than root, its cgroups;
# sudo asked once, only when something is missing), then the demo's flows
# in a local sandbox.
#
# As a user other than root, when sandbox-check says the only required
# protection missing here is the disk quota (a user's is a memory disk,
# which some kernels refuse: docs/local-backend.md, "Without root"), the
# demo runs with --relax=disk and says so; unless DEMO_FLAGS has a --relax
# of its own. As root nothing is relaxed: a missing protection fails the
# demo with its fix.
#
# Env: FLOW (all, smoke or multi), DEMO_FLAGS (more flags for cmd/demo),
#      GO (the go command).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$(dirname "$here")"
go=${GO:-go}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/demo.XXXXXXXX")
trap 'rm -rf "$tmp"' EXIT
SANDBOX_CHECK="$tmp/sandbox-check" bash "$here/host-setup.sh" bubblewrap uidmap

read -r -a flags <<<"${DEMO_FLAGS:-}"
if [ "$(id -u)" -ne 0 ] && [[ " ${DEMO_FLAGS:-}" != *" --relax"* ]]; then
	missing=$("$tmp/sandbox-check" --missing)
	if [ "$missing" = disk-quota ]; then
		echo "demo: the disk quota is unavailable to $(id -un) (sandbox-check: disk-quota): running with --relax=disk, so sandboxes write to the state directory's file system, capped per file only"
		flags+=(--relax=disk)
	fi
fi

echo "demo: compiling cmd/demo (its progress follows)"
GO="$go" bash "$here/go-build.sh" -o "$tmp/demo" ./cmd/demo
"$tmp/demo" --flow="${FLOW:-all}" "${flags[@]}"
