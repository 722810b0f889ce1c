package agentsandbox

// Commands and files through the backend, over each connectivity.

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

func TestExecEnvAndTimeout(t *testing.T) {
	for _, conn := range []string{ConnectivityInClusterPodIP, ConnectivityRouter} {
		t.Run(conn, func(t *testing.T) { testExecEnvAndTimeout(t, conn) })
	}
}

func testExecEnvAndTimeout(t *testing.T, conn string) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	b := newBackend(t, c, r, func(o *Options) { o.MaxExecTimeout = time.Minute; o.Connectivity = conn })
	ctx := t.Context()
	sb, err := b.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Env", func(t *testing.T) {
		env := map[string]string{"GREETING": "it's a \"test\" $HOME `x` \\n", "EMPTY": "", "PATH_EXTRA": "a b\nc"}
		res, err := sb.Exec(ctx, goruntime.ExecRequest{
			Command: `printf '%s|%s|%s' "$GREETING" "$EMPTY" "$PATH_EXTRA"`, Env: env, Timeout: 10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		want := env["GREETING"] + "||" + env["PATH_EXTRA"]
		if res.Stdout != want || res.ExitCode != 0 {
			t.Fatalf("Exec = %+v, want stdout %q", res, want)
		}
	})
	t.Run("EnvWithoutTimeout", func(t *testing.T) {
		res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: `echo "$A"; exit 5`, Env: map[string]string{"A": "x'y"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "x'y\n" || res.ExitCode != 5 {
			t.Fatalf("Exec = %+v", res)
		}
	})
	t.Run("TimeoutKillsTheProcessGroup", func(t *testing.T) {
		start := time.Now()
		res, err := sb.Exec(ctx, goruntime.ExecRequest{
			Command: `echo started; sh -c 'echo $$ > bg.pid; exec sleep 30' & sleep 30; echo finished`,
			Timeout: 5 * time.Second, // time for a busy machine's shells to print and write the pid first
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "started\n" {
			t.Fatalf("Exec = %+v, want TimedOut, exit 124, stdout started", res)
		}
		if el := time.Since(start); el >= 30*time.Second {
			t.Errorf("timed-out Exec took %s: its command ran to its end", el)
		}
		// The background child was in the process group: it must be dead
		// (gone, or a zombie waiting for a reaper).
		res, err = sb.Exec(ctx, goruntime.ExecRequest{Command: `pid=$(cat bg.pid) && for i in $(seq 300); do st=$(cut -d' ' -f3 /proc/$pid/stat 2>/dev/null); case "$st" in ""|Z) echo gone; exit 0;; esac; sleep 0.2; done; echo "alive $pid $st"`})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "gone\n" {
			t.Errorf("background child after the timeout: %q %q, want gone", res.Stdout, res.Stderr)
		}
	})
	t.Run("TermIgnored", func(t *testing.T) {
		res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: `trap "" TERM; sleep 30`, Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.ExitCode != 124 {
			t.Fatalf("Exec = %+v, want TimedOut after SIGKILL, exit 124", res)
		}
	})
	t.Run("CommandExiting124IsNotATimeout", func(t *testing.T) {
		res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "echo 'timeout: sending signal TERM to command /bin/sh' >&2; echo tail >&2; exit 124", Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.TimedOut || res.ExitCode != 124 {
			t.Fatalf("Exec = %+v, want exit 124 without TimedOut", res)
		}
	})
	t.Run("DeadlineReachesRouter", func(t *testing.T) {
		if conn != ConnectivityRouter {
			t.Skip("commands do not go through the router with connectivity " + conn)
		}
		timeout := 2 * time.Second
		if _, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "true", Timeout: timeout}); err != nil {
			t.Fatal(err)
		}
		v := r.last().Get("X-Sandbox-Timeout")
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("X-Sandbox-Timeout = %q: %v", v, err)
		}
		if d := time.Duration(secs * float64(time.Second)); d <= timeout || d > timeout+execGrace {
			t.Fatalf("X-Sandbox-Timeout = %s, want in (%s, %s]", d, timeout, timeout+execGrace)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		for name, req := range map[string]goruntime.ExecRequest{
			"env name":     {Command: "true", Env: map[string]string{"A-B": "x"}},
			"env NUL":      {Command: "true", Env: map[string]string{"A": "x\x00"}},
			"command NUL":  {Command: "true\x00"},
			"over the max": {Command: "true", Timeout: 2 * time.Minute},
		} {
			n := len(r.headers)
			if _, err := sb.Exec(ctx, req); err == nil {
				t.Errorf("%s: Exec accepted %+v", name, req)
			}
			r.mu.Lock()
			sent := len(r.headers) - n
			r.mu.Unlock()
			if sent != 0 {
				t.Errorf("%s: %d requests sent for refused input", name, sent)
			}
		}
	})
}

