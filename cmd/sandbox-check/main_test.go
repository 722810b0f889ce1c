package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// TestCheckThisHost runs the check for real: this host runs the local
// backend (the rest of the suite needs it), so every required protection
// is active and the exit status is 0.
func TestCheckThisHost(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), nil, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, name := range []string{local.ProtNamespaces, local.ProtSeccomp, local.ProtNestedUserns, local.ProtCgroupMemory,
		local.ProtCgroupPids, local.ProtCgroupCPU, local.ProtDiskQuota, local.ProtHostUID} {
		if !strings.Contains(out.String(), "\n"+name+" ") {
			t.Errorf("no line for %s:\n%s", name, out.String())
		}
	}
	if strings.Contains(out.String(), "unavailable (required)") {
		t.Errorf("a required protection is unavailable, yet exit 0:\n%s", out.String())
	}
}

// TestCheckRefuses: without bubblewrap the backend cannot run; the check
// says so, prints the fix and exits 1.
func TestCheckRefuses(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--bwrap=/nonexistent/bwrap"}, &out, &errb)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out.String())
	}
	for _, want := range []string{"unavailable (required)", "fix:", "install-deps.sh", "refuses"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCheckRelaxed: relaxed protections are reported as such.
func TestCheckRelaxed(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--relax=seccomp,disk"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, name := range []string{local.ProtSeccomp, local.ProtDiskQuota} {
		if !strings.Contains(out.String(), name+" ") || !strings.Contains(out.String(), "relaxed") {
			t.Errorf("%s not reported relaxed:\n%s", name, out.String())
		}
	}
}

func TestCheckBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--relax=everything"}, {"extra"}, {"--nope"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	var out, errb bytes.Buffer
	run(context.Background(), []string{"--relax=everything"}, &out, &errb)
	if !strings.Contains(errb.String(), "valid: seccomp, userns, hostuid, disk") {
		t.Errorf("bad --relax error does not list the valid names: %q", errb.String())
	}
}
