package local_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// squatUID is the user TestSubIDRootSquatted runs its backend as: a uid
// with no account on the host and no other use in the tests (the rootless
// test's is 65533, and it may run at the same time: its directory in /tmp
// must stay free).
const squatUID = 65531

// TestSubIDRootSquatted: a user with subordinate ids, whose
// /tmp/go-runtime-sandbox-<uid> another local user made first (/tmp is
// everyone's, and the name is predictable), must not get sandboxes that
// quietly run as its own uid: New refuses, naming the directory, as the
// host-uid row's fix says (remove it, or relax Options.Relax.HostUID).
// Without the refusal any local user can switch off another user's
// per-sandbox host uids by making one directory.
func TestSubIDRootSquatted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make another user's directory and to run the backend as a user")
	}
	groups, err := local.DelegateCgroups(squatUID, squatUID)
	if err != nil {
		t.Fatalf("delegate cgroups to uid %d: %v", squatUID, err)
	}
	t.Cleanup(func() {
		for _, g := range groups {
			_ = os.Remove(g)
		}
	})
	squat := filepath.Join("/tmp", "go-runtime-sandbox-"+strconv.Itoa(squatUID))
	if err := os.RemoveAll(squat); err != nil {
		t.Fatal(err)
	}
	// Another local user (nobody) makes it first, open to all.
	if err := os.Mkdir(squat, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(squat) })
	if err := os.Chmod(squat, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(squat, 65534, 65534); err != nil {
		t.Fatal(err)
	}

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
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, squatUID, squatUID); err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join(dir, "etc")
	if err := os.Mkdir(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	passwd = fmt.Appendf(passwd, "grs-squat:x:%d:%d::/nonexistent:/usr/sbin/nologin\n", squatUID, squatUID)
	if err := os.WriteFile(filepath.Join(etc, "passwd"), passwd, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "subids"), fmt.Appendf(nil, "grs-squat:%d:65536\n", rootlessSubIDs+65536), 0o644); err != nil {
		t.Fatal(err)
	}

	// As in TestRootlessLimits: the user has an account and subordinate
	// ids in a mount namespace of the helper's own.
	wrap := `mount --bind "$1/passwd" /etc/passwd && mount --bind "$1/subids" /etc/subuid && mount --bind "$1/subids" /etc/subgid && shift && exec "$@"`
	id := strconv.Itoa(squatUID)
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", wrap, "wrap", etc,
		"setpriv", "--reuid="+id, "--regid="+id, "--clear-groups", "--", filepath.Join(bin, filepath.Base(os.Args[0])), "-test.run=^$")
	cmd.Dir = state
	cmd.Env = []string{helperEnv + "=subid-squat", "LOCAL_TEST_SERVER=" + filepath.Join(bin, "sandbox-server"),
		"LOCAL_TEST_STATE_DIR=" + state, "HOME=" + state, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	t.Logf("the backend as uid %d with %s made by uid 65534:\n%s", squatUID, squat, out)
	if err != nil {
		t.Fatalf("squat helper: %v", err)
	}
	switch {
	case strings.Contains(string(out), "new ok"):
		t.Errorf("New accepted a backend whose sandboxes run as the user's own uid because another user made %s first", squat)
	case !strings.Contains(string(out), "new refused") || !strings.Contains(string(out), squat):
		t.Errorf("New did not refuse naming %s", squat)
	}
}

// squatHelper is the helper mode subid-squat: New as the user, and what
// came of it.
func squatHelper(ctx context.Context, opts local.Options) int {
	b, err := local.New(opts)
	if err != nil {
		fmt.Printf("new refused: %v\n", err)
		return 0
	}
	defer b.Close(ctx)
	fmt.Println("new ok")
	return 0
}
