package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestNonRootNamesEveryMissingProtection: as an ordinary user (no cgroup
// delegation, no mount rights) the local backend lacks two required
// protections, and the refusal names both with their fixes, not only the
// first one found.
func TestNonRootNamesEveryMissingProtection(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the server as another user")
	}
	requireBwrap(t)
	if err := os.Chmod(filepath.Dir(serverBin), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.Chmod(home, 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(serverBin)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	cmd.Stdin = strings.NewReader("")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("mcp-server as uid 65534: %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{"2 required protections are unavailable", "disk quota unavailable", "--relax=disk", "cgroups unavailable"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("refusal does not say %q:\n%s", want, out)
		}
	}
	// The cgroups' fix is this host's: root's one-time setup for the user
	// on cgroup v1, systemd's delegation on v2.
	if !strings.Contains(string(out), "sudo sandbox-check --setup-user=nobody") && !strings.Contains(string(out), "Delegate=yes") {
		t.Errorf("refusal does not name the setup command (v1) or systemd's delegation (v2):\n%s", out)
	}
}
