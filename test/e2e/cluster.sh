#!/usr/bin/env bash
# cluster.sh brings up the e2e's one-node Kubernetes cluster and leaves it
# running, for trying the agent-sandbox backend by hand on a machine with
# no Docker or kind (make cluster, make cluster-down; docs/e2e.md):
#
#   up      build (cached) and start what make e2e starts -- etcd,
#           kube-apiserver, kube-controller-manager, kube-scheduler,
#           containerd with runc and gVisor, a kubelet, the agent-sandbox
#           controller v1.0.3, our runtime image -- apply manifests/router
#           and manifests/base to namespace default, wait for the router
#           and a full warm pool, and print the kubeconfig to use and the
#           next commands. Already up: says so, and how to reach it.
#   down    stop it and undo what it changed on the host (processes,
#           mounts, network, cgroups, sysctls), then show that nothing is
#           left.
#   status  whether one is up, and how to reach it.
#
# The cluster runs as make e2e's does, in fresh PID, network and mount
# namespaces (netns.sh) that die with it; the API server is forwarded to
# the host's loopback (cmd/e2e-cluster). While it is up it holds the e2e
# lock, so make e2e refuses (naming make cluster-down) instead of waiting.
#
# Env: E2E_CACHE_DIR (lib.sh). Needs root, from start to end.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
# shellcheck source=test/e2e/lib.sh
source test/e2e/lib.sh

usage() { echo "usage: test/e2e/cluster.sh up|down|status (make cluster, make cluster-down)" >&2; }
action=${1:-}
case $action in
up | down | status) ;;
-h | --help | help)
	usage
	exit 0
	;;
*)
	usage
	exit 2
	;;
esac

if [[ $(id -u) != 0 ]]; then
	# shellcheck disable=SC2016 # the command to copy, $PATH and all
	echo "cluster: needs root (containerd, the kubelet, namespaces, cgroups), like make e2e; run it as root: sudo env \"PATH=\$PATH\" make cluster$([[ $action == down ]] && echo -down)" >&2
	exit 1
fi

cache="$(e2e_cache_root)"
dir="$cache/cluster" # one cluster at a time (the lock): a fixed place
kubeconfig="$dir/kubeconfig"

say() { echo "cluster: $*"; }

# how_to_use prints the kubeconfig and the commands to try.
how_to_use() {
	cat <<EOF

The cluster is up: one node (kubelet, containerd with runc and gVisor), agent-sandbox
v1.0.3, the router and the warm pool go-runtime-pool in namespace default.

  export KUBECONFIG=$kubeconfig

  go run ./cmd/demo --backend=agent-sandbox --flow=all
  go run ./cmd/mcp-server --backend=agent-sandbox                 # MCP over stdio
  go run ./cmd/mcp-server --backend=agent-sandbox --http=127.0.0.1:8931
  $(e2e_kubectl_hint)

Logs: $dir/run/logs (components), $dir/cluster.log (bring-up), $dir/logs (build).
It keeps running (and holds the e2e lock: make e2e refuses meanwhile) until

  make cluster-down
EOF
}

e2e_kubectl_hint() {
	local k
	k="$(cat "$dir/kubectl" 2>/dev/null || true)"
	[[ -n $k ]] && echo "$k get pods,sandboxwarmpools,sandboxclaims    # the pinned kubectl"
}

case $action in
status)
	if info=$(e2e_cluster_info); then
		read -r pid _ <<<"$info"
		if [[ -f $dir/ready ]]; then
			say "up (pid $pid)"
			how_to_use
		else
			say "coming up (pid $pid; progress in $dir/cluster.log)"
		fi
	else
		say "not up"
	fi
	exit 0
	;;

down)
	exec 9>>"$e2e_lock_file"
	if info=$(e2e_cluster_info); then
		read -r pid _ <<<"$info"
		if [[ $(cat "/proc/$pid/comm" 2>/dev/null) != unshare ]]; then
			say "still coming up (cluster.sh, pid $pid): stop that one with Ctrl-C (it cleans up after itself), or let it finish, then make cluster-down" >&2
			exit 1
		fi
		say "stopping the cluster (pid $pid): every process of it is in its PID namespace and dies with it"
		# unshare --kill-child: PID 1 of the namespace gets SIGKILL, and
		# the kernel kills the rest; its mounts and network go with it.
		kill -KILL "$pid" 2>/dev/null || true
		for _ in $(seq 300); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	elif [[ ! -e $dir && ! -e $e2e_cluster_marker ]]; then
		say "no cluster from make cluster is up; nothing to do"
		exit 0
	else
		say "no cluster from make cluster is up; removing what one left"
	fi
	# Its processes go a moment after the namespace's first one.
	for _ in $(seq 60); do
		e2e_cluster_leftovers "$dir/run" >/dev/null && break
		sleep 0.5
	done
	rm -f "$e2e_cluster_marker"
	rm -rf "/dev/shm/e2e-etcd-$(basename "$dir/run")"
	if left=$(e2e_cluster_leftovers "$dir/run"); then
		rm -rf "$dir"
		say "no process or mount of it is left; $dir removed"
	else
		say "these are left:" >&2
		echo "$left" >&2
		exit 1
	fi
	# The host's undo needs the lock. An e2e run waiting behind the
	# cluster may have taken it the moment the cluster's processes were
	# gone: every run starts with the same undo (e2e_restore_host), so
	# it is done then, and must not be done here under a run that has
	# changed the host again since.
	if flock -w 10 9; then
		e2e_restore_host
		if left=$(e2e_host_leftovers); then
			say "down: sysctls restored, cgroup /$e2e_cgroup_root removed; nothing of it is left"
		else
			say "down, but these are left:" >&2
			echo "$left" >&2
			exit 1
		fi
	else
		say "down; an e2e run holds $e2e_lock_file (it took it when the cluster let go of it): its first step undoes what the cluster changed on the host (sysctls, cgroup /$e2e_cgroup_root)"
	fi
	exit 0
	;;
