// Package nslimits sets the limits the host puts in a local sandbox's own
// namespaces (its devpts instance; its network namespace: the listen queue
// and the TCP connections) right after it starts, before any command runs (Set). The sandbox
// cannot change them: it has no capabilities, and the seccomp filter
// refuses mount.
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

// ptyOptions are the options bubblewrap mounts /dev/pts with (a remount
// resets whatever it does not name), plus the cap.
var ptyOptions = "remount,newinstance,ptmxmode=0666,mode=620,max=" + strconv.Itoa(maxPtys)

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

// netScript runs in a network namespace (sh -c): it sets the sysctls
// (/proc/sys/net shows those of the namespace its reader is in) and loads
// the rules for IPv4 and IPv6. $1 is the listen queue, $2 the connections
// (0: no cap), $3 a file of the rules (netRules). Each process started
// costs milliseconds on a VM, so it starts only the two tools.
const netScript = `set -e
echo "$1" > /proc/sys/net/core/somaxconn
[ "$2" -gt 0 ] || exit 0
echo "$2" > /proc/sys/net/ipv4/tcp_max_tw_buckets
echo 1 > /proc/sys/net/netfilter/nf_conntrack_tcp_timeout_time_wait
echo 1 > /proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close
iptables-restore "$3"
ip6tables-restore "$3"
`

// runNet runs script in the namespace kind of the sandbox whose process
// pid is inside it (pid 0: in a network namespace of its own, made by
// unshare), with args and then the path of a file of netRules(conns).
func runNet(ctx context.Context, pid int, kind, script string, conns int, args ...string) (string, error) {
	f, err := os.CreateTemp("", "sandbox-netrules-")
	if err != nil {
		return "", fmt.Errorf("write the connection rules: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(netRules(conns))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write the connection rules: %w", err)
	}
	args = append(append([]string{"sh", "-c", script, "sh"}, args...), strconv.Itoa(ListenQueue), strconv.Itoa(conns), f.Name())
	if pid == 0 {
		// A user other than root makes the namespace in a user namespace
		// of its own, as bubblewrap makes a sandbox's.
		unshare := []string{"unshare", "--net", "--"}
		if os.Geteuid() != 0 {
			unshare = []string{"unshare", "--user", "--map-root-user", "--net", "--"}
		}
		cmd := exec.CommandContext(ctx, unshare[0], append(unshare[1:], args...)...)
		cmd.Env = []string{"PATH=" + toolPath}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	return run(ctx, pid, kind, args...)
}

// ptyScript runs before netScript in a sandbox's network namespace: it
// caps the pseudo-terminals in the mount namespace $1 (mount -N joins
// it) with the options $2, and leaves netScript its own arguments.
const ptyScript = `mount -N "$1" -n -t devpts -o "$2" devpts /dev/pts || exit
shift 2
`

// Set puts the host's limits in the namespaces of the sandbox whose
// process pid is inside it, before any command runs: its devpts instance
// capped at maxPtys, and, unless network (the sandbox then shares the
// host's network namespace), its listen queue at ListenQueue and its TCP
// connections at conns per address family (0: no cap; the cap needs
// iptables, NetworkProblem).
//
// One nsenter runs it, in the sandbox's network namespace when it has
// one (mount(8) then joins its mount namespace itself, mount -N), else in
// its mount namespace. None of it joins the sandbox's pid namespace, so
// no host process ever shows inside. (Joining a namespace from this
// process instead would need a thread of its own, and Go cannot always
// give one back: a goroutine that ends locked on the main thread leaves
// that thread, and with it /proc/self, in the sandbox's mounts for the
// life of the process.)
func Set(ctx context.Context, pid int, network bool, conns int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if network {
		out, err := run(ctx, pid, "mnt", "mount", "-n", "-t", "devpts", "-o", ptyOptions, "devpts", "/dev/pts")
		if err != nil {
			return fmt.Errorf("cap the sandbox's pseudo-terminals at %d (nsenter, mount -o %s /dev/pts): %w: %s", maxPtys, ptyOptions, err, out)
		}
		return nil
	}
	out, err := runNet(ctx, pid, "net", ptyScript+netScript, conns, "/proc/"+strconv.Itoa(pid)+"/ns/mnt", ptyOptions)
	if err != nil {
		return fmt.Errorf("cap the sandbox's pseudo-terminals at %d, its TCP connections at %d and its listen queue at %d (nsenter, mount -N, iptables-restore): %w: %s",
			maxPtys, conns, ListenQueue, err, out)
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
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out, err := runNet(ctx, 0, "", netScript, conns); err != nil {
		return fmt.Sprintf("cap TCP connections at %d and the listen queue at %d in a network namespace of its own (unshare, iptables-restore): %v: %s",
				conns, ListenQueue, err, out),
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
