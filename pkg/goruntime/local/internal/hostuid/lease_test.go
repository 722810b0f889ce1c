package hostuid

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestAllocRelease: each sandbox gets a uid of its own; a lease whose
// sandbox directory is gone, or whose sandbox alive reports dead, is taken
// over; Release ends only the lease the directory holds.
func TestAllocRelease(t *testing.T) {
	root := t.TempDir()
	leases := filepath.Join(root, "uids")
	dead := map[string]bool{}
	alive := func(dir string, _ time.Time) bool { return !dead[dir] }
	sandbox := func(name string) string {
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	a, b, c := sandbox("a"), sandbox("b"), sandbox("c")
	ua, err := Alloc(leases, a, 5000, 2, alive)
	if err != nil {
		t.Fatal(err)
	}
	ub, err := Alloc(leases, b, 5000, 2, alive)
	if err != nil {
		t.Fatal(err)
	}
	if ua == ub || ua < 5000 || ub > 5001 {
		t.Fatalf("uids %d and %d: want 5000 and 5001, one each", ua, ub)
	}
	if _, err := Alloc(leases, c, 5000, 2, alive); err == nil {
		t.Fatal("a third sandbox got a uid from a range of two")
	}
	dead[a] = true
	if uc, err := Alloc(leases, c, 5000, 2, alive); err != nil || uc != ua {
		t.Fatalf("Alloc after a's sandbox died = %d, %v; want its uid %d", uc, err, ua)
	}
	Release(leases, ua, a) // a no longer holds it: c's lease stays
	if _, err := os.Stat(filepath.Join(leases, strconv.Itoa(ua))); err != nil {
		t.Fatalf("Release by a former holder removed the new holder's lease: %v", err)
	}
	Release(leases, ub, b)
	if _, err := os.Stat(filepath.Join(leases, strconv.Itoa(ub))); !os.IsNotExist(err) {
		t.Fatalf("Release left b's lease: %v", err)
	}
}