esac

# --- up ----------------------------------------------------------------------
if info=$(e2e_cluster_info); then
	read -r pid _ <<<"$info"
	if [[ -f $dir/ready ]]; then
		say "already up (pid $pid); nothing to do"
		how_to_use
		exit 0
	fi
	say "already coming up (pid $pid, another make cluster; progress in $dir/cluster.log): wait for it, then make cluster again shows how to reach it" >&2
	exit 1
fi

e2e_lock cluster || exit 1
t_start=$(date +%s)
echo "$$ $dir" >"$e2e_cluster_marker"
ns_pid=""
tail_pid=""
# shellcheck disable=SC2317 # invoked by the trap
failed() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -n $tail_pid ]] && kill "$tail_pid" 2>/dev/null
	if [[ -n $ns_pid ]] && kill -0 "$ns_pid" 2>/dev/null; then
		kill -KILL "$ns_pid" 2>/dev/null || true
		wait "$ns_pid" 2>/dev/null || true
	fi
	rm -rf "/dev/shm/e2e-etcd-$(basename "$dir/run")" "$dir/run/node"
	e2e_restore_host
	rm -f "$e2e_cluster_marker"
	say "did not come up; logs kept in $dir (cluster.log, logs/, run/logs/)" >&2
	exit $((rc == 0 ? 1 : rc))
}
trap failed EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "installing the system packages it needs (scripts/install-deps.sh; nothing when present)"
bash scripts/install-deps.sh etcd-server runc containernetworking-plugins buildah debootstrap iptables iproute2 util-linux >&2
# What a cluster or an e2e run that was SIGKILLed left.
e2e_restore_host
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/logs" "$dir/run"
# shellcheck disable=SC2317 # run by e2e_build
build_cluster_binary() { go build -o "$dir/bin/" ./test/e2e/cmd/e2e-cluster; }
e2e_build "$dir" build_cluster_binary || exit 1
say "built in $(($(date +%s) - t_start)) s (tools ${t_tools} s, containerd and gVisor ${t_node} s, images ${t_images} s, e2e-cluster ${t_build} s)"
echo "$tools/kubectl --kubeconfig=$kubeconfig -n default" >"$dir/kubectl"

e2e_prepare_host
export E2E_REPO="$repo" E2E_WORK_DIR="$dir/run" E2E_CRD_DIR="$crds" E2E_NODE_IP=10.200.0.1
export E2E_TOOLS_DIR="$tools" E2E_NODE_DIR="$nodebin" E2E_IMAGES="$images"
# In its own session (no terminal's hangup or Ctrl-C reaches it), holding
# the lock (descriptor 9), with the host's network namespace open as
# descriptor 8 for the API server's forward; e2e-cluster closes that.
setsid unshare --pid --fork --kill-child --mount-proc --net --mount --propagation private -- \
	bash test/e2e/netns.sh "$dir/bin/e2e-cluster" --host-netns-fd=8 \
	--kubeconfig-out="$kubeconfig" --ready-file="$dir/ready" \
	8</proc/self/ns/net </dev/null >"$dir/cluster.log" 2>&1 &
ns_pid=$!
echo "$ns_pid $dir" >"$e2e_cluster_marker"

tail -n +1 -f "$dir/cluster.log" &
tail_pid=$!
while [[ ! -f $dir/ready ]]; do
	if ! kill -0 "$ns_pid" 2>/dev/null; then
		sleep 0.5 # the last lines
		exit 1
	fi
	sleep 0.5
done
sleep 0.5 # the last lines
kill "$tail_pid" 2>/dev/null || true
tail_pid=""
trap - EXIT INT TERM
# Run through sudo: the kubeconfig (the cluster's admin token; mode 0600)
# is for the user who asked for the cluster.
if [[ -n ${SUDO_UID:-} && -n ${SUDO_GID:-} ]]; then
	chown "$SUDO_UID:$SUDO_GID" "$kubeconfig"
fi
say "up in $(($(date +%s) - t_start)) s"
how_to_use
