#!/usr/bin/env bash
# run.sh runs the end-to-end tests on a real one-node Kubernetes cluster on
# this machine, without Docker or a registry (docs/e2e.md): etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, containerd 2 with
# runc and gVisor, a kubelet, the agent-sandbox controller, and the
# sandbox-router and the sandboxes as pods of images built here.
#
# Steps (each timed at the end):
#   1. take a machine-wide lock (one run at a time; lib.sh's e2e_lock, which
#      refuses while a cluster from make cluster holds it), install the
#      system packages (scripts/install-deps.sh), undo what a killed run left
#   2. build, once, into /var/cache/go-runtime-sandbox/e2e: the Kubernetes
#      and agent-sandbox binaries (build-tools.sh), containerd and gVisor
#      (build-node.sh), the images (build-images.sh: base stand-ins, made
#      beside the two tool builds; then pause, router, the Dockerfile
#      unchanged)
#   3. build this repo's binaries and the test binaries (beside the image
#      build)
#   4. run the tests inside fresh PID, network and mount namespaces
#      (netns.sh): nothing of the cluster can reach or change the host's
#      network, and every process and mount dies with the namespaces
#   5. restore the host: sysctls the kubelet sets, the cgroups it made,
#      directories this script created; also when the run failed or was
#      interrupted (a SIGKILLed run is cleaned up by the next one)
#
# Env:
#   E2E_RUN        -test.run pattern (default: every test)
#   E2E_CLAIMS     claims the claim -> ready benchmark makes (default 6, 30 in make e2e-full; 0 skips it)
#   E2E_BURST_RATE, E2E_BURST_ONCE
#                  TestClaimBurst's claims at 5/s and at once (default 5 and
#                  3; 30 and 20 with E2E_FULL=1; 0 skips a phase)
#   E2E_CONTROLLER_ARGS  extra agent-sandbox-controller flags, space-separated
#   E2E_TIMEOUT    test timeout (default 25m)
#   E2E_FULL=1     every flow under gVisor too (make e2e-full; default: the
#                  runtime-dependent ones, docs/e2e.md)
#   E2E_KEEP=1     keep the work directory (logs) even when everything passed
#   E2E_CACHE_DIR  where built tools and images are cached (see lib.sh)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
# shellcheck source=test/e2e/lib.sh
source test/e2e/lib.sh

if [[ $(id -u) != 0 ]]; then
	# shellcheck disable=SC2016 # the command to copy, $PATH and all
	echo 'e2e: needs root (containerd, the kubelet, namespaces, cgroups) from start to end; run it as root: sudo env "PATH=$PATH" make e2e' >&2
	exit 1
fi

# --- 1. one run at a time, packages, leftovers -------------------------------
e2e_lock e2e || exit 1

t_start=$(date +%s)
bash scripts/install-deps.sh etcd-server runc containernetworking-plugins buildah debootstrap iptables iproute2 util-linux >&2

cache="$(e2e_cache_root)"
e2e_restore_host

# --- 2. tools and images (cached), 3. this repo's binaries and the test binaries
work="$(mktemp -d "${TMPDIR:-/tmp}/e2e.XXXXXX")"
mkdir -p "$work/bin" "$work/logs"
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2317 # run by e2e_build
build_binaries() {
	CGO_ENABLED=0 go build -o "$work/bin/" ./cmd/sandbox-server ./cmd/sandbox-processapi ./cmd/demo ./cmd/mcp-server &&
		go test -c -tags e2e -o "$work/bin/e2e.test" ./test/e2e/ &&
		(cd test/e2e/tools && go test -c -tags integration -o "$work/bin/sdk-integration.test" sigs.k8s.io/agent-sandbox/clients/go/sandbox)
}
e2e_build "$work" build_binaries || exit 1
trap - EXIT

# --- 4. the run, in its own namespaces ---------------------------------------
ns_pid=""
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $ns_pid ]] && kill -0 "$ns_pid" 2>/dev/null; then
		# unshare --kill-child: its child, PID 1 of the run's PID
		# namespace, gets SIGKILL, and the kernel kills the rest.
		kill -KILL "$ns_pid" 2>/dev/null || true
		wait "$ns_pid" 2>/dev/null || true
	fi
	rm -rf "/dev/shm/e2e-etcd-$(basename "$work")"
	e2e_restore_host
	if [[ $rc -eq 0 && "${E2E_KEEP:-0}" != 1 ]]; then
		rm -rf "$work"
	else
		rm -rf "$work/node" # containerd's and the kubelet's state: large, not logs
		echo "e2e: logs kept in $work/logs (test output: $work/go-test.log)" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# What the run changes on the host, recorded before changing (lib.sh).
e2e_prepare_host

claims="${E2E_CLAIMS:-6}"
bench=(-test.bench=ClaimReady "-test.benchtime=${claims}x")
[[ $claims == 0 ]] && bench=()

export E2E_REPO="$repo" E2E_WORK_DIR="$work" E2E_CRD_DIR="$crds" E2E_NODE_IP=10.200.0.1
export E2E_TOOLS_DIR="$tools" E2E_NODE_DIR="$nodebin" E2E_IMAGES="$images"
export E2E_SANDBOX_SERVER="$work/bin/sandbox-server" E2E_DEMO="$work/bin/demo" E2E_MCP_SERVER="$work/bin/mcp-server"
export E2E_UPSTREAM_SDK_TEST="$work/bin/sdk-integration.test"
# The local backend's state (its seed build cache) for TestFirstGoRunLocal.
export E2E_LOCAL_STATE_DIR="$cache/local-state"

t0=$(date +%s)
set +e
unshare --pid --fork --kill-child --mount-proc --net --mount --propagation private -- \
	bash test/e2e/netns.sh "$work/bin/e2e.test" -test.v -test.count=1 \
	-test.timeout="${E2E_TIMEOUT:-25m}" -test.run="${E2E_RUN:-.}" "${bench[@]}" \
	> >(tee "$work/go-test.log") 2>&1 &
ns_pid=$!
wait "$ns_pid"
rc=$?
ns_pid=""
set -e
t_test=$(($(date +%s) - t0))

echo
echo "=== e2e timing ==="
echo "Kubernetes + agent-sandbox tools (build-tools.sh): ${t_tools}s"
echo "containerd + gVisor (build-node.sh):              ${t_node}s"
echo "images (build-images.sh; base images beside the tools): ${t_images}s"
echo "repo and test binaries (go build, go test -c; beside the images): ${t_build}s"
echo "tests (bring-up, tests, benchmark):               ${t_test}s"
echo "total:                                            $(($(date +%s) - t_start))s"
grep -E "^e2e: cluster up in" "$work/go-test.log" || true
grep -E "^summary: " "$work/go-test.log" | sed 's/^summary: //' || true
exit "$rc"
