package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
)

func TestHealthAndRouting(t *testing.T) {
	ts := startServer(t, nil)
	cases := []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/", 200, `{"message":"Sandbox Runtime is active.","status":"ok"}`},
		{"GET", "/nope", 404, `{"detail":"Not Found"}`},
		{"GET", "/execute", 405, `{"detail":"Method Not Allowed"}`},
		{"POST", "/download/x", 405, `{"detail":"Method Not Allowed"}`},
		{"DELETE", "/list/x", 405, `{"detail":"Method Not Allowed"}`},
		{"GET", "/download", 404, `{"detail":"Not Found"}`},
		{"GET", "/upload", 405, `{"detail":"Method Not Allowed"}`},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || strings.TrimSpace(string(body)) != c.body {
			t.Errorf("%s %s = %d %s, want %d %s", c.method, c.path, resp.StatusCode, body, c.code, c.body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s Content-Type %q, want application/json", c.method, c.path, ct)
		}
	}
}

func TestExecuteRejectsBadRequests(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxCommandBytes = 4096 })
	cases := []struct {
		name, body string
		code       int
		field      string
	}{
		{"not JSON", `{"command": `, 422, ""},
		{"no command", `{"cmd": "ls"}`, 422, "command"},
		{"zero timeout", `{"command": "true", "timeout_seconds": 0}`, 422, "timeout_seconds"},
		{"negative timeout", `{"command": "true", "timeout_seconds": -3}`, 422, "timeout_seconds"},
		{"huge timeout", `{"command": "true", "timeout_seconds": 1e300}`, 422, "timeout_seconds"},
		{"env key with =", `{"command": "true", "env": {"A=B": "x"}}`, 422, "env"},
		{"env empty key", `{"command": "true", "env": {"": "x"}}`, 422, "env"},
		{"NUL in command", `{"command": "echo \u0000"}`, 422, "command"},
		{"too large", `{"command": "` + strings.Repeat("x", 5000) + `"}`, 413, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, raw := ts.post(t, "/execute", "application/json", []byte(c.body))
			if code != c.code {
				t.Fatalf("status %d (%s), want %d", code, raw, c.code)
			}
			if code != 422 {
				return
			}
			var v struct {
				Detail []struct {
					Loc []string `json:"loc"`
					Msg string   `json:"msg"`
				} `json:"detail"`
			}
			if err := json.Unmarshal(raw, &v); err != nil || len(v.Detail) != 1 || v.Detail[0].Msg == "" {
				t.Fatalf("422 body %s, want FastAPI's detail list", raw)
			}
			if c.field != "" && (len(v.Detail[0].Loc) != 2 || v.Detail[0].Loc[1] != c.field) {
				t.Fatalf("422 loc %v, want [body %s]", v.Detail[0].Loc, c.field)
			}
		})
	}
}

