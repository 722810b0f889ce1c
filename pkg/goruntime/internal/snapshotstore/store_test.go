package snapshotstore

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func commit(t *testing.T, s Store, owner string, data string, ttl time.Duration) (Meta, error) {
	t.Helper()
	tmp, err := s.NewTemp()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.Write([]byte(data)); err != nil {
		tmp.Remove()
		return Meta{}, err
	}
	now := time.Now()
	return s.Commit(tmp, Meta{Owner: owner, Created: now, Expires: now.Add(ttl), Method: "copy"})
}

// A snapshot is found by its owner only; another owner's ID, a malformed
// one and a deleted one are ErrNotFound alike.
func TestOwnership(t *testing.T) {
	s := Store{Root: t.TempDir(), Quota: 1 << 20}
	m, err := commit(t, s, "alice", "files", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !ValidID(m.ID) || m.Bytes != 5 {
		t.Fatalf("commit: %+v", m)
	}
	if got, err := s.Open("alice", m.ID); err != nil || got.ID != m.ID {
		t.Fatalf("owner's open: %+v, %v", got, err)
	}
	for _, tc := range []struct{ owner, id string }{{"bob", m.ID}, {"alice", NewID()}, {"alice", "../" + m.ID}, {"alice", strings.ToUpper(m.ID)}} {
		if _, err := s.Open(tc.owner, tc.id); !errors.Is(err, ErrNotFound) {
			t.Errorf("open %q by %q: %v, want ErrNotFound", tc.id, tc.owner, err)
		}
	}
	if err := s.Delete("bob", m.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob deletes alice's: %v", err)
	}
	if l, _ := s.List("bob"); len(l) != 0 {
		t.Errorf("bob lists %+v", l)
	}
	if l, _ := s.List("alice"); len(l) != 1 {
		t.Errorf("alice lists %+v", l)
	}
	if err := s.Delete("alice", m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open("alice", m.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("open after delete: %v", err)
	}
}

// Past the quota a commit fails with ErrQuota and leaves nothing; expired
// snapshots free their room; a tar larger than the quota stops while it
// is written.
func TestQuotaAndTTL(t *testing.T) {
	s := Store{Root: t.TempDir(), Quota: 10}
	if _, err := commit(t, s, "alice", "123456", time.Hour); err != nil {
		t.Fatal(err)
	}
	_, err := commit(t, s, "bob", "123456", time.Hour)
	if !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "quota is 10 bytes") {
		t.Fatalf("second commit past the quota: %v", err)
	}
	if _, err := commit(t, s, "alice", "12345678901", time.Hour); !errors.Is(err, ErrQuota) {
		t.Fatalf("a tar over the quota on its own: %v", err)
	}
	if tmps, _ := os.ReadDir(filepath.Join(s.Root, "tmp")); len(tmps) != 0 {
		t.Errorf("left in tmp: %v", tmps)
	}
	short, err := commit(t, s, "carol", "1234", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := s.Open("carol", short.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("open past the TTL: %v", err)
	}
	if used, err := s.Prune(); err != nil || used != 6 {
		t.Errorf("prune: %d bytes held, %v; want 6", used, err)
	}
	if _, err := os.Stat(filepath.Join(s.ownerDir("carol"), short.ID)); !os.IsNotExist(err) {
		t.Errorf("an expired snapshot's files after prune: %v", err)
	}
}

// TestTarsBeingWrittenShareTheQuota: snapshots taken at once (two
// sandboxes' tars being written) cannot together hold more than the
// quota on the host's disk, though each alone is under it.
func TestTarsBeingWrittenShareTheQuota(t *testing.T) {
	s := Store{Root: t.TempDir(), Quota: 40 << 20}
	chunk := bytes.Repeat([]byte{'x'}, 1<<20)
	write := func(tmp *Temp, mib int) error {
		for range mib {
			if _, err := tmp.Write(chunk); err != nil {
				return err
			}
		}
		return nil
	}
	first, err := s.NewTemp()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Remove()
	if err := write(first, 30); err != nil {
		t.Fatalf("the first tar, 30 of 40 MiB: %v", err)
	}
	second, err := s.NewTemp()
	if err != nil {
		t.Fatal(err)
	}
	defer second.Remove()
	err = write(second, 20)
	if !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "being taken now") {
		t.Fatalf("a second tar of 20 MiB while the first holds 30 of the 40 MiB quota: got %v, want ErrQuota naming the snapshots being taken", err)
	}
	first.Remove()
	third, err := s.NewTemp()
	if err != nil {
		t.Fatal(err)
	}
	defer third.Remove()
	if err := write(third, 20); err != nil {
		t.Fatalf("20 MiB once the first tar is gone: %v", err)
	}
}

// A tree being extracted counts as a tar being written does.
func TestTreesBeingExtractedShareTheQuota(t *testing.T) {
	s := Store{Root: t.TempDir(), Quota: 40 << 20}
	chunk := bytes.Repeat([]byte{'x'}, 1<<20)
	first, err := s.NewTreeTemp()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Remove()
	first.Sink = io.Discard
	for range 30 {
		if _, err := first.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	second, err := s.NewTemp()
	if err != nil {
		t.Fatal(err)
	}
	defer second.Remove()
	for i := range 20 {
		if _, err = second.Write(chunk); err != nil {
			break
		}
		if i == 19 {
			t.Fatal("a tar of 20 MiB while a tree of 30 MiB is extracted under a 40 MiB quota: written, want ErrQuota")
		}
	}
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("a tar of 20 MiB while a tree of 30 MiB is extracted: %v, want ErrQuota", err)
	}
}

// One owner's snapshots hold at most its share; another owner still has
// room, and the owner gets its room back as its snapshots go.
func TestOwnerShare(t *testing.T) {
	s := Store{Root: t.TempDir(), Quota: 100, OwnerQuota: 40}
	a, err := commit(t, s, "alice", strings.Repeat("a", 30), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit(t, s, "alice", strings.Repeat("a", 20), time.Hour); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "share") {
		t.Fatalf("alice past her share: %v, want ErrQuota naming the share", err)
	}
	if _, err := commit(t, s, "bob", strings.Repeat("b", 40), time.Hour); err != nil {
		t.Fatalf("bob within his share while alice holds hers: %v", err)
	}
	if err := s.Delete("alice", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := commit(t, s, "alice", strings.Repeat("a", 40), time.Hour); err != nil {
		t.Fatalf("alice after deleting hers: %v", err)
	}
}

func commitTree(t *testing.T, s Store, owner string, hidden bool) (Meta, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		// Sealing makes every file root's: only a root backend keeps
		// snapshots as trees (local's layersSnapshots).
		t.Skip("trees are sealed as root's: root only")
	}
	tmp, err := s.NewTreeTemp()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp.Tree(), "f"), []byte("files"), 0o644); err != nil {
		t.Fatal(err)
	}
	hold := ""
	if hidden {
		if hold, err = tmp.Hold(); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	m, err := s.Commit(tmp, Meta{Owner: owner, Created: now, Expires: now.Add(time.Hour), Method: MethodOverlay, Hidden: hidden})
	if err != nil {
		t.Fatal(err)
	}
	return m, hold
}

