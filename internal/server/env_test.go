package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoTelemetryMode: Config.GoTelemetry sets the mode the go command
// itself reads for the commands (GOTELEMETRY in the environment sets
// none), where `go telemetry` writes it under the commands' HOME, and a
// mode already there stays.
func TestGoTelemetryMode(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GOTELEMETRY=local"}
	ts := startServer(t, func(c *Config) { c.Environ, c.GoTelemetry = env, "off" })
	if res := ts.run(t, "go env GOTELEMETRY"); strings.TrimSpace(res.Stdout) != "off" {
		t.Errorf("go env GOTELEMETRY = %q (%s); want off", res.Stdout, res.Stderr)
	}
	if res := ts.run(t, "go telemetry local && go version >/dev/null && go env GOTELEMETRY"); strings.TrimSpace(res.Stdout) != "local" {
		t.Fatalf("a command's go telemetry local: %q (%s)", res.Stdout, res.Stderr)
	}
	// A new server on the same HOME (a sandbox's server restarting)
	// keeps the mode a command set.
	ts = startServer(t, func(c *Config) { c.Environ, c.GoTelemetry = env, "off" })
	if res := ts.run(t, "go env GOTELEMETRY"); strings.TrimSpace(res.Stdout) != "local" {
		t.Errorf("after a new server: go env GOTELEMETRY = %q; want the command's local kept", res.Stdout)
	}
	// Without the setting, nothing is written.
	bare := t.TempDir()
	startServer(t, func(c *Config) { c.Environ = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + bare} })
	if _, err := os.Stat(filepath.Join(bare, ".config")); err == nil {
		t.Errorf("a server without GoTelemetry wrote %s/.config", bare)
	}
}