func TestFiles(t *testing.T) {
	c := newCluster(t, clusterSetup{pool: true, template: true})
	r := newRouter(t)
	b := newBackend(t, c, r, nil)
	ctx := t.Context()
	sb, err := b.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	content := "package main\n\x00\xff"
	if err := sb.WriteFile(ctx, "main.go", strings.NewReader(content)); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	got, err := sb.ReadFile(ctx, "main.go")
	if err != nil || string(got) != content {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	if _, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "mkdir -p sub && echo x > sub/f"}); err != nil {
		t.Fatal(err)
	}
	entries, err := sb.List(ctx, ".")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	seen := map[string]goruntime.FileInfo{}
	for _, e := range entries {
		seen[e.Name] = e
	}
	if f := seen["main.go"]; f.IsDir || f.Size != int64(len(content)) || time.Since(f.ModTime) > time.Minute {
		t.Errorf("List main.go = %+v", f)
	}
	if d := seen["sub"]; !d.IsDir {
		t.Errorf("List sub = %+v, want a directory", d)
	}
	if got, err := sb.ReadFile(ctx, "sub/f"); err != nil || string(got) != "x\n" {
		t.Errorf("ReadFile(sub/f) = %q, %v", got, err)
	}

	for _, tc := range []struct {
		name string
		err  error
		call func() error
	}{
		{"read missing", goruntime.ErrNotExist, func() error { _, err := sb.ReadFile(ctx, "nope.go"); return err }},
		{"list missing", goruntime.ErrNotExist, func() error { _, err := sb.List(ctx, "nope"); return err }},
		{"read absolute", goruntime.ErrPathEscape, func() error { _, err := sb.ReadFile(ctx, "/etc/passwd"); return err }},
		{"read dotdot", goruntime.ErrPathEscape, func() error { _, err := sb.ReadFile(ctx, "sub/../../x"); return err }},
		{"list dotdot", goruntime.ErrPathEscape, func() error { _, err := sb.List(ctx, ".."); return err }},
		{"write subpath", goruntime.ErrPathEscape, func() error { return sb.WriteFile(ctx, "a/b.go", strings.NewReader("x")) }},
		{"write dotdot", goruntime.ErrPathEscape, func() error { return sb.WriteFile(ctx, "..", strings.NewReader("x")) }},
		{"write over server limit", goruntime.ErrTooLarge, func() error {
			return sb.WriteFile(ctx, "big.bin", strings.NewReader(strings.Repeat("x", 2<<20)))
		}},
	} {
		if err := tc.call(); !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
	}
	// The server's own refusal (a symlink out of /app) maps to ErrPathEscape.
	if err := os.Symlink("/etc", r.dir+"/etc-link"); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.ReadFile(ctx, "etc-link/hostname"); !errors.Is(err, goruntime.ErrPathEscape) {
		t.Errorf("read through escaping symlink: err = %v, want ErrPathEscape", err)
	}
}
