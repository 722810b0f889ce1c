package local_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// rootlessUID is the user the rootless test runs its backend as: a uid
// with no account and no other use in the tests (cmd/mcp-server's run as
// 65534, without the setup, and may run at the same time).
const rootlessUID = 65533

// TestRootlessLimits: a user other than root, after root's one-time
// setup (DelegateCgroups, sandbox-check --setup-user), gets sandboxes
// with the limits root's get, the disk quota aside (relaxed here): a
// memory bomb ends at the memory limit, the TCP connections and listen
// queue are capped in the sandbox's network, and its devpts instance
// holds at most 32 ptys. The backend runs in a process of uid 65533.
func TestRootlessLimits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to delegate cgroups and to run the backend as another user")
	}
	groups, err := local.DelegateCgroups(rootlessUID, rootlessUID)
	if err != nil {
		t.Fatalf("delegate cgroups to uid %d: %v", rootlessUID, err)
	}
	t.Cleanup(func() {
		for _, g := range groups {
			// Empty once the helper's sandboxes are gone.
			if err := os.Remove(g); err != nil {
				t.Errorf("remove the delegated group: %v", err)
			}
		}
	})
	// The helper runs a copy of this test binary and the server from a
	// directory that uid can read, with a state directory of its own.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // TempDir makes both 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{os.Args[0], serverPath, filepath.Join(filepath.Dir(serverPath), "sandbox-processapi")} {
		copyExecutable(t, src, filepath.Join(bin, filepath.Base(src)))
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, rootlessUID, rootlessUID); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, filepath.Base(os.Args[0])), "-test.run=^$")
	cmd.Dir = home
	cmd.Env = []string{helperEnv + "=rootless", "LOCAL_TEST_SERVER=" + filepath.Join(bin, "sandbox-server"),
		"LOCAL_TEST_STATE_DIR=" + filepath.Join(home, "state"), "HOME=" + home, "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: rootlessUID, Gid: rootlessUID, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	t.Logf("the backend as uid %d:\n%s", rootlessUID, out)
	if err != nil {
		t.Fatalf("rootless helper: %v", err)
	}
	for _, want := range []string{"somaxconn 128", "ptys max=32", "tcp4 256 744 0", "tcp6 256 744 0", "memory " + string(goruntime.OutcomeMemoryLimit),
		"disk 64 64 0", "disk " + string(goruntime.OutcomeDiskLimit)} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the rootless sandbox did not report %q", want)
		}
	}
}

// rootlessHelper opens a sandbox with the disk quota relaxed (it needs
// root), a 256 MiB memory limit and a cap of 256 connections, and prints
// what its limits did.
func rootlessHelper(ctx context.Context, opts local.Options) int {
	if os.Geteuid() == 0 {
		fmt.Fprintln(os.Stderr, "rootless helper: running as root")
		return 2
	}
	opts.MemoryBytes = 256 << 20
	opts.DiskBytes, opts.DiskInodes = 64<<20, 10000
	opts.Connections = 256
	opts.WarmPool = -1
	b, err := local.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "new:", err)
		return 1
	}
	defer b.Close(context.Background())
	s, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer s.Close(context.Background())
	runs := []goruntime.Request{
		{Command: `echo somaxconn $(cat /proc/sys/net/core/somaxconn); echo ptys $(grep -o 'max=[0-9]*' /proc/self/mountinfo)`},
		{Files: []goruntime.File{{Path: "flood/main.go", Data: []byte(connFlood)}}, Command: "cd flood && go run main.go"},
		{Command: "dd if=/dev/zero of=/app/fill bs=1M count=100; echo disk $(df -m /app | tail -1 | tr -s ' ' | cut -d' ' -f2-4)"},
		{Command: "rm /app/fill; tail /dev/zero", Timeout: time.Minute},
	}
	for i, req := range runs {
		res, err := s.Execute(ctx, req)
		if err != nil {
			fmt.Fprintln(os.Stderr, "execute:", err)
			return 1
		}
		fmt.Print(res.Stdout)
		switch {
		case i == len(runs)-1:
			fmt.Println("memory", res.Outcome)
		case i == len(runs)-2:
			fmt.Println("disk", res.Outcome)
		case res.ExitCode != 0:
			fmt.Printf("%q: exit %d: %s\n", req.Command, res.ExitCode, res.Stderr)
		}
	}
	return 0
}

func copyExecutable(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
