package local

// Cleanup: one call that removes everything a state directory holds on
// the host, for a user who is done with it (sandbox-check --cleanup).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/hostuid"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/tree"
)

// ErrStateDirInUse is wrapped by Cleanup's error when a backend holds the
// state directory or (without CleanupOptions.KillSandboxes) a sandbox in
// it runs; the error names them.
var ErrStateDirInUse = errors.New("state directory in use")

// CleanupOptions says which state directory Cleanup empties and how far
// it goes.
type CleanupOptions struct {
	// StateDir is the directory (Options.StateDir); "" is the default
	// one, as New chooses it.
	StateDir string
	// KillSandboxes ends the sandboxes that still run (left running by
	// Disconnect, or by a process that exited without closing them)
	// instead of refusing.
	KillSandboxes bool
	// RemoveDir removes the state directory itself afterwards, the seed
	// build caches with it (the next backend builds them again, minutes).
	RemoveDir bool
}

// CleanupReport counts what Cleanup removed.
type CleanupReport struct {
	StateDir  string
	Killed    []string // IDs of the live sandboxes it ended
	Sandboxes int      // sandbox directories removed (dead, killed or half-made)
	Disks     int      // disk images unmounted and deleted (spares included)
	Loops     int      // loop devices detached that no unmount had freed
	Leases    int      // host uid leases ended
}

// String is the report as sandbox-check prints it.
func (r CleanupReport) String() string {
	return fmt.Sprintf("cleaned %s: %d sandboxes removed (%d of them running, ended), %d disks, %d loop devices, %d host uid leases",
		r.StateDir, r.Sandboxes, len(r.Killed), r.Disks, r.Loops, r.Leases)
}

// DefaultStateDir is the state directory New uses when Options.StateDir
// is empty: go-runtime-sandbox in the user's cache directory.
func DefaultStateDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "go-runtime-sandbox"), nil
}

