# shellcheck shell=bash
# lib.sh: helpers the e2e scripts share (sourced, not run).

e2e_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# e2e_cache_root prints (and creates) the directory built tools and images
# are cached in: $E2E_CACHE_DIR, else /var/cache/go-runtime-sandbox/e2e when
# writable (it survives CI's fresh clones), else <repo>/.cache/e2e.
e2e_cache_root() {
	local root="${E2E_CACHE_DIR:-}"
	if [[ -z $root ]]; then
		root=/var/cache/go-runtime-sandbox/e2e
		if ! mkdir -p "$root" 2>/dev/null || [[ ! -w $root ]]; then
			root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.cache/e2e"
		fi
	fi
	mkdir -p "$root"
	echo "$root"
}

# --- one cluster on this machine at a time -----------------------------------
# make e2e (run.sh) and make cluster (cluster.sh) both start the one-node
# cluster (a kubelet, containerd, the cgroup e2e_cgroup_root, the node's
# fixed addresses), so they share one lock, held by every process of a run
# or of a cluster that is up (they inherit its descriptor, 9).
e2e_lock_file="${E2E_LOCK_FILE:-/var/lock/go-runtime-sandbox-e2e.lock}"
# While a cluster from make cluster is up or coming up, this file holds
# "PID DIR": the process that keeps it (or the cluster.sh bringing it up)
# and its directory. cluster.sh writes it once it holds the lock and
# removes it when the cluster is down.
e2e_cluster_marker="${E2E_CLUSTER_MARKER:-/var/lock/go-runtime-sandbox-e2e.cluster}"

# e2e_cluster_info prints "PID DIR" of the make cluster cluster when one
# is up or coming up (its PID alive); else it fails.
e2e_cluster_info() {
	local pid="" dir=""
	[[ -f $e2e_cluster_marker ]] || return 1
	read -r pid dir <"$e2e_cluster_marker" || true
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	echo "$pid $dir"
}

# e2e_lock WHO takes the lock on descriptor 9. Behind another e2e run it
# waits, saying so once; behind a cluster from make cluster (also one that
# comes up while it waits) it refuses: that one stays up until make
# cluster-down, so waiting would be forever. WHO prefixes the messages.
e2e_lock() {
	local who=$1 waited=0 info pid dir
	exec 9>>"$e2e_lock_file"
	while ! flock -n 9; do
		if info=$(e2e_cluster_info); then
			read -r pid dir <<<"$info"
			# shellcheck disable=SC2016 # the command to copy, $PATH and all
			echo "$who: a cluster from \`make cluster\` is up and holds $e2e_lock_file (pid $pid, kubeconfig $dir/kubeconfig): end it with \`make cluster-down\` (as root; from another user: sudo env \"PATH=\$PATH\" make cluster-down), then run this again" >&2
			return 1
		fi
		if ((!waited)); then
			echo "$who: an e2e run holds $e2e_lock_file; waiting for it to end" >&2
			waited=1
		fi
		flock -w "${E2E_LOCK_POLL:-10}" 9 && return 0
	done
}

# --- what a cluster changes on the host, and the undo ------------------------
# Outside its namespaces a cluster changes the kernel sysctls the kubelet
# sets, the cgroup e2e_cgroup_root in every hierarchy (the kubelet's
# cgroupRoot, cluster.CgroupRoot without the slash) and, if missing, the
# mount-point directories netns.sh mounts over. e2e_prepare_host records
# them in the cache's host-state/ before changing anything, so
# e2e_restore_host undoes them after a run, after make cluster-down, and
# after a run or cluster that was SIGKILLed (its successor calls it first).
e2e_cgroup_root=go-runtime-sandbox-e2e
e2e_sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
e2e_mount_dirs=(/var/lib/cni /var/log/containers)

e2e_host_state() {
	local s
	s="$(e2e_cache_root)/host-state"
	mkdir -p "$s"
	echo "$s"
}

e2e_cgroup_mounts() { awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/mounts; }

e2e_prepare_host() {
	local state k d h
	state="$(e2e_host_state)"
	for k in "${e2e_sysctls[@]}"; do
		echo "$k=$(sysctl -n "$k")" >>"$state/sysctl"
	done
	for d in "${e2e_mount_dirs[@]}"; do
		if [[ ! -d $d ]]; then
			mkdir -p "$d"
			echo "$d" >>"$state/dirs"
		fi
	done
	while read -r h; do
		mkdir -p "$h/$e2e_cgroup_root"
		if [[ -f $h/cpuset.cpus ]]; then
			cat "$h/cpuset.cpus" >"$h/$e2e_cgroup_root/cpuset.cpus"
			cat "$h/cpuset.mems" >"$h/$e2e_cgroup_root/cpuset.mems"
		fi
	done < <(e2e_cgroup_mounts)
}

# e2e_restore_host undoes what e2e_prepare_host recorded and removes the
# cgroups the kubelet made. Safe to run twice, and with nothing to undo.
e2e_restore_host() {
	local state h _ kv d
	state="$(e2e_host_state)"
	while read -r h; do
		[[ -d $h/$e2e_cgroup_root ]] || continue
		# Cgroups empty out a moment after their last process died.
		for _ in $(seq 50); do
			find "$h/$e2e_cgroup_root" -depth -type d -exec rmdir {} + 2>/dev/null || true
			[[ -d $h/$e2e_cgroup_root ]] || break
			sleep 0.2
		done
		[[ -d $h/$e2e_cgroup_root ]] && echo "e2e: could not remove cgroup $h/$e2e_cgroup_root (processes left?)" >&2
	done < <(e2e_cgroup_mounts)
	if [[ -f $state/sysctl ]]; then
		while read -r kv; do sysctl -q -w "$kv" >/dev/null || echo "e2e: could not restore sysctl $kv" >&2; done <"$state/sysctl"
		rm -f "$state/sysctl"
	fi
	if [[ -f $state/dirs ]]; then
		while read -r d; do rmdir "$d" 2>/dev/null || true; done <"$state/dirs"
		rm -f "$state/dirs"
	fi
}

