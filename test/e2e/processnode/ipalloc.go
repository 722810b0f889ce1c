package processnode

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
)

// errNoAddress means every address of the node's pod prefix is taken.
var errNoAddress = errors.New("no free pod address")

// ipAllocator hands out pod IPs from a loopback prefix (127.0.0.0/8 reaches
// this machine on every address, so each pod gets a distinct host:port
// without touching the network). Addresses are reused only after release.
type ipAllocator struct {
	prefix netip.Prefix

	mu    sync.Mutex
	next  netip.Addr
	inUse map[netip.Addr]bool
}

func newIPAllocator(prefix netip.Prefix) (*ipAllocator, error) {
	prefix = prefix.Masked()
	if !prefix.Addr().Is4() || !netip.MustParsePrefix("127.0.0.0/8").Contains(prefix.Addr()) || prefix.Bits() < 8 || prefix.Bits() > 30 {
		return nil, fmt.Errorf("pod prefix %s: want an IPv4 prefix inside 127.0.0.0/8 of length 8..30", prefix)
	}
	return &ipAllocator{prefix: prefix, next: prefix.Addr().Next(), inUse: map[netip.Addr]bool{}}, nil
}

// allocate returns the next free address whose port is not already bound
// by some other process (a left-over from an earlier run, say).
func (a *ipAllocator) allocate(port int) (netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	start := a.next
	for {
		addr := a.next
		a.next = a.next.Next()
		if !a.prefix.Contains(a.next) || a.isBroadcast(a.next) {
			a.next = a.prefix.Addr().Next()
		}
		if !a.inUse[addr] && portFree(addr, port) {
			a.inUse[addr] = true
			return addr, nil
		}
		if a.next == start {
			return netip.Addr{}, fmt.Errorf("allocate in %s: %w", a.prefix, errNoAddress)
		}
	}
}

func (a *ipAllocator) release(addr netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.inUse, addr)
}

func (a *ipAllocator) isBroadcast(addr netip.Addr) bool {
	return !a.prefix.Contains(addr.Next())
}

func portFree(addr netip.Addr, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(addr.String(), strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
