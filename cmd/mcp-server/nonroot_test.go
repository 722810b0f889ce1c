package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestNonRootNamesMissingProtection: as an ordinary user without root's
// one-time setup (no cgroup delegation) the local backend lacks one
// required protection, the cgroups, and the refusal names it with the
// fix; the disk quota is not among the missing (a user's sandboxes get a
// memory disk).
func TestNonRootNamesMissingProtection(t *testing.T) {
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
	if !strings.Contains(string(out), "cgroups unavailable") {
		t.Errorf("refusal does not say %q:\n%s", "cgroups unavailable", out)
	}
	if strings.Contains(string(out), "disk quota unavailable") {
		t.Errorf("refusal says the disk quota is unavailable to a user:\n%s", out)
	}
	// The cgroups' fix is this host's: root's one-time setup for the user
	// on cgroup v1, systemd's delegation on v2.
	// On v1 the command is one to paste as printed: sudo's PATH has no
	// sandbox-check, so an absolute path, or a build in a checkout first.
	setup := regexp.MustCompile(`sudo (/\S+/sandbox-check|bin/sandbox-check) --setup-user=nobody`)
	if !setup.Match(out) && !strings.Contains(string(out), "Delegate=yes") {
		t.Errorf("refusal does not name the setup command (v1, by a path sudo finds) or systemd's delegation (v2):\n%s", out)
	}
}