func TestExecuteResultFields(t *testing.T) {
	ts := startServer(t, nil)
	t.Run("exit code and streams", func(t *testing.T) {
		res := ts.run(t, "echo out; echo err >&2; exit 42")
		if res.Stdout != "out\n" || res.Stderr != "err\n" || res.ExitCode != 42 || res.TimedOut || res.Signal != 0 {
			t.Fatalf("got %+v", res)
		}
		if res.DurationMS <= 0 {
			t.Fatalf("duration_ms %v, want > 0", res.DurationMS)
		}
	})
	t.Run("cpu_ms extension", func(t *testing.T) {
		// A busy loop in a subshell the command waits for counts; a
		// command that sleeps costs next to nothing, however long it runs.
		busy := ts.run(t, `(i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done); true`)
		if busy.ExitCode != 0 || busy.CPUMS < 20 || busy.CPUMS > busy.DurationMS*float64(runtime.NumCPU())+50 {
			t.Fatalf("busy loop: cpu_ms %v (duration_ms %v, exit %d), want at least 20 and at most what its wall time allows", busy.CPUMS, busy.DurationMS, busy.ExitCode)
		}
		idle := ts.run(t, "sleep 0.5")
		if idle.ExitCode != 0 || idle.DurationMS < 500 || idle.CPUMS >= busy.CPUMS || idle.CPUMS > 100 {
			t.Fatalf("sleep 0.5: cpu_ms %v (duration_ms %v), want far less than its wall time and the busy loop's %v", idle.CPUMS, idle.DurationMS, busy.CPUMS)
		}
	})
	t.Run("env extension", func(t *testing.T) {
		res := ts.exec(t, map[string]any{"command": `printf '%s|%s' "$GREETING" "$HOME"`, "env": map[string]string{"GREETING": "hi there", "HOME": "/elsewhere"}})
		if res.Stdout != "hi there|/elsewhere" {
			t.Fatalf("stdout %q, want the request's env to be added and to win", res.Stdout)
		}
	})
	t.Run("signal", func(t *testing.T) {
		res := ts.run(t, "echo partial; kill -TERM $$")
		if res.ExitCode != 143 || res.Signal != 15 || res.TimedOut || res.Stdout != "partial\n" ||
			!strings.HasSuffix(res.Stderr, "[sandbox-server: command killed by signal 15 (terminated)]\n") {
			t.Fatalf("got %+v, want exit 143, signal 15, a note and the output", res)
		}
	})
	t.Run("timeout keeps earlier output", func(t *testing.T) {
		// 5 s: time for a busy machine's shell to print first.
		res := ts.exec(t, map[string]any{"command": "echo before; echo warn >&2; sleep 30; echo after", "timeout_seconds": 5})
		if res.ExitCode != 124 || !res.TimedOut || res.Signal != 0 || res.Stdout != "before\n" ||
			!strings.HasPrefix(res.Stderr, "warn\n[sandbox-server: command timed out after 5s") {
			t.Fatalf("got %+v, want exit 124, timed_out, the output before the deadline and a note", res)
		}
	})
	t.Run("runs in base dir with sh", func(t *testing.T) {
		res := ts.run(t, "pwd; echo a && echo b | tr b c")
		if res.Stdout != ts.Base+"\na\nc\n" {
			t.Fatalf("stdout %q", res.Stdout)
		}
	})
	t.Run("own process group", func(t *testing.T) {
		res := ts.run(t, "cut -d' ' -f5 /proc/$$/stat; echo $$") // field 5: the process group
		f := strings.Fields(res.Stdout)
		if len(f) != 2 || f[0] != f[1] {
			t.Fatalf("pgid/pid = %q, want the shell to lead its own group", res.Stdout)
		}
		if f[0] == fmt.Sprint(os.Getpid()) {
			t.Fatalf("command shares the server's process group")
		}
	})
}

func TestDeadlineKillsBackgroundedGrandchildren(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.ExecTimeout = time.Second }) // the server default
	tok := sleepToken()
	t.Cleanup(func() { killArg(tok) })
	cmd := fmt.Sprintf("sleep %[1]s & (sleep %[1]s &) ; sh -c 'sleep %[1]s' & nohup sleep %[1]s >/dev/null 2>&1 & echo started; sleep %[1]s", tok)
	res := ts.run(t, cmd)
	if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "started\n" {
		t.Fatalf("got %+v, want a timeout after 'started'", res)
	}
	waitGone(t, tok)
}

