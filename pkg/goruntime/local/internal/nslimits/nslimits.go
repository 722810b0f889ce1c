// Package nslimits sets the limits the host puts in a local sandbox's own
// namespaces (its devpts instance; its network namespace: the listen queue
// and the TCP connections) right after it starts, before any command runs. The sandbox cannot change them: it has
// no capabilities, and the seccomp filter refuses mount. Each Cap function
// takes the pid of a process inside the sandbox.
package nslimits

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// maxPtys is how many pseudo-terminals one sandbox may have open at once.
// bubblewrap gives each sandbox a devpts instance of its own, but every
// instance draws on one host-wide pool (kernel.pty.max less
// kernel.pty.reserve: 3072 by default), so without a cap one sandbox took
// them all and the next one's open("/dev/ptmx") failed. Past the cap,
// opening /dev/ptmx fails with ENOSPC in that sandbox alone.
const maxPtys = 32

// CapPtys remounts the devpts instance of the sandbox whose process pid
// is inside it with max=maxPtys.
//
// It runs mount(8) under nsenter(1), in the sandbox's mount namespace
// only (not its pid namespace, so no host process ever shows inside).
// Joining the namespace from this process instead would need a thread of
// its own, and Go cannot always give one back: a goroutine that ends
// locked on the main thread leaves that thread, and with it /proc/self,
// in the sandbox's mounts for the life of the process.
func CapPtys(ctx context.Context, pid int) error {
	// The options bubblewrap mounts /dev/pts with (a remount resets
	// whatever it does not name), plus the cap.
	opts := "remount,newinstance,ptmxmode=0666,mode=620,max=" + strconv.Itoa(maxPtys)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := run(ctx, pid, "mnt", nil, "mount", "-n", "-t", "devpts", "-o", opts, "devpts", "/dev/pts")
	if err != nil {
		return fmt.Errorf("cap the sandbox's pseudo-terminals at %d (nsenter, mount -o %s /dev/pts): %w: %s", maxPtys, opts, err, out)
	}
	return nil
}

// ListenQueue is net.core.somaxconn in a sandbox's network namespace: the
// most connections one listener holds that its program has not accepted.
// 128 (the kernel's default before Linux 5.4, 4096 since) is still more
// than a test's server needs between two accepts.
const ListenQueue = 128

// The kernel charges a TCP connection waiting in a listener's accept queue
// to no cgroup until it is accepted (~4 KB of kernel memory each), and a
// client may close its end at once, so the queue costs the sandbox one
// descriptor per listener while the host pays for every connection in
// it: one sandbox queued 600,000 (2.4 GB of unreclaimable kernel memory
// in 20 s). Capping each queue does not bound that (listeners are cheap);
// capping the connections does. CapNetwork has the sandbox's own netfilter
// count its TCP connections (conntrack, which the kernel keeps per
// network namespace) and refuse a new one past the cap with a reset, so
// connect fails with ECONNREFUSED. Only TCP is tracked: the entries are
// kernel memory too, and UDP has no queue to bound.
//
// What a closed connection leaves is kept short, because the count skips
// it and it is kernel memory all the same: conntrack forgets a closed
// connection after a second instead of two minutes, and the namespace
// keeps at most cap sockets in TIME_WAIT (the kernel skips the wait for
// the rest).

// netRules are iptables-restore's input for both address families.
func netRules(conns int) string {
	return fmt.Sprintf(`*raw
-A PREROUTING ! -p tcp -j CT --notrack
-A OUTPUT ! -p tcp -j CT --notrack
COMMIT
*filter
-A INPUT -p tcp --syn -m connlimit --connlimit-above %d --connlimit-mask 0 -j REJECT --reject-with tcp-reset
COMMIT
`, conns)
}

// netScript runs in the sandbox's network namespace (sh -c): the sysctls
// (/proc/sys/net shows those of the namespace its reader is in), then the
// rules from stdin for IPv4 and IPv6. $1 is the listen queue, $2 the
// connections (0: no cap).
const netScript = `set -e
echo "$1" > /proc/sys/net/core/somaxconn
[ "$2" -gt 0 ] || exit 0
echo "$2" > /proc/sys/net/ipv4/tcp_max_tw_buckets
echo 1 > /proc/sys/net/netfilter/nf_conntrack_tcp_timeout_time_wait
echo 1 > /proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close
rules=$(cat)
printf '%s\n' "$rules" | iptables-restore
printf '%s\n' "$rules" | ip6tables-restore
`

// CapNetwork sets the listen queue to ListenQueue and caps the TCP
// connections at conns per address family (0: no cap) in the network
// namespace of the sandbox whose process pid is inside it. The cap needs
// iptables (NetworkProblem).
func CapNetwork(ctx context.Context, pid, conns int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := run(ctx, pid, "net", strings.NewReader(netRules(conns)), netArgs(conns)...)
	if err != nil {
		return netError(conns, "nsenter", err, out)
	}
	return nil
}

// NetworkProblem says why this host cannot cap conns connections (detail)
// and what would let it (fix), or returns two empty strings. It tries: the
// same limits in a network namespace made for the purpose and dropped
// after (whether the kernel has conntrack and connlimit at all).
func NetworkProblem(ctx context.Context, conns int) (detail, fix string) {
	for _, tool := range []struct{ name, pkg string }{{"nsenter", "util-linux"}, {"unshare", "util-linux"}, {"iptables-restore", "iptables"}, {"ip6tables-restore", "iptables"}} {
		if !inToolPath(tool.name) {
			return tool.name + " not found", "apt-get install " + tool.pkg + " (scripts/install-deps.sh)"
		}
	}
	// A user other than root makes the namespace in a user namespace of
	// its own, as bubblewrap makes a sandbox's.
	unshare := []string{"unshare", "--net", "--"}
	if os.Geteuid() != 0 {
		unshare = []string{"unshare", "--user", "--map-root-user", "--net", "--"}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare[0], append(unshare[1:], netArgs(conns)...)...)
	cmd.Env = []string{"PATH=" + toolPath}
	cmd.Stdin = strings.NewReader(netRules(conns))
	if out, err := cmd.CombinedOutput(); err != nil {
		return netError(conns, "unshare", err, strings.TrimSpace(string(out))).Error(),
			"a kernel with netfilter's conntrack and connlimit (CONFIG_NETFILTER_XT_MATCH_CONNLIMIT, modprobe xt_connlimit)"
	}
	return "", ""
}

// toolPath is the PATH of the commands run here, and where NetworkProblem
// looks for them.
const toolPath = "/usr/sbin:/sbin:/usr/bin:/bin"

func inToolPath(name string) bool {
	for _, dir := range strings.Split(toolPath, ":") {
		if fi, err := os.Stat(dir + "/" + name); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// netArgs runs netScript, with the rules on stdin.
func netArgs(conns int) []string {
	return []string{"sh", "-c", netScript, "sh", strconv.Itoa(ListenQueue), strconv.Itoa(conns)}
}

func netError(conns int, via string, err error, out string) error {
	return fmt.Errorf("cap the sandbox's TCP connections at %d and its listen queue at %d (%s, iptables-restore): %w: %s",
		conns, ListenQueue, via, err, out)
}
