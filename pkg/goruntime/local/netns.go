package local

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/clip"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/gate"
)

// A sandbox without Options.Network gets a network namespace of its own,
// loopback only, made by its gate before bubblewrap starts (gate.Net):
// the listen queue at listenQueue and, unless Relax.Connections, its TCP
// connections capped at Options.Connections per address family, so that
// its kernel memory the host pays for is bounded (docs/local-backend.md,
// "Host-wide resources"). The gate needs the capabilities to make it:
// root's, or, for a user, those of a user namespace of the gate's own
// (gateNS).

// listenQueue is net.core.somaxconn in a sandbox's network namespace: the
// most connections one listener holds that its program has not accepted.
// 128 (the kernel's default before Linux 5.4, 4096 since) is still more
// than a test's server needs between two accepts.
const listenQueue = 128

// netPlan is the network namespace o's sandboxes get from their gate,
// nil with Network (they share the host's).
func (o Options) netPlan() *gate.Net {
	if o.Network {
		return nil
	}
	n := &gate.Net{ListenQueue: listenQueue, Connections: o.Connections}
	if o.Relax.Connections {
		n.Connections = 0
	}
	return n
}

// gateNS is the user namespace a sandbox's gate runs in: ns (a memory
// disk's), else, for a user other than root whose gate makes a network
// namespace, one of the gate's own where the user is root (unshare
// --map-root-user), the capabilities making it takes.
func gateNS(ns *gate.UserNS, p gate.Plan) *gate.UserNS {
	if ns != nil || p.Net == nil || os.Geteuid() == 0 || p.UID != 0 {
		return ns
	}
	return &gate.UserNS{UID: os.Getuid(), GID: os.Getgid()}
}

// connectionsProblem says why sandboxes' TCP connections cannot be capped
// here, or nil: a gate (gateExe, the runtime server's binary) makes a
// network namespace with the cap in it, as a sandbox's start would. nil
// too with Network, where sandboxes use the host's network and the cap
// does not apply (checkConnections says so).
func connectionsProblem(ctx context.Context, o Options, gateExe string) *Protection {
	if o.Network {
		return nil
	}
	p := &Protection{Name: ProtConnections, Status: StatusUnavailable, Required: true}
	if gateExe == "" {
		p.Detail, p.Fix = "no runtime server binary to run the sandbox's gate, which makes its network namespace", serverBinaryFix
		return p
	}
	// The command shows the queue the gate set: a binary that is not a
	// gate may end without a word, or run nothing.
	plan := gate.Plan{Net: &gate.Net{ListenQueue: listenQueue, Connections: o.Connections}, Command: []string{"/bin/cat", "/proc/sys/net/core/somaxconn"}}
	out, err := gate.Run(ctx, gateExe, plan, gateNS(nil, plan), gateEnv())
	switch {
	case err == nil && strings.TrimSpace(string(out)) == strconv.Itoa(listenQueue):
		return nil
	case !strings.Contains(string(out), gate.Prefix):
		p.Detail = fmt.Sprintf("%s did not run as the sandbox's gate, which makes its network namespace (%v; output %q)", gateExe, err, clip.String(string(out), 300))
		p.Fix = serverBinaryFix
	default:
		p.Detail = fmt.Sprintf("cap TCP connections at %d and the listen queue at %d in a network namespace of its own (the gate, nftables): %v", o.Connections, listenQueue, err)
		p.Fix = "a kernel with nftables, conntrack and its connlimit (CONFIG_NF_TABLES_INET, CONFIG_NFT_CT, CONFIG_NFT_CONNLIMIT, CONFIG_NFT_REJECT_INET) (or relax it: Options.Relax.Connections)"
	}
	return p
}
