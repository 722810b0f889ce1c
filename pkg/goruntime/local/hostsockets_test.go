package local_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Socket buffers: the host's tcp_mem and udp_mem are shared by every
// network namespace. See hostshare_test.go.

// udpHog binds 300 UDP sockets with 4 MiB receive buffers on its own
// loopback, sends each 8 MiB it never reads, touches /app/ready and holds
// them until /app/release exists.
const udpHog = `package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

func main() {
	snd, _ := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	syscall.SetsockoptInt(snd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4<<20)
	buf := make([]byte, 65000)
	sent := 0
	for i := 0; i < 300; i++ {
		r, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
		if err != nil {
			fmt.Println("socket:", err)
			break
		}
		syscall.SetsockoptInt(r, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<20)
		syscall.Bind(r, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
		to, _ := syscall.Getsockname(r)
		for n := 0; n < 130; n++ {
			if syscall.Sendto(snd, buf, 0, to) == nil {
				sent += len(buf)
			}
		}
	}
	fmt.Println("sent MiB", sent>>20)
	os.WriteFile("/app/ready", nil, 0o644)
	for i := 0; i < 12000; i++ {
		if _, err := os.Stat("/app/release"); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
`

// tcpHog opens 100 loopback TCP connections with 4 MiB buffers to a
// listener of its own that accepts and never reads, fills each, touches
// /app/ready and holds them until /app/release exists.
const tcpHog = `package main

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

func bufs(_, _ string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4<<20)
		syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<20)
	})
}

func main() {
	ln, err := (&net.ListenConfig{Control: bufs}).Listen(nil, "tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	buf := make([]byte, 16<<20)
	queued := 0
	for i := 0; i < 100; i++ {
		c, err := (&net.Dialer{Control: bufs}).Dial("tcp", ln.Addr().String())
		if err != nil {
			fmt.Println("dial:", err)
			break
		}
		held = append(held, c)
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		n, _ := c.Write(buf)
		queued += n
	}
	fmt.Println("queued MiB", queued>>20)
	os.WriteFile("/app/ready", nil, 0o644)
	for i := 0; i < 12000; i++ {
		if _, err := os.Stat("/app/release"); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
`

// udpEcho sends 100 datagrams to itself over loopback and prints how many
// arrived.
const udpEcho = `package main

import (
	"fmt"
	"net"
	"time"
)

func main() {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		panic(err)
	}
	for i := 0; i < 100; i++ {
		c.WriteTo([]byte("ping"), c.LocalAddr())
	}
	got := 0
	buf := make([]byte, 64)
	for {
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, _, err := c.ReadFrom(buf); err != nil {
			break
		}
		got++
	}
	fmt.Println("received", got)
}
`

// sockstatMem returns the pages of socket buffer memory the host's
// protocol proto ("TCP", "UDP") holds, from /proc/net/sockstat (the
// host's: the counter is the same in every network namespace).
func sockstatMem(t *testing.T, proto string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != proto+":" {
			continue
		}
		for i := 1; i+1 < len(f); i++ {
			if f[i] == "mem" {
				n, _ := strconv.ParseInt(f[i+1], 10, 64)
				return n
			}
		}
	}
	t.Fatalf("no %s mem in /proc/net/sockstat:\n%s", proto, data)
	return 0
}

// TestSocketMemoryShare: a sandbox filling TCP send and receive queues,
// or UDP receive queues, it never reads holds at most its socket memory
// limit (an eighth of its memory, 128 MiB) of the host's tcp_mem or
// udp_mem, and datagrams still arrive in a second sandbox meanwhile.
// Before, the memory cgroup did not count socket buffers: one sandbox
// held 2.2 GiB of either, and every TCP connection or UDP socket on the
// host (and in other sandboxes) then stalled or lost what it was sent
// (UDP: 3 datagrams of 100 arrived).
func TestSocketMemoryShare(t *testing.T) {
	b := newBackend(t, testOptions())
	for _, c := range []struct{ proto, hog string }{{"UDP", udpHog}, {"TCP", tcpHog}} {
		t.Run(c.proto, func(t *testing.T) {
			hog, other := openSession(t, b), openSession(t, b)
			before := sockstatMem(t, c.proto)
			release := hostile(t, hog, goruntime.Request{
				Files:   []goruntime.File{{Path: "hog/main.go", Data: []byte(c.hog)}},
				Command: "cd hog && go run main.go",
				Timeout: 3 * time.Minute,
			})
			held := sockstatMem(t, c.proto)
			res := mustOK(t, other, goruntime.Request{Files: []goruntime.File{{Path: "echo/main.go", Data: []byte(udpEcho)}}, Command: "cd echo && go run main.go"})
			out := release().Stdout
			const limitPages, noise = (1 << 30) / 8 / 4096, 4096
			t.Logf("host %s memory: %d pages before, %d while the sandbox held its queues (%s); the second sandbox: %s",
				c.proto, before, held, strings.TrimSpace(out), strings.TrimSpace(res.Stdout))
			if held-before > limitPages+noise {
				t.Errorf("one sandbox held %d pages of the host's %s memory; its limit is %d", held-before, c.proto, limitPages)
			}
			var got int
			if _, err := fmt.Sscan(strings.TrimPrefix(strings.TrimSpace(res.Stdout), "received "), &got); err != nil || got < 90 {
				t.Errorf("the second sandbox received %q of 100 datagrams; want at least 90", res.Stdout)
			}
		})
	}
}
