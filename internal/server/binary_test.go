package server

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

// serverBinary builds cmd/sandbox-server, and its process API companion
// cmd/sandbox-processapi next to it, once per test run.
var serverBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "sandbox-server-test-")
	if err != nil {
		return "", err
	}
	out, err := exec.Command("go", "build", "-o", dir+"/",
		"github.com/go-runtime-sandbox/go-runtime-sandbox/cmd/sandbox-server",
		"github.com/go-runtime-sandbox/go-runtime-sandbox/cmd/sandbox-processapi").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build cmd/sandbox-server cmd/sandbox-processapi: %v\n%s", err, out)
	}
	return filepath.Join(dir, "sandbox-server"), nil
})

// processAPIBinary is the companion serverBinary built.
func processAPIBinary() (string, error) {
	bin, err := serverBinary()
	return filepath.Join(filepath.Dir(bin), ProcessAPIName), err
}

// proc is a running sandbox-server binary.
type proc struct {
	cmd    *exec.Cmd
	addr   string // as logged: tcp:host:port or unix:/path
	url    string // http://host:port for TCP
	base   string
	mu     sync.Mutex
	lines  []string
	exited chan struct{}
	status *os.ProcessState
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// startBinary runs the server binary on a free loopback port (unless args
// set --addr) with a fresh base directory, and waits for its "listening"
// log line.
func startBinary(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	return startWrapped(t, nil, env, args...)
}

// startWrapped is startBinary with the server run by wrapper (a command
// prefix such as unshare).
func startWrapped(t testing.TB, wrapper []string, env []string, args ...string) *proc {
	t.Helper()
	bin, err := serverBinary()
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(t.TempDir(), "app")
	all := append([]string{"--base-dir", base}, args...)
	if !strings.Contains(strings.Join(args, " "), "--addr") {
		all = append(all, "--addr", "127.0.0.1:0")
	}
	argv := append(append(append([]string{}, wrapper...), bin), all...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, base: base, exited: make(chan struct{})}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.mu.Unlock()
			var m struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "listening" {
				listening <- m.Addr
			}
		}
		_ = cmd.Wait()
		p.status = cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	})
	select {
	case p.addr = <-listening:
	case <-p.exited:
		t.Fatalf("sandbox-server exited before listening: %v\n%s", p.status, p.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("sandbox-server did not listen within 30 s\n%s", p.logs())
	}
	if hp, ok := strings.CutPrefix(p.addr, "tcp:"); ok {
		p.url = "http://" + hp
	}
	return p
}

// execute posts a command to the binary and decodes the answer.
func (p *proc) execute(t testing.TB, client *http.Client, url string, body map[string]any) wire.ExecuteResponse {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := client.Post(url+"/execute", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("POST /execute: %v\n%s", err, p.logs())
	}
	defer resp.Body.Close()
	var res wire.ExecuteResponse
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /execute: status %d, decode %v", resp.StatusCode, err)
	}
	return res
}

func TestBinaryHelpListsEverySetting(t *testing.T) {
	bin, err := serverBinary()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f := Defaults()
	RegisterFlags(fs, &f, func(string) (string, bool) { return "", false })
	n := 0
	fs.VisitAll(func(fl *flag.Flag) {
		n++
		_, env, _ := strings.Cut(fl.Usage, " (env ")
		env = strings.TrimSuffix(env, ")")
		if env == "" || !strings.Contains(string(out), "--"+fl.Name) || !strings.Contains(string(out), env) {
			t.Errorf("--help does not document --%s / %q", fl.Name, env)
		}
	})
	if n < 14 {
		t.Errorf("%d flags registered, want every setting (14)", n)
	}
	if out, err := exec.Command(bin, "--no-such-flag").CombinedOutput(); err == nil || !strings.Contains(string(out), "no-such-flag") {
		t.Errorf("unknown flag: err %v, output %s; want exit 2 naming the flag", err, out)
	}
	if out, err := exec.Command(bin, "--addr", "127.0.0.1:0", "--reap", "maybe").CombinedOutput(); err == nil || !strings.Contains(string(out), "reap") {
		t.Errorf("bad --reap: err %v, output %s; want a refusal naming it", err, out)
	}
}

func TestBinaryInvalidTimeoutFallsBack(t *testing.T) {
	p := startBinary(t, append(os.Environ(), "SANDBOX_EXEC_TIMEOUT_SECONDS=soon"))
	logs := p.logs()
	if !strings.Contains(logs, `"setting":"exec-timeout"`) || !strings.Contains(logs, `"exec_timeout_s":300`) {
		t.Fatalf("want a warning and the 300 s default:\n%s", logs)
	}
}

func TestBinaryEnvTimeoutApplies(t *testing.T) {
	p := startBinary(t, append(os.Environ(), "SANDBOX_EXEC_TIMEOUT_SECONDS=0.5"))
	res := p.execute(t, http.DefaultClient, p.url, map[string]any{"command": "sleep 20"})
	if !res.TimedOut || res.ExitCode != 124 {
		t.Fatalf("got %+v, want the env's 0.5 s deadline to kill the command", res)
	}
}

