package gate

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestNet: the gate's command runs in a network namespace of its own, not
// this process's, with only loopback, up, and the plan's limits set in it
// (somaxconn, TIME_WAIT buckets, conntrack's short timeouts), as root or,
// for a user, in a user namespace of the gate's own. As root the command
// takes a uid, as a sandbox's bubblewrap does, and cannot change them. (A
// user's command stays root in the namespace that owns them, so it could:
// a sandbox's processes sit in bubblewrap's user namespace below it, which
// the local backend's tests try, TestRootlessLimits and TestNoCapabilities.
// The connection cap itself is tried against real connections by its
// TestConnectionsCapped.)
func TestNet(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	// /proc/net shows the reader's namespace (/sys/class/net the one
	// sysfs was mounted in: the host's); lo's flags are in hex.
	script := `readlink /proc/self/ns/net; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '
grep -c '^' /proc/net/if_inet6 2>/dev/null || echo 0
cat /proc/sys/net/core/somaxconn /proc/sys/net/ipv4/tcp_max_tw_buckets /proc/sys/net/netfilter/nf_conntrack_tcp_timeout_time_wait /proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close
{ echo 4096 > /proc/sys/net/core/somaxconn; } 2>/dev/null && echo raised || echo kept`
	p := Plan{Net: &Net{ListenQueue: 77, Connections: 99}, Command: []string{"/bin/sh", "-c", script}}
	var ns *UserNS
	if os.Geteuid() == 0 {
		p.UID, p.GID = 65534, 65534
	} else {
		ns = &UserNS{UID: os.Getuid(), GID: os.Getgid()}
	}
	out, err := Run(context.Background(), exe, p, ns, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"})
	if err != nil {
		t.Fatalf("gate: %v: %s", err, out)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 8 {
		t.Fatalf("command printed %q, want 8 words", out)
	}
	if lines[0] == own {
		t.Errorf("command ran in this process's network namespace %s", own)
	}
	// lo alone, and up: the kernel gives it ::1 (if_inet6's one line)
	// only then.
	if got := strings.Join(lines[1:3], " "); got != "lo 1" {
		t.Errorf("interfaces, IPv6 addresses: %q, want lo alone, with ::1 (up)", got)
	}
	if got, want := strings.Join(lines[3:7], " "), "77 99 1 1"; got != want {
		t.Errorf("somaxconn, tcp_max_tw_buckets, conntrack time_wait and close timeouts: %s, want %s", got, want)
	}
	if os.Geteuid() == 0 && lines[7] != "kept" {
		t.Errorf("the command raised somaxconn: %s", lines[7])
	}

	// Without a cap, the queue alone.
	p.Net = &Net{ListenQueue: 64}
	p.Command = []string{"/bin/sh", "-c", "cat /proc/sys/net/core/somaxconn"}
	out, err = Run(context.Background(), exe, p, ns, []string{"PATH=/usr/bin:/bin"})
	if err != nil || strings.TrimSpace(string(out)) != "64" {
		t.Errorf("without a cap: %q, %v; want 64", out, err)
	}
}
