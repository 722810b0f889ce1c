package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/testmodules"
)

func noEnv(string) (string, bool) { return "", false }

func TestRunRefusesBadFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"no allowlist":      {"--mod-cache=/tmp/m"},
		"bad pattern":       {"--allow-modules=a/../b", "--mod-cache=/tmp/m"},
		"comma only":        {"--allow-modules=,", "--mod-cache=/tmp/m"},
		"no cache":          {"--allow-modules=example.com"},
		"relative cache":    {"--allow-modules=example.com", "--mod-cache=m"},
		"upstream off":      {"--allow-modules=example.com", "--mod-cache=/tmp/m", "--upstream=off"},
		"budget zero":       {"--allow-modules=example.com", "--mod-cache=/tmp/m", "--module-download-mb=0"},
		"extra argument":    {"--allow-modules=example.com", "--mod-cache=/tmp/m", "serve"},
		"unknown flag":      {"--allow=example.com"},
		"negative shutdown": {"--allow-modules=example.com", "--mod-cache=/tmp/m", "--shutdown-grace=-1s"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, io.Discard, &stderr, noEnv); code != 2 {
			t.Errorf("%s %q: exit %d, want 2; stderr:\n%s", name, args, code, stderr.String())
		}
	}
}

func TestRunHelpShowsTheRefusal(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, io.Discard, &stderr, noEnv); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, want := range []string{"--allow-modules", "add a pattern", "manifests/modproxy"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestFlagsDefaultFromTheEnvironment(t *testing.T) {
	env := map[string]string{"MODPROXY_ALLOW_MODULES": "example.com/*", "GOMODCACHE": "/m", "GOPROXY": "file:///p", "GOSUMDB": "off"}
	cfg := defaults()
	fs := newFlagSet()
	registerFlags(fs, &cfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if cfg.Allow != "example.com/*" || cfg.ModCache != "/m" || cfg.Upstream != "file:///p" || cfg.SumDB != "off" {
		t.Errorf("from the environment: %+v", cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
}

// TestServesTheAllowlistThroughTheGoCommand runs the server in-process
// with a directory of modules as its upstream (GOPROXY=file://) and the
// real go command on both sides: a client downloads an allowed module
// through it, and is refused another with the message naming the pattern
// to add.
func TestServesTheAllowlistThroughTheGoCommand(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	upstream := t.TempDir()
	for _, m := range []string{"example.com/hello", "example.com/other"} {
		if err := testmodules.Write(upstream, m, "v1.0.0", map[string]string{"hello.go": "package hello\n\nfunc Hello() string { return \"hello\" }\n"}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	var stderr syncBuf
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--addr=127.0.0.1:0", "--allow-modules=example.com/hello", "--mod-cache=" + t.TempDir(),
			"--go=" + goCmd, "--upstream=file://" + upstream, "--sumdb=off"}, outW, &stderr, os.LookupEnv)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no serving line: %v; stderr:\n%s", err, stderr.String())
	}
	addr := line[strings.LastIndex(line, " ")+1 : len(line)-1]
	go func() { _, _ = io.Copy(io.Discard, outR) }()

	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()

	client := func(mod string) (string, error) {
		cmd := exec.Command(goCmd, "mod", "download", "-json", mod+"@v1.0.0")
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "GOPROXY=http://"+addr, "GOSUMDB=off", "GOFLAGS=-modcacherw", "GOMODCACHE="+t.TempDir(), "GOTOOLCHAIN=local", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := client("example.com/hello"); err != nil || !strings.Contains(out, `"Version": "v1.0.0"`) {
		t.Errorf("allowed module: %v\n%s\nserver:\n%s", err, out, stderr.String())
	}
	out, err := client("example.com/other")
	if err == nil {
		t.Fatalf("a module off the list was downloaded:\n%s", out)
	}
	if want := "add a pattern: example.com/other (modproxy --allow-modules, manifests/modproxy)"; !strings.Contains(out, want) {
		t.Errorf("refusal lacks %q:\n%s", want, out)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after cancel; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still serving 20 s after its context ended")
	}
}

func newFlagSet() *flag.FlagSet { return flag.NewFlagSet("modproxy", flag.ContinueOnError) }

// syncBuf is a bytes.Buffer safe for a writer and a concurrent reader.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
