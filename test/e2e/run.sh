#!/usr/bin/env bash
# run.sh runs the end-to-end tests against a real Kubernetes control plane
# on this machine, without containers: etcd, kube-apiserver, the
# agent-sandbox controller and sandbox-router, and a process node standing
# in for the kubelet (docs/e2e.md).
#
# Steps: install etcd if missing (scripts/install-deps.sh), build the
# control-plane tools once into a cache (test/e2e/build-tools.sh), build this
# repo's binaries, run `go test -tags e2e ./test/e2e/` (tests, then the
# claim-latency benchmark), and print how long each step took.
#
# Env:
#   E2E_RUN      -run pattern (default: every test)
#   E2E_CLAIMS   claims the latency benchmark makes (default 12)
#   E2E_TIMEOUT  go test -timeout (default 20m)
#   E2E_KEEP=1   keep the work directory (logs) even when everything passed
#   E2E_CACHE_DIR  where built tools and the seed cache live (default
#                  /var/cache/go-runtime-sandbox/e2e-bin when writable, so CI's
#                  fresh clones reuse them; else .cache/e2e-bin in the repo)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

t_start=$(date +%s)
if ! command -v etcd >/dev/null 2>&1; then
	echo "e2e: etcd is missing; installing it with scripts/install-deps.sh" >&2
	bash scripts/install-deps.sh
fi

t0=$(date +%s)
tools="$(bash test/e2e/build-tools.sh)"
# The Go build cache seed lives beside the tools, in build-tools.sh's cache.
export E2E_CACHE_DIR="${E2E_CACHE_DIR:-$(dirname "$tools")}"
t_tools=$(($(date +%s) - t0))

work="$(mktemp -d "${TMPDIR:-/tmp}/e2e.XXXXXX")"
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
	local rc=$?
	# Processes a crashed test binary left behind: it records every PID; kill
	# the groups of those still running one of this run's binaries.
	if [[ $rc -ne 0 && -f "$work/pids" ]]; then
		local pid exe
		while read -r pid; do
			exe="$(readlink "/proc/$pid/exe" 2>/dev/null || true)"
			case "$exe" in
			"$tools"/* | "$work"/bin/* | "$(command -v etcd)") kill -KILL -- "-$pid" 2>/dev/null || true ;;
			esac
		done <"$work/pids"
	fi
	# etcd's data (cluster.Start keeps it in /dev/shm, named after $work).
	rm -rf "/dev/shm/e2e-etcd-$(basename "$work")"
	if [[ $rc -eq 0 && "${E2E_KEEP:-0}" != 1 ]]; then
		rm -rf "$work"
	else
		echo "e2e: logs kept in $work/logs" >&2
	fi
}
trap cleanup EXIT

t0=$(date +%s)
mkdir -p "$work/bin"
go build -o "$work/bin/" ./cmd/sandbox-server ./cmd/demo ./cmd/mcp-server
t_build=$(($(date +%s) - t0))

export E2E_TOOLS_DIR="$tools"
export E2E_SANDBOX_SERVER="$work/bin/sandbox-server"
export E2E_DEMO="$work/bin/demo"
export E2E_MCP_SERVER="$work/bin/mcp-server"
export E2E_WORK_DIR="$work"

t0=$(date +%s)
set +e
go test -tags e2e -count=1 -v -timeout "${E2E_TIMEOUT:-20m}" \
	-run "${E2E_RUN:-.}" -bench "ClaimReady" -benchtime "${E2E_CLAIMS:-12}x" \
	./test/e2e/ 2>&1 | tee "$work/go-test.log"
rc=${PIPESTATUS[0]}
set -e
t_test=$(($(date +%s) - t0))

echo
echo "=== e2e timing ==="
echo "control-plane tools (build-tools.sh): ${t_tools}s"
echo "repo binaries (go build):             ${t_build}s"
echo "go test (bring-up, tests, benchmark): ${t_test}s"
echo "total:                                $(($(date +%s) - t_start))s"
grep -E "control plane up in|claim -> ready from a warm pool|demo wall time|after Close:" "$work/go-test.log" | sed 's/^ *//' || true
exit "$rc"
