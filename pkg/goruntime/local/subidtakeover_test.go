package local_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// takeoverUID is the user TestSubIDRootTakenOver runs its backend as (no
// other test uses it; see squatUID).
const takeoverUID = 65530

// TestSubIDRootTakenOver: /tmp/go-runtime-sandbox-<uid> goes away while
// the user's backend runs (a /tmp cleaner, the user's own rm) and another
// local user makes it again. The backend's next sandbox must not take its
// uid lease, its lock or its disk's mount point from the other user's
// directory: from there the other user can delete leases and hand a live
// sandbox's host uid to the next one, or swap the mount point for a
// symlink the host follows. Either Open refuses, or the new sandbox gets
// a uid of its own and the user leaves nothing in the other user's
// directory.
func TestSubIDRootTakenOver(t *testing.T) {
	u := newAsUser(t, takeoverUID, "grs-takeover", rootlessSubIDs+2*65536, true)
	root := subIDRootOf(takeoverUID)
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	cmd := u.command("subid-takeover", true)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if sc.Text() == "ready" {
			break
		}
	}
	// The directory goes, and uid 65534 makes it again, open to all.
	if err := os.RemoveAll(root); err != nil {
		t.Errorf("remove %s: %v", root, err)
	}
	for _, d := range []string{root, filepath.Join(root, "disk")} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprintln(stdin)
	stdin.Close()
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	t.Logf("the backend as uid %d, %s taken over by uid 65534 between two opens:\n%s%s", takeoverUID, root, out.String(), stderr.String())
	if err != nil {
		t.Fatalf("takeover helper: %v", err)
	}
	a, b := lineField(out.String(), "owner-a"), lineField(out.String(), "owner-b")
	if a < 0 {
		t.Fatal("the first sandbox reported no owner")
	}
	if b == a {
		t.Errorf("two live sandboxes run as host uid %d: the second took its lease from a directory uid 65534 made", a)
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if fi, err := os.Lstat(filepath.Join(root, e.Name())); err == nil && int(fi.Sys().(*syscall.Stat_t).Uid) == takeoverUID {
			t.Errorf("the backend made %s in a directory uid 65534 made", e.Name())
		}
	}
}

// takeoverHelper is the helper mode subid-takeover: open a sandbox, print
// whose its files are ("owner-a UID"), print "ready", wait for a line on
// stdin, open another and print "owner-b UID", or "open-b refused: ...".
func takeoverHelper(ctx context.Context, opts local.Options) int {
	opts.WarmPool = -1
	b, err := local.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "takeover helper: new:", err)
		return 1
	}
	defer b.Close(context.Background())
	owner := func(s *goruntime.Session) int {
		if _, err := s.Execute(ctx, goruntime.Request{Command: "echo sandbox > owned.txt"}); err != nil {
			fmt.Fprintln(os.Stderr, "takeover helper:", err)
			return -1
		}
		fi, err := os.Stat(filepath.Join(s.Sandbox().(*local.Sandbox).Dir(), "app", "owned.txt"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "takeover helper:", err)
			return -1
		}
		return int(fi.Sys().(*syscall.Stat_t).Uid)
	}
	sa, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "takeover helper: open:", err)
		return 1
	}
	defer sa.Close(context.Background())
	fmt.Println("owner-a", owner(sa))
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	sb, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		fmt.Println("open-b refused:", err)
		return 0
	}
	defer sb.Close(context.Background())
	fmt.Println("owner-b", owner(sb))
	return 0
}