// TestBinaryCommandGOMAXPROCS: with --command-gomaxprocs the server runs
// with its own environment's GOMAXPROCS (1, as a local sandbox starts it)
// and commands get the flag's; without it they inherit the server's.
func TestBinaryCommandGOMAXPROCS(t *testing.T) {
	env := append(os.Environ(), "GOMAXPROCS=1")
	p := startBinary(t, env, "--command-gomaxprocs=3")
	if res := p.execute(t, http.DefaultClient, p.url, map[string]any{"command": "echo $GOMAXPROCS"}); res.Stdout != "3\n" {
		t.Errorf("with --command-gomaxprocs=3 a command saw GOMAXPROCS=%q, want 3", strings.TrimSpace(res.Stdout))
	}
	own, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if vars := strings.Split(string(own), "\x00"); !slices.Contains(vars, "GOMAXPROCS=1") || slices.Contains(vars, "GOMAXPROCS=3") {
		t.Errorf("the server's own environment has GOMAXPROCS %q, want 1 only", slices.DeleteFunc(vars, func(v string) bool { return !strings.HasPrefix(v, "GOMAXPROCS=") }))
	}
	plain := startBinary(t, env)
	if res := plain.execute(t, http.DefaultClient, plain.url, map[string]any{"command": "echo $GOMAXPROCS"}); res.Stdout != "1\n" {
		t.Errorf("without --command-gomaxprocs a command saw GOMAXPROCS=%q, want the server's 1", strings.TrimSpace(res.Stdout))
	}
}

func TestBinaryUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "runtime.sock")
	p := startBinary(t, os.Environ(), "--addr", "unix:"+sock)
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	res := p.execute(t, client, "http://sandbox", map[string]any{"command": "echo over a socket"})
	if res.Stdout != "over a socket\n" {
		t.Fatalf("got %+v", res)
	}
}

func TestBinaryWithoutHomeOrGoVars(t *testing.T) {
	tmp := t.TempDir()
	p := startBinary(t, []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp})
	res := p.execute(t, http.DefaultClient, p.url, map[string]any{
		"command": `for v in HOME GOPATH GOMODCACHE GOCACHE; do eval d=\$$v; test -n "$d" && test -w "$d" || echo "$v=$d unusable"; done; echo $HOME`})
	if res.Stdout != filepath.Join(tmp, "sandbox-home")+"\n" {
		t.Fatalf("got %+v", res)
	}
}