// Cleanup removes what the state directory holds on the host: every
// sandbox's processes, cgroups, disk (mounts, loop device, image), host
// uid lease and directory, the spare disks and build caches, and the
// trash; with RemoveDir the directory itself. The seed build caches stay
// otherwise. It refuses, with an error wrapping ErrStateDirInUse that
// names them, while a backend (in any process) holds the directory, or a
// sandbox in it runs and KillSandboxes is not set; it holds the directory
// exclusively while it works, so no backend starts meanwhile. What it
// could not remove is its error. A directory that does not exist is
// clean.
//
// Left alone, because no one state directory owns them: the read-only
// stagings under /run/go-runtime-sandbox/ro (bind mounts of the Go
// installation, module cache and server binary that every backend of the
// machine shares; a staging of a deleted file is dropped by the next
// New).
func Cleanup(ctx context.Context, opts CleanupOptions) (CleanupReport, error) {
	dir := opts.StateDir
	if dir == "" {
		d, err := DefaultStateDir()
		if err != nil {
			return CleanupReport{}, fmt.Errorf("cleanup: no state directory given and no default: %w", err)
		}
		dir = d
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return CleanupReport{}, fmt.Errorf("cleanup %s: %w", dir, err)
	}
	rep := CleanupReport{StateDir: abs}
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	sd := stateDir(abs)
	lock, err := os.OpenFile(sd.usersLock(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return rep, fmt.Errorf("cleanup %s: %w", abs, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return rep, fmt.Errorf("cleanup %s: in use by %s, whose backend holds it (close the backend, or end the process): %w",
			abs, describePIDs(lockHolders(lock)), ErrStateDirInUse)
	}

	sandboxes := sd.sandboxes()
	found := readSandboxes(sandboxes)
	var live []string
	for _, s := range found {
		if s.alive {
			live = append(live, fmt.Sprintf("%s (bubblewrap pid %d)", s.id, s.meta.PID))
		}
	}
	if len(live) > 0 && !opts.KillSandboxes {
		return rep, fmt.Errorf("cleanup %s: %d sandboxes still run: %s; close them (Backend.Attach, then Close), or end them with the cleanup (sandbox-check --cleanup --kill): %w",
			abs, len(live), strings.Join(live, ", "), ErrStateDirInUse)
	}

	errs, err := removeSandboxes(ctx, found, &rep)
	if err != nil {
		return rep, fmt.Errorf("cleanup %s: %w", abs, err)
	}
	rep.Leases = hostuid.ReleaseUnder(hostUIDDir, sandboxes)
	if os.Geteuid() != 0 {
		rep.Leases += hostuid.ReleaseUnder(subIDs{root: subIDRoot(os.Geteuid())}.leases(), sandboxes)
	}
	errs = append(errs, removeDisks(sd, &rep)...)
	cgroups.PruneLeftovers(sandboxes)
	for _, d := range []string{filepath.Join(sd.disks(), "spare"), sd.spareRoot(), sd.trash(), sd.modProxyWork()} {
		if err := tree.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	if opts.RemoveDir && len(errs) == 0 {
		if err := tree.Remove(abs); err != nil {
			errs = append(errs, fmt.Errorf("remove the state directory: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return rep, fmt.Errorf("cleanup %s: %w", abs, err)
	}
	return rep, nil
}

// removeSandboxes removes the sandboxes Cleanup found (killing those
// alive), counting them in rep; err is ctx's once it ends.
func removeSandboxes(ctx context.Context, found []foundSandbox, rep *CleanupReport) (errs []error, err error) {
	for _, s := range found {
		if err := ctx.Err(); err != nil {
			return errs, err
		}
		if s.alive {
			rep.Killed = append(rep.Killed, s.id)
		}
		if err := s.remove(); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Sandboxes++
	}
	return errs, nil
}

// removeDisks removes every disk the state directory's images back
// (spares, and those of sandboxes whose state file was lost) and the
// loop devices left on them, counting them in rep.
func removeDisks(sd stateDir, rep *CleanupReport) []error {
	var errs []error
	images := sd.disks()
	for _, id := range disk.Images(images) {
		if !sandboxid.Valid(id) {
			continue
		}
		if err := disk.ByID(images, diskMounts, id).Remove(); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Disks++
	}
	for _, dev := range disk.LoopDevices("/sys/block", images) {
		if err := disk.Detach(dev); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Loops++
	}
	disk.PruneOrphans(diskMounts)
	disk.PruneTemplateBuilds(images)
	return errs
}

// foundSandbox is one directory under sandboxes/ as Cleanup found it.
type foundSandbox struct {
	id, dir string
	meta    *meta // nil: no state file (opened halfway)
	alive   bool  // its bubblewrap process runs
}

// readSandboxes lists the sandbox directories under sandboxes.
func readSandboxes(sandboxes string) []foundSandbox {
	entries, err := os.ReadDir(sandboxes)
	if err != nil {
		return nil
	}
	var out []foundSandbox
	for _, e := range entries {
		if !sandboxid.Valid(e.Name()) {
			continue
		}
		s := foundSandbox{id: e.Name(), dir: filepath.Join(sandboxes, e.Name())}
		if data, err := os.ReadFile(layout{dir: s.dir}.meta()); err == nil {
			var m meta
			if json.Unmarshal(data, &m) == nil {
				s.meta = &m
				s.alive = procfs.Alive(m.PID, m.StartTime)
			}
		}
		out = append(out, s)
	}
	return out
}

// remove ends the sandbox's processes (its cgroup) and removes its
// cgroup, disk, uid lease and directory.
func (s foundSandbox) remove() error {
	var errs []error
	if s.meta == nil {
		// Its cgroup, if it got one, is named by its ID.
		if cg, err := cgroups.ByID(s.id); err == nil {
			if err := cg.Remove(); err != nil {
				errs = append(errs, err)
			}
		}
	} else {
		if err := s.meta.Cgroup.Remove(); err != nil {
			errs = append(errs, err)
		}
		if s.alive {
			// The cgroup held it; should it have left, end it by pid.
			if procfs.Alive(s.meta.PID, s.meta.StartTime) {
				_ = syscall.Kill(s.meta.PID, syscall.SIGKILL)
			}
		}
		if err := (storage{uid: s.meta.HostUID, disk: s.meta.Disk}).release(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := tree.Remove(s.dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", s.id, err)
	}
	return nil
}
