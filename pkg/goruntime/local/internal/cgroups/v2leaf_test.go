package cgroups

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// leafHelperEnv makes the test binary act as the user a cgroup v2 was
// delegated to (TestDelegatedV2MovesToLeaf); its value is the cgroup.
const leafHelperEnv = "CGROUPS_TEST_LEAF_HELPER"

// delegateeUID is the uid the helper runs as: a uid with no account.
const delegateeUID = 65532

func TestMain(m *testing.M) {
	if dir := os.Getenv(leafHelperEnv); dir != "" {
		os.Exit(leafHelper(dir))
	}
	if mode := os.Getenv(scopeHelperEnv); mode != "" {
		os.Exit(scopeHelper(mode))
	}
	if os.Getenv(zombieParentEnv) != "" {
		os.Exit(zombieParent())
	}
	os.Exit(m.Run())
}

// TestDelegatedV2MovesToLeaf: a user given a cgroup v2 the way systemd's
// Delegate=yes gives one (the directory and its cgroup.procs,
// cgroup.subtree_control and cgroup.threads chowned to it), with its own
// process inside, can enable a domain controller for children only after
// moving its processes to a leaf: enableControllers does that. Run against
// the real kernel on this host's cgroup2 mount, with a controller v1 does
// not hold (these machines mount memory and pids on v1, so the test takes
// whatever domain controller the unified hierarchy offers: hugetlb).
func TestDelegatedV2MovesToLeaf(t *testing.T) {
	unified := hugetlbUnified(t)
	dir := filepath.Join(unified, fmt.Sprintf("go-runtime-sandbox-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range []string{filepath.Join(dir, "sandbox"), filepath.Join(dir, hostLeaf), dir} {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("remove cgroup %s: %v", d, err)
			}
		}
	})
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control"), filepath.Join(dir, "cgroup.threads")} {
		if err := os.Chown(p, delegateeUID, delegateeUID); err != nil {
			t.Fatal(err)
		}
	}
	cg, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	bin := copyTestBinary(t)
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = []string{leafHelperEnv + "=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: delegateeUID, Gid: delegateeUID, Groups: []uint32{}},
		UseCgroupFD: true, CgroupFD: int(cg.Fd()), // born in the delegated cgroup, as under systemd-run --scope
	}
	out, err := cmd.CombinedOutput()
	t.Logf("as uid %d in %s:\n%s", delegateeUID, dir, out)
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	for _, want := range []string{
		"without the move: " + unix.EBUSY.Error(), // the rule the move is for
		"enabled: ok",
		"own cgroup: " + strings.TrimPrefix(filepath.Join(dir, hostLeaf), unified),
		"child has hugetlb files: true",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("helper did not report %q", want)
		}
	}
}

// leafHelper runs as the delegatee inside dir: it tries to enable
// hugetlb for dir's children as it is, then with enableControllers, and
// reports where it ended up and whether a child got the controller.
func leafHelper(dir string) int {
	if os.Geteuid() == 0 {
		fmt.Println("helper runs as root")
		return 2
	}
	err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+hugetlb"), 0o644)
	fmt.Println("without the move:", errors.Unwrap(err))
	if _, err := enableControllers(dir, []string{"hugetlb"}, []string{"cpu"}); err != nil {
		fmt.Println("enabled:", err)
		return 1
	}
	fmt.Println("enabled: ok")
	own, _ := ownCgroups()
	fmt.Println("own cgroup:", own[""])
	if !reportChild(dir) {
		return 1
	}
	return 0
}

// reportChild makes a child cgroup "sandbox" of dir, prints whether it
// got the hugetlb controller's files, and removes it; false when either
// step failed (printed).
func reportChild(dir string) bool {
	child := filepath.Join(dir, "sandbox")
	if err := os.Mkdir(child, 0o755); err != nil {
		fmt.Println("mkdir child:", err)
		return false
	}
	_, err := os.Stat(filepath.Join(child, "hugetlb.2MB.max"))
	fmt.Println("child has hugetlb files:", err == nil)
	if err := os.Remove(child); err != nil {
		fmt.Println("remove child:", err)
		return false
	}
	return true
}