// TestBinaryReapsOrphans runs nested builds and orphan-making commands on
// the built server (a child subreaper, as it is in a local sandbox) and
// checks that the orphans were re-parented to it and none stay zombies.
func TestBinaryReapsOrphans(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("go not on PATH")
	}
	p := startBinary(t, os.Environ())
	pid := p.cmd.Process.Pid
	tok := sleepToken()
	t.Cleanup(func() { killArg(tok) })

	mod := `mkdir -p m && cd m && printf 'module m\ngo 1.22\n' > go.mod &&
printf 'package main\nimport "fmt"\nfunc main() { fmt.Println("built") }\n' > main.go &&
printf 'package main\nimport ("os/exec"; "testing")\nfunc TestOrphan(t *testing.T) { exec.Command("sh", "-c", "(sleep 0.2 &)").Run() }\n' > main_test.go &&
go build -o hello . && ./hello && go vet . && go test -count=1 . && go run .`
	res := p.execute(t, http.DefaultClient, p.url, map[string]any{"command": mod, "timeout_seconds": 300})
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "built") {
		t.Fatalf("nested build: %+v", res)
	}
	// Double-forked orphans: their parent shell exits at once.
	res = p.execute(t, http.DefaultClient, p.url, map[string]any{
		"command": fmt.Sprintf("for i in 1 2 3 4 5; do (sleep 0.$i >/dev/null 2>&1 &); done; (sleep %s >/dev/null 2>&1 & echo $! > orphan.pid)", tok)})
	if res.ExitCode != 0 {
		t.Fatalf("orphan command: %+v", res)
	}
	b, err := os.ReadFile(filepath.Join(p.base, "orphan.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var orphan int
	fmt.Sscan(string(b), &orphan)
	if info, ok := readProc(orphan); !ok || info.ppid != pid {
		t.Fatalf("orphan %d: %+v alive=%v; want it re-parented to the server %d", orphan, info, ok, pid)
	}
	_ = syscall.Kill(orphan, syscall.SIGKILL)

	deadline := time.Now().Add(15 * time.Second)
	for {
		zombies := zombieChildren(pid)
		if len(zombies) == 0 {
			if _, ok := readProc(orphan); !ok {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombies left under the server: %v (orphan %d still listed: %v)\n%s", zombies, orphan, func() bool { _, ok := readProc(orphan); return ok }(), p.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Commands still report their own exit status (the reaper never took it).
	if res := p.execute(t, http.DefaultClient, p.url, map[string]any{"command": "(true &); exit 3"}); res.ExitCode != 3 {
		t.Fatalf("exit status after reaping: %+v", res)
	}
}

// zombieChildren lists the zombie children of pid.
func zombieChildren(pid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		var child int
		if _, err := fmt.Sscan(filepath.Base(d), &child); err != nil {
			continue
		}
		if info, ok := readProc(child); ok && info.ppid == pid && info.state == "Z" {
			out = append(out, child)
		}
	}
	return out
}

func TestBinarySIGTERMKillsCommandsAndExits(t *testing.T) {
	p := startBinary(t, os.Environ())
	tok := sleepToken()
	t.Cleanup(func() { killArg(tok) })
	done := make(chan wire.ExecuteResponse, 1)
	go func() {
		done <- p.execute(t, http.DefaultClient, p.url, map[string]any{"command": fmt.Sprintf("sleep %[1]s & sleep %[1]s", tok)})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(running(withArg(tok))) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("command did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Signal != int(syscall.SIGKILL) || !strings.Contains(res.Stderr, "server shutting down") {
		t.Fatalf("running command's result %+v, want killed by SIGKILL for shutdown", res)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("server still running 30 s after SIGTERM")
	}
	if code := p.status.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0\n%s", code, p.logs())
	}
	waitGone(t, tok)
	if !strings.Contains(p.logs(), `"msg":"stopped"`) {
		t.Fatalf("no clean stop in logs:\n%s", p.logs())
	}
}

// TestBinaryAsPID1 runs the server as PID 1 of a new PID namespace, as in
// a container: it must reap orphans without being a subreaper and shut
// down cleanly on SIGTERM.
func TestBinaryAsPID1(t *testing.T) {
	p, server := startAsPID1(t)
	tok := sleepToken()
	t.Cleanup(func() { killArg(tok) })
	res := p.execute(t, http.DefaultClient, p.url, map[string]any{
		"command": fmt.Sprintf("for i in 1 2 3 4 5; do (sleep 0.$i &); done; (sleep %s >/dev/null 2>&1 &); echo ok", tok)})
	if res.Stdout != "ok\n" {
		t.Fatalf("orphan command: %+v", res)
	}
	orphans := withArg(tok)
	if len(orphans) != 1 || orphans[0].ppid != server {
		t.Fatalf("orphan %+v, want one process re-parented to the server (host pid %d)", orphans, server)
	}
	_ = syscall.Kill(orphans[0].pid, syscall.SIGKILL)
	deadline := time.Now().Add(15 * time.Second)
	for len(withArg(tok)) > 0 || len(zombieChildren(server)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("zombies left under PID 1: %v, orphan still listed: %v", zombieChildren(server), withArg(tok))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := syscall.Kill(server, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("PID 1 server still running 30 s after SIGTERM")
	}
	if code := p.status.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0\n%s", code, p.logs())
	}
}

// TestBinaryPermissionDenied: a file or directory inside the base that the
// server may not read or write (mode 000, the server without
// CAP_DAC_OVERRIDE, as in a sandbox) is 403 with a "Permission denied"
// message, told apart from an escape, which keeps upstream's exact
// message "Access denied" (plus error_code path_escape).
func TestBinaryPermissionDenied(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv (util-linux) not found; install util-linux")
	}
	// Root without the capabilities that bypass file modes.
	p := startWrapped(t, []string{setpriv, "--bounding-set", "-dac_override,-dac_read_search"}, os.Environ())
	// The mode-000 directory below stays unreadable to a user other than
	// root after the test too: open it again for TempDir's cleanup.
	t.Cleanup(func() { os.Chmod(filepath.Join(p.base, "locked"), 0o755) })
	res := p.execute(t, http.DefaultClient, p.url, map[string]any{
		"command": "echo x > secret && chmod 000 secret && mkdir locked && echo y > locked/f && chmod 000 locked && cat secret"})
	if res.ExitCode == 0 {
		t.Fatalf("the server's commands can still read a mode-000 file: %+v", res)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(p.url + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{"/download/secret", "/list/locked", "/download/locked/f", "/list/locked/sub"} {
		code, body := get(path)
		var m wire.Message
		if code != http.StatusForbidden || json.Unmarshal([]byte(body), &m) != nil || !strings.HasPrefix(m.Message, "Permission denied") {
			t.Errorf("GET %s: %d %s, want 403 with a message starting \"Permission denied\"", path, code, body)
		}
	}
	var form strings.Builder
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "locked/new.txt")
	_, _ = fw.Write([]byte("data"))
	_ = mw.Close()
	resp, err := http.Post(p.url+"/upload", mw.FormDataContentType(), strings.NewReader(form.String()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"Permission denied`) {
		t.Errorf("upload into a mode-000 directory: %d %s, want 403 Permission denied", resp.StatusCode, body)
	}
	if code, body := get("/download/%2E%2E%2Fetc%2Fpasswd"); code != http.StatusForbidden || strings.TrimSpace(body) != `{"message":"Access denied","error_code":"path_escape"}` {
		t.Errorf("escape: %d %s, want 403 {\"message\":\"Access denied\",\"error_code\":\"path_escape\"}", code, body)
	}
}