# e2e_cluster_leftovers DIR prints the processes and mounts of the
# cluster whose work directory is DIR that are still on the host, and
# fails when there are any: a process whose command line names DIR or its
# etcd data (every component's does: its config, state, socket or
# certificates are there), a mount under DIR. Not the cached binaries: an
# e2e run beside it runs the same ones.
e2e_cluster_leftovers() {
	local dir=$1 f cmd left=0
	# One grep over every command line (a process per process is slow on
	# a busy machine); it matches itself, which is skipped.
	while read -r f; do
		cmd="$({ tr '\0' ' ' <"$f"; } 2>/dev/null)" || continue
		[[ -z $cmd || $cmd == grep\ * ]] && continue
		f=${f#/proc/}
		echo "process ${f%/cmdline}: $cmd"
		left=1
	done < <(grep -alF -e "$dir/" -e "e2e-etcd-$(basename "$dir")" /proc/[0-9]*/cmdline 2>/dev/null)
	if grep -qF " $dir/" /proc/mounts; then
		grep -F " $dir/" /proc/mounts | sed 's/^/mount /'
		left=1
	fi
	return "$left"
}

# e2e_host_leftovers prints what e2e_restore_host should have undone and
# is still there (the cgroup e2e_cgroup_root, an undo record), and fails
# when there is any. Meaningful only while holding the lock.
e2e_host_leftovers() {
	local h f state left=0
	state="$(e2e_host_state)"
	while read -r h; do
		[[ -d $h/$e2e_cgroup_root ]] && { echo "cgroup $h/$e2e_cgroup_root"; left=1; }
	done < <(e2e_cgroup_mounts)
	for f in sysctl dirs; do
		[[ -f $state/$f ]] && { echo "undo not done: $state/$f"; left=1; }
	done
	return "$left"
}

# --- building what a cluster runs (cached) -----------------------------------
# e2e_build WORK BUILD_FN builds, or finds cached, the Kubernetes and
# agent-sandbox binaries (build-tools.sh), containerd and gVisor
# (build-node.sh) and the images (build-images.sh: the base stand-ins beside
# the two tool builds, which do not need them; then pause, router and the
# Dockerfile's), and runs BUILD_FN (the caller's Go builds, output in
# WORK/logs/build.log) beside the image build: buildah spends most of its
# time writing layers, the Go builds in the linker. Sets tools, nodebin,
# images, crds and the seconds t_tools, t_node, t_images, t_build. On
# failure it says what failed and returns 1, its background builds ended.
# shellcheck disable=SC2034 # the variables it sets are the caller's
e2e_build() {
	local work=$1 build_fn=$2 t0 base_pid build_pid
	mkdir -p "$work/logs"
	echo "e2e: building (or finding cached) the Kubernetes and agent-sandbox binaries, containerd and gVisor, and the images (cold: about an hour on 2 cores; warm: seconds)" >&2
	t0=$(date +%s)
	bash "$e2e_dir/build-images.sh" --base &
	base_pid=$!
	if ! tools="$(bash "$e2e_dir/build-tools.sh")"; then
		kill "$base_pid" 2>/dev/null || true
		echo "e2e: building the Kubernetes and agent-sandbox binaries failed (above)" >&2
		return 1
	fi
	t_tools=$(($(date +%s) - t0))
	t0=$(date +%s)
	if ! nodebin="$(bash "$e2e_dir/build-node.sh")"; then
		kill "$base_pid" 2>/dev/null || true
		echo "e2e: building containerd and gVisor failed (above)" >&2
		return 1
	fi
	t_node=$(($(date +%s) - t0))
	t0=$(date +%s)
	wait "$base_pid" || { echo "e2e: building the base images failed (above)" >&2; return 1; }
	crds="$(cd "$e2e_dir/tools" && go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)/k8s/crds"
	[[ -d $crds ]] || { echo "e2e: agent-sandbox's CRDs not found (go list -m sigs.k8s.io/agent-sandbox in test/e2e/tools)" >&2; return 1; }

	(
		s0=$(date +%s)
		"$build_fn" && echo "$(($(date +%s) - s0))" >"$work/build-seconds"
	) >"$work/logs/build.log" 2>&1 &
	build_pid=$!
	echo "e2e: building the images (the runtime image again when a file of its build context changed: about a minute) and this repository's binaries beside them" >&2
	if ! images="$(bash "$e2e_dir/build-images.sh" "$tools/sandbox-router")"; then
		kill "$build_pid" 2>/dev/null || true
		wait "$build_pid" 2>/dev/null || true
		echo "e2e: building the images failed (above)" >&2
		return 1
	fi
	t_images=$(($(date +%s) - t0))
	wait "$build_pid" || { cat "$work/logs/build.log" >&2; echo "e2e: building the binaries failed (above)" >&2; return 1; }
	t_build=$(cat "$work/build-seconds")
}
