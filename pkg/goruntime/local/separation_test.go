package local_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// What a sandbox cannot see or reach: the host's files, processes and
// network, and another sandbox's files and processes.

// hostFilesAttack: files on the host holding secret cannot be read from
// s, /root cannot be listed, and the secret is nowhere in the sandbox's
// file tree (the large read-only trees aside: /usr, /go, /proc, /sys).
func hostFilesAttack(s *goruntime.Session, secret string, files ...string) findings {
	var f findings
	for _, file := range files {
		if res := f.run(s, goruntime.Request{Command: "cat " + file}); res != nil && (res.ExitCode == 0 || strings.Contains(res.Stdout, secret)) {
			f.add("sandbox read host file %s: %q", file, res.Stdout)
		}
	}
	if res := f.run(s, goruntime.Request{Command: "ls -A /root"}); res != nil && res.ExitCode == 0 {
		f.add("sandbox lists a /root: %q", res.Stdout)
	}
	res := f.run(s, goruntime.Request{Command: "grep -rl " + secret + " / --exclude-dir=proc --exclude-dir=usr --exclude-dir=go --exclude-dir=sys 2>/dev/null | head"})
	if res != nil && strings.TrimSpace(res.Stdout) != "" {
		f.add("host secret found in the sandbox at %s", res.Stdout)
	}
	return f
}

func TestHostHomeAndTmpInvisible(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	secret := fmt.Sprintf("secret-%d", time.Now().UnixNano())
	homeFile := filepath.Join(home, ".local-test-"+secret)
	tmpFile := filepath.Join(os.TempDir(), "local-test-"+secret)
	for _, f := range []string{homeFile, tmpFile} {
		if err := os.WriteFile(f, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(f) })
	}
	check(t, hostFilesAttack(openSession(t, newBackend(t, testOptions())), secret, homeFile, tmpFile))
}

// networkAttack: a command reaches neither a listener on the host's
// loopback nor the internet (IPv4, IPv6, a name), and sees no host
// interface.
func networkAttack(s *goruntime.Session) findings {
	var f findings
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.add("host listener: %v", err)
		return f
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	prog := fmt.Sprintf(`package main

import (
	"fmt"
	"net"
	"time"
)

func main() {
	for _, addr := range []string{%q, "1.1.1.1:53", "[2606:4700:4700::1111]:53", "proxy.golang.org:443"} {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err == nil {
			c.Close()
			fmt.Println("CONNECTED", addr)
			continue
		}
		fmt.Println("refused", addr, err)
	}
}
`, ln.Addr().String())
	res := f.mustOK(s, goruntime.Request{Files: []goruntime.File{{Path: "dial.go", Data: []byte(prog)}}, Command: "go run dial.go"})
	if res != nil && (strings.Contains(res.Stdout, "CONNECTED") || strings.Count(res.Stdout, "\nrefused ") != 3) {
		f.add("sandbox reached the network:\n%s", res.Stdout)
	}
	select {
	case <-accepted:
		f.add("the host listener accepted a connection from the sandbox")
	default:
	}
	if res := f.mustOK(s, goruntime.Request{Command: "ls /sys/class/net 2>/dev/null; cat /proc/net/dev"}); res != nil && (strings.Contains(res.Stdout, "eth") || strings.Contains(res.Stdout, "ens")) {
		f.add("sandbox sees host interfaces:\n%s", res.Stdout)
	}
	return f
}

func TestNetworkUnreachable(t *testing.T) {
	check(t, networkAttack(openSession(t, newBackend(t, testOptions()))))
}

// sleepersSeen prints "sleep N" for each process a command sees whose
// command line is sleep N: short, so a marker among hundreds of host
// processes is not lost between the output's head and tail (8 KiB each),
// and with no marker in the command itself to find.
const sleepersSeen = "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -o 'sleep [0-9.]*'"

// hostProcessAttack: a process on the host (of the caller's uid, which
// is the sandbox's own when the backend is not root) is invisible to a
// command, which sees only a handful of processes of its own, and cannot
// kill it by its host pid.
func hostProcessAttack(s *goruntime.Session) findings {
	var f findings
	marker := strconv.Itoa(900000 + int(time.Now().UnixNano()%99999))
	host := exec.Command("sleep", marker)
	if err := host.Start(); err != nil {
		f.add("start a host process: %v", err)
		return f
	}
	defer func() { host.Process.Kill(); host.Wait() }()
	pid := host.Process.Pid

	if res := f.run(s, goruntime.Request{Command: sleepersSeen}); res != nil && strings.Contains(res.Stdout, "sleep "+marker) {
		f.add("sandbox sees host process sleep %s", marker)
	}
	if res := f.run(s, goruntime.Request{Command: "ls -d /proc/[0-9]* | wc -l"}); res != nil {
		if n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout)); n == 0 || n > 10 {
			f.add("sandbox sees %d processes, want a handful of its own", n)
		}
	}
	if res := f.run(s, goruntime.Request{Command: fmt.Sprintf("kill -9 %d", pid)}); res != nil && res.ExitCode == 0 {
		f.add("kill -9 %d in the sandbox succeeded", pid)
	}
	if !procfs.Alive(pid, 0) { // our child: a zombie until we wait for it
		f.add("host process %d died after the sandbox signalled it", pid)
	}
	return f
}

