package local_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// The limits set in a sandbox's own network namespace (local/internal/nslimits): a
// connection waiting in a listener's accept queue is charged to no
// cgroup, so the host pays for every one a sandbox makes.

// connFlood opens 10 listeners per address family and makes 100
// connections to each without accepting any, closing its own end at once
// (what queued 600,000 connections, 2.4 GB of the host's kernel memory,
// from 150 descriptors). It prints, per family, how many connects
// succeeded, were refused, or failed otherwise. With the argument
// "hold" it then touches /app/ready and keeps every listener, and so
// every queued connection, until /app/release exists.
const connFlood = `package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

func main() {
	var held []net.Listener
	for _, f := range []struct{ network, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		ok, refused, other := 0, 0, 0
		var firstOther error
		var keep []net.Listener
		for i := 0; i < 10; i++ {
			l, err := net.Listen(f.network, f.addr)
			if err != nil {
				fmt.Println(f.network, "listen:", err)
				return
			}
			keep = append(keep, l)
			for k := 0; k < 100; k++ {
				c, err := net.DialTimeout(f.network, l.Addr().String(), 10*time.Second)
				switch {
				case err == nil:
					ok++
					c.Close()
				case errors.Is(err, syscall.ECONNREFUSED):
					refused++
				default:
					other++
					firstOther = err
				}
			}
		}
		fmt.Printf("%s %d %d %d %v\n", f.network, ok, refused, other, firstOther)
		held = append(held, keep...)
	}
	if len(os.Args) > 1 && os.Args[1] == "hold" {
		os.WriteFile("/app/ready", nil, 0o644)
		for i := 0; i < 12000; i++ {
			if _, err := os.Stat("/app/release"); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, l := range held {
		l.Close()
	}
}
`

// tcpEcho sends a line through a loopback TCP connection of its own and
// prints what came back.
const tcpEcho = `package main

import (
	"bufio"
	"fmt"
	"net"
)

func main() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		c, err := l.Accept()
		if err == nil {
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Write([]byte(line))
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		panic(err)
	}
	fmt.Fprintln(c, "echo over tcp")
	line, _ := bufio.NewReader(c).ReadString('\n')
	fmt.Print(line)
}
`

// TestConnectionsCapped: a sandbox holds at most Options.Connections TCP
// connections per address family, counting those queued and never
// accepted; a connect past the cap is refused (ECONNREFUSED), a second
// sandbox's TCP works meanwhile, and the connections a finished command
// held count no more. Listen queues hold
// 128 at most (the kernel's default is 4096), and a command cannot raise
// that.
func TestConnectionsCapped(t *testing.T) {
	const limit = 256
	opts := testOptions()
	opts.Connections = limit
	b := newBackend(t, opts)
	s := openSession(t, b)
	res := mustOK(t, s, goruntime.Request{Command: "cat /proc/sys/net/core/somaxconn; echo 4096 > /proc/sys/net/core/somaxconn 2>/dev/null || echo refused"})
	if got := strings.Fields(res.Stdout); len(got) != 2 || got[0] != "128" || got[1] != "refused" {
		t.Errorf("somaxconn, then raising it: %q; want 128, refused", res.Stdout)
	}
	files := []goruntime.File{{Path: "flood/main.go", Data: []byte(connFlood)}}
	check := func(run int, stdout string) {
		t.Helper()
		t.Logf("run %d (network, connected, refused, failed otherwise):\n%s", run, stdout)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if len(lines) != 2 {
			t.Fatalf("run %d: want a line per address family, got %q", run, stdout)
		}
		for _, line := range lines {
			var network string
			var ok, refused, other int
			if _, err := fmt.Sscan(line, &network, &ok, &refused, &other); err != nil {
				t.Fatalf("run %d: %q: %v", run, line, err)
			}
			// Nothing else in the sandbox holds TCP connections: the
			// cap is reached exactly, and every connect past it is
			// refused, none left hanging.
			if ok != limit || refused != 1000-limit || other != 0 {
				t.Errorf("run %d, %s: %d connected, %d refused, %d failed otherwise (%s); want %d, %d, 0",
					run, network, ok, refused, other, line, limit, 1000-limit)
			}
		}
	}
	// Run 1 holds its connections while a second sandbox uses TCP.
	release := hostile(t, s, goruntime.Request{Files: files, Command: "cd flood && go run main.go hold", Timeout: 3 * time.Minute})
	other := openSession(t, b)
	res = mustOK(t, other, goruntime.Request{Files: []goruntime.File{{Path: "echo/main.go", Data: []byte(tcpEcho)}}, Command: "cd echo && go run main.go"})
	if got := strings.TrimSpace(res.Stdout); got != "echo over tcp" {
		t.Errorf("a second sandbox's TCP echo while the first held its connections: %q", got)
	}
	check(1, release().Stdout)
	// Run 2: what run 1 held counts no more once it has ended.
	check(2, mustOK(t, s, goruntime.Request{Files: files, Command: "cd flood && go run main.go"}).Stdout)
}
