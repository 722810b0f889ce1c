package gate

import (
	"fmt"
	"os"
	"strconv"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// A sandbox's network namespace, made by its gate before bubblewrap runs
// (which then shares it, --share-net): loopback only, with the host's
// limits already in it, so that none of the sandbox's processes ever runs
// in a namespace without them. The gate makes it with the capabilities it
// holds then (root's, or those of the user namespace the backend starts a
// user's gate in); bubblewrap's user namespace, where the sandbox's
// processes live, is nested below the one that owns it, so nothing inside
// can change a setting or a rule. All of it is system calls and one
// netlink batch: no tool runs (each process started costs milliseconds on
// a VM, at every sandbox start).

// Net is the network namespace a gate makes (Plan.Net).
type Net struct {
	// ListenQueue is net.core.somaxconn there: the most connections one
	// listener holds that its program has not accepted.
	ListenQueue int `json:"listen_queue"`
	// Connections caps the TCP connections per address family (IPv4,
	// IPv6), accepted or not; a SYN past it is answered with a reset, so
	// connect fails with ECONNREFUSED. 0: no cap.
	Connections int `json:"connections,omitempty"`
}

// Why the limits (the kernel charges a TCP connection waiting in a
// listener's accept queue to no cgroup until it is accepted, ~4 KB of
// kernel memory each, and a client may close its end at once, so the
// queue costs the sandbox one descriptor per listener while the host
// pays for every connection in it: one sandbox queued 600,000, 2.4 GB of
// unreclaimable kernel memory in 20 s. Capping each queue does not bound
// that, listeners are cheap; capping the connections does. The count is
// netfilter's connlimit over the namespace's own conntrack; only TCP is
// tracked (the entries are kernel memory too, and UDP has no queue to
// bound). What a closed connection leaves is kept short, because the
// count skips it and it is kernel memory all the same: conntrack forgets
// a closed connection after a second instead of two minutes, and the
// namespace keeps at most Connections sockets in TIME_WAIT (the kernel
// skips the wait for the rest).)

// makeNet moves this thread into a new network namespace and sets it up
// as n says. The caller must have locked the thread and must exec on it:
// the namespace is the thread's, and execve keeps it.
func makeNet(n Net) error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("make the sandbox's network namespace: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	// /proc/sys/net shows the namespace of the thread that opens it.
	sysctls := []struct {
		name  string
		value int
	}{{"core/somaxconn", n.ListenQueue}}
	if n.Connections > 0 {
		sysctls = append(sysctls, []struct {
			name  string
			value int
		}{
			{"ipv4/tcp_max_tw_buckets", n.Connections},
			{"netfilter/nf_conntrack_tcp_timeout_time_wait", 1},
			{"netfilter/nf_conntrack_tcp_timeout_close", 1},
		}...)
	}
	for _, s := range sysctls {
		if err := os.WriteFile("/proc/sys/net/"+s.name, []byte(strconv.Itoa(s.value)), 0); err != nil {
			return fmt.Errorf("set net.%s to %d in the sandbox's network namespace: %w", s.name, s.value, err)
		}
	}
	if n.Connections > 0 {
		if err := capConnections(n.Connections); err != nil {
			return fmt.Errorf("cap the sandbox's TCP connections at %d (nftables): %w", n.Connections, err)
		}
	}
	return nil
}

// loopbackUp brings up the namespace's loopback interface, its only one.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring up the sandbox's loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up the sandbox's loopback: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up the sandbox's loopback: %w", err)
	}
	return nil
}

// capConnections loads, in one batch, a table of the namespace's own:
// nothing but TCP is tracked (raw priority, before conntrack), and a SYN
// past conns connections of its address family is rejected with a reset.
func capConnections(conns int) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Name: "sandbox", Family: nftables.TableFamilyINet})
	notTCP := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Notrack{},
	}
	for _, hook := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"notrack-in", nftables.ChainHookPrerouting}, {"notrack-out", nftables.ChainHookOutput}} {
		ch := c.AddChain(&nftables.Chain{Name: hook.name, Table: t, Type: nftables.ChainTypeFilter, Hooknum: hook.hook, Priority: nftables.ChainPriorityRaw})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: notTCP})
	}
	in := c.AddChain(&nftables.Chain{Name: "connections", Table: t, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	for _, family := range []byte{unix.NFPROTO_IPV4, unix.NFPROTO_IPV6} {
		c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{family}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			// A SYN alone of FIN, SYN, RST and ACK (iptables' --syn): a
			// new connection's first packet.
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{tcpFIN | tcpSYN | tcpRST | tcpACK}, Xor: []byte{0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{tcpSYN}},
			// More than conns connections, this one counted.
			&expr.Connlimit{Count: uint32(conns), Flags: expr.NFT_CONNLIMIT_F_INV},
			&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
		}})
	}
	return c.Flush()
}

// TCP header flags (the 14th byte).
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)