func TestPipeHeldByBackgroundChildDoesNotHang(t *testing.T) {
	ts := startServer(t, nil)
	tok := sleepToken()
	t.Cleanup(func() { killArg(tok) })
	done := make(chan wire.ExecuteResponse, 1)
	go func() {
		done <- ts.exec(t, map[string]any{"command": "sleep " + tok + " & echo leader done", "timeout_seconds": 600})
	}()
	select {
	case res := <-done:
		if res.ExitCode != 0 || res.Stdout != "leader done\n" || res.TimedOut {
			t.Fatalf("got %+v", res)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("request still waiting on a background child's pipe after 60 s")
	}
}

func TestClientCancelKillsCommand(t *testing.T) {
	ts := startServer(t, nil)
	tok := sleepToken()
	t.Cleanup(func() { killArg(tok) })
	ctx, cancel := context.WithCancel(t.Context())
	body := mustJSON(t, map[string]any{"command": fmt.Sprintf("sleep %[1]s & sleep %[1]s", tok)})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/execute", bytes.NewReader(body))
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(running(withArg(tok))) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("command did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("request succeeded after cancel")
	}
	waitGone(t, tok)
	// The server logs the command as ended with the client gone.
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(ts.Logs.String(), `"client_gone":true`) {
		if time.Now().After(deadline) {
			t.Fatalf("no exec log line with client_gone:true in %s", ts.Logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConcurrentExecutes(t *testing.T) {
	ts := startServer(t, nil)
	tok := sleepToken()
	t.Cleanup(func() { killArg(tok) })

	// A long command holds one request open...
	longCtx, stopLong := context.WithCancel(t.Context())
	defer stopLong()
	longDone := make(chan struct{})
	go func() {
		defer close(longDone)
		req, _ := http.NewRequestWithContext(longCtx, http.MethodPost, ts.URL+"/execute",
			bytes.NewReader(mustJSON(t, map[string]string{"command": "sleep " + tok})))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for len(running(withArg(tok))) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	// ...while the health check answers and 20 commands run side by side.
	if code, _ := ts.get(t, "/"); code != 200 {
		t.Fatalf("GET / = %d during a long command", code)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for i := range 20 {
		wg.Go(func() {
			res := ts.run(t, fmt.Sprintf("sleep 0.3; echo %d; echo e%d >&2", i, i))
			if res.Stdout != fmt.Sprintf("%d\n", i) || res.Stderr != fmt.Sprintf("e%d\n", i) || res.ExitCode != 0 {
				errs <- fmt.Sprintf("command %d: %+v", i, res)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	select {
	case <-longDone:
		t.Fatal("the long command ended on its own")
	default:
	}
	stopLong()
	<-longDone
	waitGone(t, tok)
}

func TestOutputCapAndEncoding(t *testing.T) {
	const share = 4096
	ts := startServer(t, func(c *Config) { c.MaxOutputBytes = share })
	cases := map[string]string{
		"ascii":    "head -c 100000 /dev/zero | tr '\\0' a",
		"quotes":   "head -c 100000 /dev/zero | tr '\\0' '\"'",
		"controls": "head -c 100000 /dev/zero | tr '\\0' '\\001'",
		"invalid":  "head -c 100000 /dev/zero | tr '\\0' '\\377'",
		"multi":    "yes 'héllo wörld €' | head -c 100000",
	}
	for name, cmd := range cases {
		t.Run(name, func(t *testing.T) {
			code, raw := ts.post(t, "/execute", "application/json", mustJSON(t, map[string]string{"command": cmd + "; " + cmd + " >&2"}))
			if code != 200 {
				t.Fatalf("status %d", code)
			}
			if !utf8.Valid(raw) || !json.Valid(raw) {
				t.Fatalf("response is not valid UTF-8 JSON")
			}
			if len(raw) > 2*share {
				t.Fatalf("response %d bytes, want at most %d", len(raw), 2*share)
			}
			var res wire.ExecuteResponse
			_ = json.Unmarshal(raw, &res)
			if !res.StdoutTruncated || !res.StderrTruncated {
				t.Fatalf("truncation flags %v %v, want both", res.StdoutTruncated, res.StderrTruncated)
			}
			if !strings.Contains(res.Stdout, "\n[sandbox-server: stdout truncated: ") || !strings.Contains(res.Stdout, "of 100000 bytes dropped]") {
				t.Fatalf("stdout tail %q, want a truncation marker", res.Stdout[max(0, len(res.Stdout)-100):])
			}
			if len(res.Stdout) < 300 {
				t.Fatalf("kept only %d bytes of stdout", len(res.Stdout))
			}
		})
	}
	t.Run("under the cap is untouched", func(t *testing.T) {
		res := ts.run(t, "printf 'a\\tb\\001<&>'")
		if res.Stdout != "a\tb\x01<&>" || res.StdoutTruncated {
			t.Fatalf("got %+v", res)
		}
	})
}

func TestDefaultCapFitsSDKLimit(t *testing.T) {
	ts := startServer(t, nil) // the default 8 MiB share
	cmd := `head -c 30000000 /dev/zero | tr '\0' '\001'`
	code, raw := ts.post(t, "/execute", "application/json", mustJSON(t, map[string]string{"command": cmd + "; " + cmd + " >&2"}))
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	if len(raw) > 16<<20 {
		t.Fatalf("response %d bytes exceeds the SDK's 16 MiB limit", len(raw))
	}
	if len(raw) < 15<<20 {
		t.Fatalf("response %d bytes: the shares are not used", len(raw))
	}
}

func TestCommandEnvironmentDefaults(t *testing.T) {
	home := filepath.Join(t.TempDir(), "fallback")
	ts := startServer(t, func(c *Config) {
		c.Environ = []string{"HOME=/proc/not-writable", "GOCACHE=relative/path", "LANG=C"}
		c.FallbackHome = home
	})
	res := ts.run(t, `for v in HOME GOPATH GOMODCACHE GOCACHE; do eval d=\$$v; test -w "$d" || echo "$v=$d not writable"; done; echo "$HOME $GOPATH $GOMODCACHE $GOCACHE $LANG"; echo "$PATH"`)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("stdout %q", res.Stdout)
	}
	want := fmt.Sprintf("%[1]s %[1]s/go %[1]s/go/pkg/mod %[1]s/.cache/go-build C", home)
	if lines[0] != want || lines[1] != defaultPath {
		t.Fatalf("env %q, want %q and PATH %s", lines, want, defaultPath)
	}
}

func TestLogLines(t *testing.T) {
	ts := startServer(t, nil)
	ts.run(t, "echo "+strings.Repeat("z", 500))
	var sawExec, sawReq bool
	for _, line := range strings.Split(strings.TrimSpace(ts.Logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		switch m["msg"] {
		case "exec":
			sawExec = true
			if c := m["command"].(string); len(c) > 210 || m["exit_code"] != 0.0 || m["stdout_bytes"] != 501.0 || m["duration_ms"] == nil {
				t.Errorf("exec log %v", m)
			}
		case "request":
			sawReq = m["path"] == "/execute" && m["status"] == 200.0 && m["duration_ms"] != nil
		}
	}
	if !sawExec || !sawReq {
		t.Fatalf("missing exec or request log line in %s", ts.Logs.String())
	}
}

// TestExecuteLongCommand: a command longer than Linux allows one argument
// to be (128 KiB, MAX_ARG_STRLEN) runs like any other, through a private
// script file outside the base directory that is gone after the run.
func TestExecuteLongCommand(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the server puts the script file
	ts := startServer(t, nil)
	filler := "; : " + strings.Repeat("a", 1<<20) + "\n"
	t.Run("output, env and exit code", func(t *testing.T) {
		res := ts.exec(t, map[string]any{
			"command": `echo start; ls -A; echo "$GREETING"` + filler + "echo end >&2; exit 7",
			"env":     map[string]string{"GREETING": "hi"},
		})
		if res.Stdout != "start\nhi\n" || res.Stderr != "end\n" || res.ExitCode != 7 {
			t.Fatalf("got stdout %q stderr %.300q exit %d; want start, an empty base dir, hi, end on stderr, exit 7", res.Stdout, res.Stderr, res.ExitCode)
		}
	})
	t.Run("own process group and timeout", func(t *testing.T) {
		res := ts.exec(t, map[string]any{
			"command": `cut -d' ' -f5 /proc/$$/stat; echo $$` + filler + "sleep 30; echo after",
			// Time for a busy machine's shell to print both lines first
			// (0.5 s was not: one line or none came).
			"timeout_seconds": 10,
		})
		f := strings.Fields(res.Stdout)
		if len(f) != 2 || f[0] != f[1] || !res.TimedOut || res.ExitCode != 124 {
			t.Fatalf("got %+v, want the shell to lead its own group and the deadline to kill it", res)
		}
	})
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("command file left behind: %s", e.Name())
	}
}
