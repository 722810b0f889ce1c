#!/usr/bin/env bash
# netns.sh is the first process inside the namespaces test/e2e/run.sh makes
# for a run (PID, network, mount); it is not meant to be run by hand.
#
# It gives the node a network of its own (loopback, and a veth pair whose
# one end holds the kubelet's address E2E_NODE_IP: not every kernel has the
# dummy driver) and private, empty mounts over the fixed host paths
# containerd, the CNI plugins and the kubelet write to, so all of it
# disappears with the namespaces. Then it runs "$@" (the test binary) and
# stays PID 1 so orphaned processes (containerd's shims) are reaped; when it
# exits, the kernel kills everything left in the namespace.
set -euo pipefail

ip link set lo up
ip link add e2e0 type veth peer name e2e1
ip addr add "$E2E_NODE_IP/24" dev e2e0
ip link set e2e0 up
ip link set e2e1 up
ip route add default dev e2e0

# /run: containerd's shim sockets (/run/containerd/s), runc's and runsc's
# state. /var/lib/cni: the CNI result cache. /var/log/containers: the
# kubelet's log symlinks. run.sh created the last two if they were missing.
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/lock
mount -t tmpfs -o mode=0755 tmpfs /var/lib/cni
mount -t tmpfs -o mode=0755 tmpfs /var/log/containers

cd "$E2E_REPO/test/e2e"
set +e
"$@"
rc=$?
exit "$rc"