func TestHostProcessesInvisible(t *testing.T) {
	check(t, hostProcessAttack(openSession(t, newBackend(t, testOptions()))))
}

// otherSandboxAttack: attacker, a sandbox of the same backend as victim,
// cannot read victim's files (its /app, /tmp, HOME and build cache, by
// the same paths or by their host paths, or through /proc/PID/root),
// write into its /app by the host path, see its ID anywhere, or see or
// signal its processes (by host pid, or all of its own with kill -1);
// victim's process lives on.
func otherSandboxAttack(victim, attacker *goruntime.Session) findings {
	var f findings
	secret := fmt.Sprintf("secret-%d", time.Now().UnixNano())
	marker := fmt.Sprintf("3600.%d", time.Now().UnixNano()%1_000_000)
	if f.mustOK(victim, goruntime.Request{Command: "echo A > /app/a; echo A > /tmp/a; echo A > $HOME/a; echo A > $(go env GOCACHE)/a; echo " + secret + " > /app/secret; " +
		"(setsid sleep " + marker + " </dev/null >/dev/null 2>&1 &); for i in $(seq 50); do pgrep -x -f 'sleep " + marker + "' >/dev/null && break; sleep 0.1; done"}) == nil {
		return f
	}
	res := f.run(attacker, goruntime.Request{Command: "cat /app/a /tmp/a $HOME/a $(go env GOCACHE)/a"})
	if res != nil && (res.ExitCode == 0 || strings.Contains(res.Stdout, "A")) {
		f.add("sandbox %s sees %s's files: %q", attacker.ID(), victim.ID(), res.Stdout)
	}
	res = f.run(attacker, goruntime.Request{Command: "ls / /home /run; find / -name '" + victim.ID() + "' 2>/dev/null"})
	if res != nil && strings.Contains(res.Stdout, victim.ID()) {
		f.add("sandbox sees the other's ID in:\n%s", res.Stdout)
	}

	// The victim's /app as the host reaches it: Dir()/app, or where that
	// link points (its disk's mount point; /proc/PID/root/... for a
	// memory disk, which only the sandbox's mount namespace holds).
	dir := victim.Sandbox().(*local.Sandbox).Dir()
	app := filepath.Join(dir, "app")
	if target, err := os.Readlink(app); err == nil {
		app = target
	}
	if _, err := os.Stat(filepath.Join(app, "secret")); err != nil {
		f.add("victim's /app on the host: %v", err)
		return f
	}
	pid := hostPID("sleep", marker)
	st, err := procfs.ReadStat(pid)
	if pid == 0 || err != nil {
		f.add("victim's sleep %s is not among the host's processes (%v)", marker, err)
		return f
	}
	for _, cmd := range []string{"cat " + app + "/secret", "ls " + dir, "echo pwned > " + app + "/pwned", fmt.Sprintf("cat /proc/%d/root/app/secret", pid)} {
		if res := f.run(attacker, goruntime.Request{Command: cmd}); res != nil && (res.ExitCode == 0 || strings.Contains(res.Stdout, secret)) {
			f.add("%q in sandbox %s succeeded: %q", cmd, attacker.ID(), res.Stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(app, "pwned")); err == nil {
		f.add("sandbox %s wrote into %s's /app", attacker.ID(), victim.ID())
	}
	if res := f.run(attacker, goruntime.Request{Command: sleepersSeen}); res != nil && strings.Contains(res.Stdout, "sleep "+marker) {
		f.add("sandbox %s sees %s's process sleep %s", attacker.ID(), victim.ID(), marker)
	}
	if res := f.run(attacker, goruntime.Request{Command: fmt.Sprintf("kill -9 %d", pid)}); res != nil && res.ExitCode == 0 {
		f.add("kill -9 %d (the other sandbox's process) in sandbox %s succeeded", pid, attacker.ID())
	}
	f.run(attacker, goruntime.Request{Command: "kill -9 -1"})
	if !procfs.Alive(pid, st.StartTime) {
		f.add("sandbox %s's process %d died after sandbox %s's attacks", victim.ID(), pid, attacker.ID())
	}
	if res := f.run(victim, goruntime.Request{Command: "pkill -x -f 'sleep " + marker + "' && cat /app/secret"}); res != nil && (res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != secret) {
		f.add("sandbox %s after the attacks: its sleep or its secret is gone (exit %d, %q)", victim.ID(), res.ExitCode, res.Stdout)
	}
	return f
}

// hostPID is the pid of the host's process whose command line is args,
// or 0.
func hostPID(args ...string) int {
	want := []byte(strings.Join(args, "\x00") + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Equal(b, want) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

func TestSandboxesSeparate(t *testing.T) {
	b := newBackend(t, testOptions())
	check(t, otherSandboxAttack(openSession(t, b), openSession(t, b)))
}
