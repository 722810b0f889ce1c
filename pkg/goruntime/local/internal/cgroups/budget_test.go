package cgroups

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// fakeCgroup makes dir/name holding limitFile with limit and a
// cgroup.procs listing procs, last modified at mod.
func fakeCgroup(t *testing.T, dir, name, limitFile, limit, procs string, mod time.Time) string {
	t.Helper()
	cg := filepath.Join(dir, name)
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, body := range map[string]string{limitFile: limit + "\n", "cgroup.procs": procs} {
		if err := os.WriteFile(filepath.Join(cg, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(cg, mod, mod); err != nil {
		t.Fatal(err)
	}
	return cg
}

// TestPromisedCountsLiveCgroups: the budget's account is the memory
// limits of the cgroups that hold processes or were made within
// startGrace; an older empty one (a dead sandbox's, not pruned yet) and
// the one being raised count nothing, a cgroup without a limit fills the
// account, and groups that do not exist are empty.
func TestPromisedCountsLiveCgroups(t *testing.T) {
	now := time.Now()
	old := now.Add(-2 * startGrace)
	const mib = 1 << 20
	for _, v2 := range []bool{false, true} {
		limitFile, unlimited := "memory.limit_in_bytes", "9223372036854771712"
		if v2 {
			limitFile, unlimited = "memory.max", "max"
		}
		g := t.TempDir()
		fakeCgroup(t, g, "running", limitFile, strconv.Itoa(160*mib), "123\n456\n", old)
		fakeCgroup(t, g, "starting", limitFile, strconv.Itoa(64*mib), "", now.Add(-time.Second))
		fakeCgroup(t, g, "dead", limitFile, strconv.Itoa(1024*mib), "", old)
		raised := fakeCgroup(t, g, "raised", limitFile, strconv.Itoa(64*mib), "789\n", old)
		if err := os.WriteFile(filepath.Join(g, "memory.limit_in_bytes"), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err) // the group's own files are not cgroups
		}
		groups := []string{g, filepath.Join(t.TempDir(), "gone")}

		sum, live, err := promised(groups, v2, raised, now)
		if err != nil || sum != 224*mib || live != 2 {
			t.Errorf("v2=%v: promised = %d MiB in %d cgroups, %v; want 224 MiB in 2 (running 160, starting 64; dead and the raised one left out)", v2, sum>>20, live, err)
		}
		if sum, live, _ := promised(groups, v2, "", now); sum != 288*mib || live != 3 {
			t.Errorf("v2=%v: promised with the raised one = %d MiB in %d, want 288 MiB in 3", v2, sum>>20, live)
		}

		sc := budgetScope{groups: groups, v2: v2}
		if err := sc.admit("", 64*mib, 352*mib, now); err != nil {
			t.Errorf("v2=%v: 288 + 64 MiB within a budget of 352: %v", v2, err)
		}
		var over *OverBudget
		err = sc.admit("", 65*mib, 352*mib, now)
		if !errors.As(err, &over) || *over != (OverBudget{Budget: 352 * mib, Promised: 288 * mib, Live: 3, Need: 65 * mib}) {
			t.Errorf("v2=%v: 288 + 65 MiB within a budget of 352: %v, want an OverBudget", v2, err)
		}
		if err := sc.admit(raised, 128*mib, 352*mib, now); err != nil {
			t.Errorf("v2=%v: raising one of 64 to 128 MiB beside 224: %v", v2, err)
		}

		fakeCgroup(t, g, "unlimited", limitFile, unlimited, "1\n", old)
		if sum, _, _ := promised(groups, v2, "", now); sum != math.MaxInt64 {
			t.Errorf("v2=%v: with a cgroup without a limit, promised = %d, want MaxInt64", v2, sum)
		}
		if err := sc.admit("", 1, math.MaxInt64, now); !errors.As(err, &over) {
			t.Errorf("v2=%v: any need beside a cgroup without a limit: %v, want an OverBudget", v2, err)
		}
	}
}

// TestPromisedBadLimit: a limit file that does not hold a number is an
// error (the caller refuses), not a zero.
func TestPromisedBadLimit(t *testing.T) {
	g := t.TempDir()
	fakeCgroup(t, g, "odd", "memory.max", "lots", "1\n", time.Now())
	if _, _, err := promised([]string{g}, true, "", time.Now()); err == nil {
		t.Error("promised over a limit of \"lots\": no error")
	}
}

// TestBudgetScopeV2Scopes: on cgroup v2 in a scope JoinSystemdScope asked
// for, the budget counts the sandboxes' groups of every such scope
// beside it (one per process of the user) and locks their parent; in a
// cgroup delegated otherwise, only its own group, locked through it.
func TestBudgetScopeV2Scopes(t *testing.T) {
	slice := t.TempDir()
	own := filepath.Join(slice, scopePrefix+"100-aa.scope")
	other := filepath.Join(slice, scopePrefix+"200-bb.scope")
	for _, d := range []string{filepath.Join(own, groupName), filepath.Join(other, groupName), filepath.Join(slice, "other.scope", groupName)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sc := layout{v2: filepath.Join(own, groupName), v2Own: own}.budgetScope()
	want := []string{filepath.Join(own, groupName), filepath.Join(other, groupName)}
	if sc.lock != slice || !sc.v2 || len(sc.groups) != 2 || sc.groups[0] != want[0] || sc.groups[1] != want[1] {
		t.Errorf("in our scope: %+v, want lock %s, groups %q", sc, slice, want)
	}
	mine := filepath.Join(slice, "other.scope")
	sc = layout{v2: filepath.Join(mine, groupName), v2Own: mine}.budgetScope()
	if sc.lock != mine || len(sc.groups) != 1 || sc.groups[0] != filepath.Join(mine, groupName) {
		t.Errorf("in a cgroup delegated otherwise: %+v, want its own group only, locked through it", sc)
	}
	v1 := layout{v1: map[string]string{"memory": "/m/g", "pids": "/p/g"}}.budgetScope()
	if v1.lock != "/m/g" || len(v1.groups) != 1 || v1.groups[0] != "/m/g" || v1.v2 {
		t.Errorf("v1: %+v, want the memory group, locked through it", v1)
	}
}

// TestLockDirExcludes: the budget's lock is exclusive between processes
// (flock on a directory), and a waiter gives up when its context ends.
func TestLockDirExcludes(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// Another process cannot take it meanwhile.
	if err := exec.Command("flock", "-n", dir, "true").Run(); err == nil {
		t.Error("flock -n on the locked directory succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := lockDir(ctx, dir); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second lock while held: %v, want the context's deadline", err)
	}
	unlock()
	again, err := lockDir(context.Background(), dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again()
}
