package local_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// The attacker battery: what a sandbox's commands do against its
// protections (kill or trace the server, call the kernel surface the
// filter refuses, reach the host's or another sandbox's files and
// processes, escape through symlinks, replace the server), each written
// once as a function that runs the attack against a session and returns
// its findings: the ways the protection failed, none when it held. The
// root tests fail with each finding (check, require); the rootless helper
// runs the same functions as an ordinary user and prints them for its
// parent (rootlesshelper_test.go).

// findings are the ways protections failed in one attack, one entry
// each.
type findings []string

func (f *findings) add(format string, args ...any) { *f = append(*f, fmt.Sprintf(format, args...)) }

// run executes req in s (Timeout 3 minutes unless set). A transport error
// is a finding, and the result nil.
func (f *findings) run(s *goruntime.Session, req goruntime.Request) *goruntime.Result {
	if req.Timeout == 0 {
		req.Timeout = 3 * time.Minute
	}
	res, err := s.Execute(context.Background(), req)
	if err != nil {
		f.add("execute %q: %v", req.Command, err)
		return nil
	}
	return res
}

// mustOK is run for a command that must exit 0; when it does not, that
// is a finding, and the result nil.
func (f *findings) mustOK(s *goruntime.Session, req goruntime.Request) *goruntime.Result {
	res := f.run(s, req)
	if res != nil && res.ExitCode != 0 {
		f.add("%q: exit %d, outcome %s\nstdout: %s\nstderr: %s", req.Command, res.ExitCode, res.Outcome, res.Stdout, res.Stderr)
		return nil
	}
	return res
}

// serverIntact reports whether the server answers within a short
// deadline and keep.txt (armAttacker) still holds "kept"; when not, that
// is a finding. after names the attack. It reads the file through the
// server rather than running a command: an attack then costs one command,
// not two (the attack functions end with a command of their own).
func (f *findings) serverIntact(s *goruntime.Session, after string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	data, err := s.ReadFile(ctx, "keep.txt")
	if err != nil {
		f.add("after %s: the next call failed: %v", after, err)
		return false
	}
	if string(data) != "kept" {
		f.add("after %s: keep.txt holds %q", after, data)
		return false
	}
	return true
}

// attack runs command, which may fail or be killed, and then checks that
// the server and the session's files survived it. When they did not,
// that is a finding, and the result nil: the session is lost, so the
// caller stops.
func (f *findings) attack(s *goruntime.Session, command string) *goruntime.Result {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.Execute(ctx, goruntime.Request{Command: command, Timeout: time.Minute})
	if err != nil {
		f.add("%q: %v", command, err)
		return nil
	}
	if !f.serverIntact(s, command) {
		return nil
	}
	return res
}

// check fails t with each finding.
func check(t testing.TB, f findings) {
	t.Helper()
	for _, line := range f {
		t.Error(line)
	}
}

// require fails t with the findings and stops it, if there are any.
func require(t testing.TB, f findings) {
	t.Helper()
	check(t, f)
	if len(f) > 0 {
		t.FailNow()
	}
}
