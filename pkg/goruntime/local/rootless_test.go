package local_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// rootlessUID is the user the rootless test runs its backend as: a uid
// with no account on the host (the test gives it one in a mount
// namespace of its own) and no other use in the tests (cmd/mcp-server's
// run as 65534, without the setup, and may run at the same time).
// rootlessSubIDs is the first of the 65,536 subordinate uids and gids it
// is granted there: above the ranges useradd hands out.
const (
	rootlessUID    = 65533
	rootlessSubIDs = 1_800_000_000
)

// lineField is the number after word on out's line "word N", or -1.
func lineField(out, word string) int {
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), word+" "); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}

// TestRootlessLimits: a user other than root, after root's one-time
// setup (DelegateCgroups, sandbox-check --setup-user), gets sandboxes
// with the protections root's get, the disk quota as a memory disk. The
// backend runs in a process of uid 65533 (rootlessHelper), which reports
// what its limits did: a disk fill and a file fill end at the disk quota,
// a memory bomb at the memory limit, a fork bomb at the process limit,
// the TCP connections and listen queue
// are capped in the sandbox's network, and its devpts instance holds at
// most 32 ptys; and runs the attacker battery (rootlessBattery) in two
// sandboxes, each attack reported as held or with its findings.
func TestRootlessLimits(t *testing.T) {
	setup := time.Now()
	u := newAsUser(t, rootlessUID, "grs-rootless", rootlessSubIDs, true)
	hostile := filepath.Join(u.bin, "hostile")
	if err := os.WriteFile(hostile, buildHostileServer(t), 0o644); err != nil {
		t.Fatal(err)
	}
	// With subordinate ids the module proxy's socket takes another way
	// into the sandbox: the helper downloads a module when this host can.
	modules := moduleProxyProblem(t) == ""
	t.Logf("setup (binaries copied, the hostile server built, the seed shared): %s", time.Since(setup).Round(100*time.Millisecond))
	helper := func(mode string, subIDs bool) string {
		t.Helper()
		env := []string{"LOCAL_TEST_HOSTILE=" + hostile}
		if modules {
			env = append(env, "LOCAL_TEST_ROOTLESS_MODULES=1", "GOPROXY="+goEnv(t, "GOPROXY"))
		}
		cmd := u.command(mode, subIDs, env...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("the backend as uid %d (%s, subordinate ids: %v), %s:\n%s", rootlessUID, mode, subIDs, time.Since(start).Round(100*time.Millisecond), out)
		if err != nil {
			t.Fatalf("rootless helper: %v", err)
		}
		return string(out)
	}

	// Without subordinate ids, sandboxes run as the user.
	// A fresh sandbox's first go test runs the seed's test2json, copied
	// (without subordinate ids) or through a memory disk's overlay (with):
	// TestGoAwareFirstGoTestBuildsNoTest2json as the user.
	const seedsTest2json = "first go test: seed's test2json\n"
	out := helper("rootless-plain", false)
	if !strings.Contains(out, fmt.Sprintf("owner %d\n", rootlessUID)) {
		t.Errorf("without subordinate ids, a sandbox's file is not the user's (want owner %d)", rootlessUID)
	}
	if !strings.Contains(out, seedsTest2json) {
		t.Errorf("without subordinate ids, a fresh sandbox's first go test did not take the seed's test2json")
	}
	out = helper("rootless", true)
	if !strings.Contains(out, seedsTest2json) {
		t.Errorf("with subordinate ids, a fresh sandbox's first go test did not take the seed's test2json")
	}
	if owner := lineField(out, "owner"); owner < rootlessSubIDs || owner >= rootlessSubIDs+65536 {
		t.Errorf("with subordinate ids %d-%d, a sandbox's file belongs to uid %d", rootlessSubIDs, rootlessSubIDs+65535, owner)
	}
	if !strings.Contains(out, "user-write refused\n") {
		t.Errorf("with subordinate ids, the user's other processes may write a sandbox's file")
	}
	if modules && !strings.Contains(out, "modules ok\n") {
		t.Errorf("with subordinate ids, an allowlisted module did not come through the module proxy")
	}
	for _, want := range []string{"somaxconn 128", "ptys max=32", "tcp4 256 744 0", "tcp6 256 744 0",
		"attach ok", "disk 64 64 0", "disk " + string(goruntime.OutcomeDiskLimit), "inodes " + string(goruntime.OutcomeDiskLimit),
		"memory " + string(goruntime.OutcomeMemoryLimit), "processes " + string(goruntime.OutcomeProcessLimit)} {
		if !strings.Contains(out, want) {
			t.Errorf("the rootless sandbox did not report %q", want)
		}
	}
	checkBattery(t, out)
}

// checkBattery fails t for each finding the helper printed ("breach NAME:
// ...") and for each attack of rootlessBattery it did not report held.
func checkBattery(t *testing.T, out string) {
	t.Helper()
	held := map[string]bool{}
	breaches := map[string][]string{}
	for line := range strings.Lines(out) {
		line = strings.TrimSuffix(line, "\n")
		if name, ok := strings.CutPrefix(line, "held "); ok {
			held[name] = true
		} else if rest, ok := strings.CutPrefix(line, "breach "); ok {
			name, finding, _ := strings.Cut(rest, ": ")
			breaches[name] = append(breaches[name], finding)
		}
	}
	known := map[string]bool{}
	for _, a := range rootlessBattery() {
		known[a.name] = true
		for _, finding := range breaches[a.name] {
			t.Errorf("as uid %d, %s: %s", rootlessUID, a.name, finding)
		}
		if !held[a.name] && len(breaches[a.name]) == 0 {
			t.Errorf("as uid %d, the %s attack did not run", rootlessUID, a.name)
		}
	}
	for name, list := range breaches {
		if !known[name] {
			t.Errorf("as uid %d, an attack not in the battery, %s: %q", rootlessUID, name, list)
		}
	}
}

// shareSeed gives the helper the seed build caches of this machine's
// state directory (built once, by whichever test came first): it
// hard-links every complete one (copies across file systems) into seed,
// the helper's seed root. The helper then builds none: seed stays root's
// and read-only to it, so a build it would start (the extra seed's, when
// ours is not complete) fails at once, and is logged, instead of
// compiling the standard library beside the attacks.
func shareSeed(t *testing.T, seed string) {
	t.Helper()
	b, err := local.New(testOptions())
	if err != nil {
		t.Fatalf("local backend unavailable (run scripts/install-deps.sh): %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context()) // a seed build from scratch passed 15 min on a busy 2-CPU machine
	defer cancel()
	err = b.Prepare(ctx)
	// Close at once: it stops the extra seed's build that Prepare starts.
	if err := b.Close(context.Background()); err != nil {
		t.Errorf("close backend: %v", err)
	}
	if err != nil {
		t.Fatalf("prepare seed build cache: %v", err)
	}
	ours := filepath.Join(b.StateDir(), "seed")
	complete, err := filepath.Glob(filepath.Join(ours, "*", ".complete"))
	if err != nil || len(complete) == 0 {
		t.Fatalf("no complete seed in %s after Prepare (%v)", ours, err)
	}
	if err := os.Mkdir(seed, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range complete {
		src := filepath.Dir(c)
		if err := linkTree(src, filepath.Join(seed, filepath.Base(src))); err != nil {
			t.Fatalf("share the seed %s: %v", src, err)
		}
	}
}

// linkTree makes dst a tree of directories like src's holding hard links
// to src's files, or copies where src is on another file system.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.Mkdir(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		if err := os.Link(p, target); !errors.Is(err, syscall.EXDEV) {
			return err
		}
		return copyFile(p, target, 0o444)
	})
}

func copyExecutable(t *testing.T, src, dst string) {
	t.Helper()
	if err := copyFile(src, dst, 0o755); err != nil {
		t.Fatal(err)
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// goEnv is the go command's setting name here.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}
