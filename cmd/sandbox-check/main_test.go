package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// TestMain makes this test binary a sandbox's gate when a check starts it
// as one: with no sandbox-server beside it, the check's gate is the
// program itself, as it is for bin/sandbox-check without one (main calls
// local.ServeIfChild first).
// printSetupEnv makes this test binary print local.SetupCommand for its
// value and exit (TestSetupCommand runs a copy named sandbox-check).
const printSetupEnv = "SANDBOX_CHECK_TEST_PRINT_SETUP"

func TestMain(m *testing.M) {
	local.ServeIfChild()
	if name := os.Getenv(printSetupEnv); name != "" {
		fmt.Println(local.SetupCommand(name))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCheckThisHost runs the check for real. As root this host runs the
// local backend (the rest of the suite needs it), so every required
// protection is active and the exit status is 0. As another user the exit
// status follows the table (cgroups need the one-time setup), and the
// summary says what the user's sandboxes get.
func TestCheckThisHost(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), nil, &out, &errb)
	refused := strings.Contains(out.String(), "unavailable (required)")
	switch {
	case os.Geteuid() == 0 && code != 0:
		t.Fatalf("exit %d as root\n%s%s", code, out.String(), errb.String())
	case code != 0 && code != 1, refused != (code == 1):
		t.Fatalf("exit %d with a required protection unavailable: %v\n%s%s", code, refused, out.String(), errb.String())
	}
	for _, name := range []string{local.ProtNamespaces, local.ProtSeccomp, local.ProtNestedUserns, local.ProtCgroupMemory,
		local.ProtCgroupPids, local.ProtCgroupCPU, local.ProtDiskQuota, local.ProtHostUID} {
		if !strings.Contains(out.String(), "\n"+name+" ") {
			t.Errorf("no line for %s:\n%s", name, out.String())
		}
	}
	summary := fmt.Sprintf("\nAs %s (uid %d), sandboxes here get: ", userName(t), os.Geteuid())
	if got := strings.Contains(out.String(), summary); got != (os.Geteuid() != 0) {
		t.Errorf("summary %q shown: %v, want it only when not root:\n%s", summary, got, out.String())
	}
	if os.Geteuid() != 0 && refused && !strings.Contains(out.String(), "\nMissing: ") {
		t.Errorf("a required protection is unavailable, yet the summary names none missing:\n%s", out.String())
	}
}

func userName(t *testing.T) string {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// TestSetupQueries: --setup-needed and --missing answer on stdout and exit
// 0; --missing names exactly the table's unavailable required rows.
func TestSetupQueries(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--setup-needed"}, &out, &errb); code != 0 {
		t.Fatalf("--setup-needed: exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if out.Len() > 0 && line == "" {
			t.Errorf("--setup-needed printed an empty step:\n%q", out.String())
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"--missing", "--relax=disk"}, &out, &errb); code != 0 {
		t.Fatalf("--missing: exit %d\n%s%s", code, out.String(), errb.String())
	}
	var table bytes.Buffer
	run(context.Background(), []string{"--relax=disk"}, &table, &errb)
	var want []string
	for _, line := range strings.Split(table.String(), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.Contains(line, "unavailable (required)") {
			want = append(want, f[0])
		}
	}
	if got := strings.TrimSpace(out.String()); got != strings.Join(want, ",") {
		t.Errorf("--missing printed %q, the table has %q unavailable:\n%s", got, want, table.String())
	}
}

// TestSetupUserNeedsRoot: as another user the setup refuses and says it
// needs root (as root it would change the host: not tried here).
func TestSetupUserNeedsRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("as root --setup-user changes the host; this test checks the refusal a user other than root gets")
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--setup-user=" + userName(t)}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "needs root") {
		t.Errorf("exit %d, stderr %q; want 1 and a message that it needs root", code, errb.String())
	}
}

// TestSetupCommand: the command printed for root names a binary that
// outlives this run by its absolute path: this one (named sandbox-check,
// as make build names it), or one built from the checkout when go run
// built this in a temporary directory.
func TestSetupCommand(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sandbox-check")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), printSetupEnv+"=alice")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), "sudo "+bin+" --setup-user=alice"; got != want {
		t.Errorf("SetupCommand from %s = %q, want %q", bin, got, want)
	}
	if got := local.SetupCommand("alice"); !strings.HasPrefix(got, "sudo /") && !strings.HasPrefix(got, "go build -o bin/ ./cmd/sandbox-check && sudo bin/sandbox-check --setup-user=alice") {
		t.Errorf("SetupCommand from the test binary = %q: neither an absolute path nor a build first", got)
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

// TestCleanupCommand: --cleanup's flags, an absent directory (clean), a
// directory a backend's process holds (refused, naming the process,
// nothing removed) and one it empties and, with --remove, removes.
func TestCleanupCommand(t *testing.T) {
	ctx := context.Background()
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"--kill"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "go with --cleanup") {
		t.Errorf("--kill alone: exit %d, %q; want 2 naming --cleanup", code, errb.String())
	}

	absent := filepath.Join(t.TempDir(), "absent")
	out.Reset()
	errb.Reset()
	if code := run(ctx, []string{"--cleanup", "--state-dir=" + absent}, &out, &errb); code != 0 {
		t.Errorf("--cleanup of an absent directory: exit %d: %s", code, errb.String())
	}

	// A half-made sandbox's directory, and a backend's hold on the
	// directory (its shared flock on users.lock), as New takes it.
	state := t.TempDir()
	half := filepath.Join(state, "sandboxes", "0123456789abcdef")
	if err := os.MkdirAll(filepath.Join(half, "app"), 0o700); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(state, "users.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	code := run(ctx, []string{"--cleanup", "--state-dir=" + state}, &out, &errb)
	if want := fmt.Sprintf("process %d", os.Getpid()); code != 1 || !strings.Contains(errb.String(), want) || !strings.Contains(errb.String(), "Nothing was removed") {
		t.Errorf("--cleanup of a held directory: exit %d, %q; want 1 naming %s", code, errb.String(), want)
	}
	if _, err := os.Stat(half); err != nil {
		t.Fatalf("the refused cleanup removed a sandbox directory: %v", err)
	}
	lock.Close()

	out.Reset()
	errb.Reset()
	if code := run(ctx, []string{"--cleanup", "--remove", "--state-dir=" + state}, &out, &errb); code != 0 {
		t.Fatalf("--cleanup --remove: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "1 sandboxes removed") {
		t.Errorf("--cleanup --remove said %q; want 1 sandbox removed", out.String())
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("--remove left the state directory: %v", err)
	}
}
