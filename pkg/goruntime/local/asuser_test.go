package local_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// asUser is what a test needs to run the backend as a user other than
// root, in a helper process (a copy of this test binary): the user's
// cgroups delegated (root's one-time setup), the test binary and the
// servers where the user can run them, a HOME closed to others holding
// its state directory, and files that give the user an account and
// subordinate ids in a mount namespace of the helper's own (the host's
// stay as they are). Those files are layered over the whole of /etc
// (a read-only overlay), not bound over /etc/passwd and /etc/subuid one
// by one: a file bound in another mount namespace is unmounted there
// when the host replaces it (useradd, adduser and vipw rename a new
// /etc/passwd over the old one), and the helper then had no account
// ("newuidmap: Cannot determine your user name") whenever someone added
// a user on a shared machine while it ran.
type asUser struct {
	uid                   int
	bin, home, state, etc string
}

// newAsUser sets up uid, called name, with the 65,536 subordinate ids
// from firstSubID (granted when the helper asks for them). seed shares
// this machine's seed build cache with it (shareSeed); without, its
// backend builds none and opens no sandbox quickly.
func newAsUser(t *testing.T, uid int, name string, firstSubID int, seed bool) *asUser {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to delegate cgroups and to run the backend as another user")
	}
	// The delegation stays, as root's one-time setup for a user does
	// (until reboot): removing it at the end took it from under another
	// run of the same test on the machine, whose next sandbox then had
	// no cgroup ("permission denied"). The groups left are empty.
	if _, err := local.DelegateCgroups(uid, uid); err != nil {
		t.Fatalf("delegate cgroups to uid %d: %v", uid, err)
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // TempDir makes both 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	u := &asUser{uid: uid, bin: filepath.Join(dir, "bin"), home: filepath.Join(dir, "home"), etc: filepath.Join(dir, "etc")}
	u.state = filepath.Join(u.home, "state")
	for _, d := range []string{u.bin, u.etc} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, src := range []string{os.Args[0], serverPath, filepath.Join(filepath.Dir(serverPath), "sandbox-processapi")} {
		copyExecutable(t, src, filepath.Join(u.bin, filepath.Base(src)))
	}
	for _, d := range []string{u.home, u.state} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	if seed {
		shareSeed(t, filepath.Join(u.state, "seed"))
	}
	if err := os.Chmod(u.home, 0o700); err != nil {
		t.Fatal(err)
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	passwd = fmt.Appendf(passwd, "%s:x:%d:%d::/nonexistent:/usr/sbin/nologin\n", name, uid, uid)
	// One layer for each grant: etc/subids grants the subordinate ids,
	// etc/none grants none.
	for grants, subids := range map[string][]byte{
		"subids": fmt.Appendf(nil, "%s:%d:65536\n", name, firstSubID),
		"none":   nil,
	} {
		layer := filepath.Join(u.etc, grants)
		if err := os.Mkdir(layer, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, body := range map[string][]byte{"passwd": passwd, "subuid": subids, "subgid": subids} {
			if err := os.WriteFile(filepath.Join(layer, file), body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return u
}

// command is the helper process running mode as the user, with
// subordinate ids or none, its HOME and state directory the user's, env
// added to its environment.
func (u *asUser) command(mode string, subIDs bool, env ...string) *exec.Cmd {
	grants := "none"
	if subIDs {
		grants = "subids"
	}
	wrap := `mount -t overlay -o "lowerdir=$1:/etc" overlay /etc && shift && exec "$@"`
	id := strconv.Itoa(u.uid)
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", wrap, "wrap", filepath.Join(u.etc, grants),
		"setpriv", "--reuid="+id, "--regid="+id, "--clear-groups", "--", filepath.Join(u.bin, filepath.Base(os.Args[0])), "-test.run=^$")
	cmd.Dir = u.home
	cmd.Env = append([]string{helperEnv + "=" + mode, "LOCAL_TEST_SERVER=" + filepath.Join(u.bin, "sandbox-server"),
		"LOCAL_TEST_STATE_DIR=" + u.state, "HOME=" + u.home, "PATH=" + os.Getenv("PATH")}, env...)
	return cmd
}

// subIDRootOf is the directory in /tmp the backend of uid keeps for its
// sandboxes' own ids.
func subIDRootOf(uid int) string {
	return filepath.Join("/tmp", "go-runtime-sandbox-"+strconv.Itoa(uid))
}