// A tree stays while a sandbox layered on it lives, whatever happens to
// its snapshot, and goes with the last of them; a fork's hidden one is
// never listed, and goes once released with no sandbox on it.
func TestTreeKeptWhileUsed(t *testing.T) {
	live := map[string]bool{}
	s := Store{Root: t.TempDir(), Quota: 1 << 20, Live: func(id string) bool { return live[id] }}
	m, _ := commitTree(t, s, "alice", false)
	exists := func(m Meta) bool {
		_, err := os.Stat(filepath.Join(s.Tree(m), "f"))
		return err == nil
	}
	live["sb1"] = true
	if err := s.Use(m, "sb1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("alice", m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open("alice", m.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open after delete: %v, want ErrNotFound", err)
	}
	if used, err := s.Prune(); err != nil || !exists(m) || used == 0 {
		t.Fatalf("deleted while a sandbox is layered on it: tree kept %v, counted %d, %v; want kept and counted", exists(m), used, err)
	}
	live["sb1"] = false
	if _, err := s.Prune(); err != nil || exists(m) {
		t.Fatalf("after its last sandbox: tree kept %v, %v; want it gone", exists(m), err)
	}

	h, hold := commitTree(t, s, "alice", true)
	if l, _ := s.List("alice"); len(l) != 0 {
		t.Fatalf("a fork's snapshot is listed: %+v", l)
	}
	if _, err := s.Prune(); err != nil || !exists(h) {
		t.Fatalf("a held fork's snapshot: kept %v, %v; want kept", exists(h), err)
	}
	if err := s.Release(h, hold); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(); err != nil || exists(h) {
		t.Fatalf("a released fork's snapshot with no sandbox on it: kept %v, %v; want it gone", exists(h), err)
	}
}
