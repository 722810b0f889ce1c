package local

// The host ids each sandbox runs as, leased from internal/hostuid: as
// root, a host uid of its own from Options.HostUIDBase..+HostUIDCount;
// as a user, subordinate ids of its own (below). internal/hostuid holds
// the leases and reads /etc/subuid; this file is what the backend asks
// of it.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/gate"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/hostuid"
)

// Host identities: when the backend runs as root, each live sandbox runs
// as a host uid of its own from Options.HostUIDBase..+HostUIDCount
// (internal/hostuid), leased machine-wide in hostUIDDir.

// hostUIDDir holds the uid leases.
const hostUIDDir = runRoot + "/uids"

// allocUID leases a free uid from the configured range to the sandbox in
// dir (hostuid.Alloc).
func (h *host) allocUID(dir string) (int, error) {
	uid, err := hostuid.Alloc(hostUIDDir, dir, h.opts.HostUIDBase, h.opts.HostUIDCount, sandboxAlive)
	if err != nil {
		return 0, fmt.Errorf("%w: close some, or raise Options.HostUIDCount (and keep the range, from Options.HostUIDBase, clear of real users)", err)
	}
	return uid, nil
}

// sandboxAlive reports whether the sandbox in dir, which leased its uid
// at leased, still holds it: its bubblewrap process runs, or it has no
// state file yet and leased it within 10 minutes (an opener that died
// while opening never writes one).
func sandboxAlive(dir string, leased time.Time) bool {
	data, err := os.ReadFile(layout{dir: dir}.meta())
	if err != nil {
		return time.Since(leased) <= 10*time.Minute
	}
	var m meta
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	return procfs.Alive(m.PID, m.StartTime)
}

// Host ids of their own for the sandboxes of a backend that is not root:
// where /etc/subuid and /etc/subgid grant the user subordinate ids (and
// Debian's uidmap provides newuidmap and newgidmap), each sandbox gets
// one uid and one gid from them, leased among all of the user's backends.
// The gate of its memory disk maps them into its user namespace
// (internal/disk's Identity), so the sandbox's processes and the files
// they write belong to that uid on the host, not to the user: the user's
// other processes cannot write them or signal them, and a process that
// left its namespaces would be a stranger to the user's files.
//
// Bubblewrap then runs as that uid and resolves every bind source itself,
// so the disk is mounted where any uid can reach it (subIDRoot/disk, one
// empty directory on the host: each sandbox mounts its own disk there in
// its own mount namespace) and what it binds from places closed to
// others (the sandbox's etc files under the state directory, a server
// binary in a private directory) is bound onto the disk first.

// Where the subordinate ids come from.
const (
	subUIDFile = "/etc/subuid"
	subGIDFile = "/etc/subgid"
)

// subIDs is the block of subordinate ids a backend that is not root gives
// its sandboxes.
type subIDs struct {
	uid, gid int    // the first of each
	count    int    // how many of both
	root     string // subIDRoot: the disks' mount point and the leases
	// newuidmap and newgidmap map them into a gate's user namespace.
	newuidmap, newgidmap string
}

// subIDRoot is the user's directory for what the sandboxes' own ids must
// reach by path: disk/, the empty directory every memory disk is mounted
// on in its sandbox's mount namespace, and the uid leases (uids/, the
// user's only), shared by every backend of the user.
func subIDRoot(uid int) string { return filepath.Join("/tmp", "go-runtime-sandbox-"+strconv.Itoa(uid)) }

// findSubIDs returns the subordinate ids this user may give sandboxes, or
// why there are none and what would add them.
func findSubIDs() (_ subIDs, detail, fix string) {
	uid, gid := os.Geteuid(), os.Getegid()
	name := strconv.Itoa(uid)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	add := fmt.Sprintf("grant %s subordinate ids (as root: usermod --add-subuids 100000-165535 --add-subgids 100000-165535 %s)", name, name)
	us, err := hostuid.SubIDs(subUIDFile, name, uid)
	if err != nil {
		return subIDs{}, err.Error(), add
	}
	gs, err := hostuid.SubIDs(subGIDFile, name, gid)
	if err != nil {
		gs, err = hostuid.SubIDs(subGIDFile, name, uid) // newgidmap matches the user too
	}
	if err != nil {
		return subIDs{}, err.Error(), add
	}
	s := subIDs{uid: us.Start, gid: gs.Start, count: min(us.Count, gs.Count, maxSubIDs), root: subIDRoot(uid)}
	for _, t := range []struct {
		path *string
		name string
	}{{&s.newuidmap, "newuidmap"}, {&s.newgidmap, "newgidmap"}} {
		if *t.path, err = gate.LookPath(t.name, gatePATH); err != nil {
			return subIDs{}, err.Error(), "install Debian's uidmap (scripts/install-deps.sh)"
		}
	}
	return s, "", ""
}

// maxSubIDs bounds the ids leased from a block: more live sandboxes than
// this on one machine hit other limits first.
const maxSubIDs = 65536

// try makes a memory disk for a sandbox of the first of s's ids with the
// gate gateExe, to tell whether newuidmap and newgidmap map them here.
func (s subIDs) try(ctx context.Context, gateExe string) error {
	return disk.TryMemory(ctx, gateExe, gateEnv(), MinDiskBytes, MinDiskInodes, s.identity(s.uid, s.gid))
}

// identity is the disk.Identity of the sandbox s leased uid and gid.
func (s subIDs) identity(uid, gid int) disk.Identity {
	return disk.Identity{UID: uid, GID: gid, NewUIDMap: s.newuidmap, NewGIDMap: s.newgidmap}
}

// diskDir is the mount point of every memory disk of s's sandboxes.
func (s subIDs) diskDir() string { return filepath.Join(s.root, "disk") }

// leases is the directory of the uid leases.
func (s subIDs) leases() string { return filepath.Join(s.root, "uids") }

// prepareRoot makes s.root and its disk directory, or checks that they
// are this user's own directories (not symlinks: /tmp is everyone's, and
// a directory someone else made there is refused, naming it), and marks
// them used now (a /tmp cleaner removes what looks unused). Every
// sandbox start calls it again before it leases a uid: /tmp's sticky bit
// keeps others from renaming or removing a directory of ours, so a name
// that checks out now stays ours for the start; one that was removed
// (by a cleaner, or by the user) and remade by someone else is refused.
func (s subIDs) prepareRoot() error {
	for _, d := range []string{s.root, s.diskDir()} {
		if err := os.Mkdir(d, 0o711); err != nil && !os.IsExist(err) {
			return fmt.Errorf("create %s for sandboxes' own uids: %w", d, err)
		}
		fi, err := os.Lstat(d)
		if err != nil {
			return fmt.Errorf("check %s: %w", d, err)
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || st == nil || int(st.Uid) != os.Geteuid() {
			return fmt.Errorf("%s is not a directory of yours (uid %d): remove it, or relax Options.Relax.HostUID to run sandboxes as your uid", d, os.Geteuid())
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("check %s: %w", d, err)
		}
		now := time.Now()
		_ = os.Chtimes(d, now, now)
	}
	return nil
}

// alloc leases the sandbox in dir a uid and the gid at the same offset.
func (s subIDs) alloc(dir string) (uid, gid int, err error) {
	if err := s.prepareRoot(); err != nil {
		return 0, 0, err
	}
	uid, err = hostuid.Alloc(s.leases(), dir, s.uid, s.count, sandboxAlive)
	if err != nil {
		return 0, 0, fmt.Errorf("subordinate uids (%s): %w: close some", subUIDFile, err)
	}
	return uid, s.gid + (uid - s.uid), nil
}

// uidLeases is the directory of the backend's uid leases: root's, the
// user's subordinate ones, or "" (none).
func (h *host) uidLeases() string {
	switch {
	case h.hostUID:
		return hostUIDDir
	case h.subIDs != nil:
		return h.subIDs.leases()
	}
	return ""
}

// stageForOwnIDs lists what bubblewrap binds that a sandbox's own ids
// cannot reach by path, to be bound onto its memory disk first, and sets
// l.staged to match: the sandbox's etc directory always (it is under the
// state directory), Go, the module cache and the server where a directory
// on the way is closed to others.
func (h *host) stageForOwnIDs(l *layout, d disk.Disk) []disk.Staged {
	stage := []disk.Staged{{Src: l.etc(), Name: "etc"}}
	for _, c := range []struct{ src, name string }{
		{h.goroot, "goroot"}, {h.modCache, "modcache"}, {h.server, "server"}, {h.processAPI, "processapi"},
	} {
		if c.src != "" && !hostuid.Reachable(c.src) {
			stage = append(stage, disk.Staged{Src: c.src, Name: c.name})
		}
	}
	l.staged = map[string]string{}
	for _, s := range stage {
		l.staged[s.Src] = d.StagePath(s.Name)
	}
	return stage
}

// checkSubIDs is the host-uid protection of a backend that is not root:
// active when sandboxes get subordinate ids of their own (which needs a
// memory disk, memoryDisk), else why not and what would add them. It is
// not required: without subordinate ids, or with helpers that fail,
// sandboxes run as the user. It is when the ids are there but the
// directory they need in /tmp is someone else's.
func checkSubIDs(ctx context.Context, o Options, memoryDisk bool, gateExe string) Protection {
	p := Protection{Name: ProtHostUID, Status: StatusNotApplicable}
	mine := fmt.Sprintf("sandboxes run as your uid %d (uid 1000 inside maps to it), and the files they write are yours", os.Geteuid())
	if o.Relax.HostUID {
		p.Status, p.Detail = StatusRelaxed, "Options.Relax.HostUID: "+mine
		return p
	}
	if !memoryDisk {
		p.Detail = mine + ": subordinate ids of their own need the disk quota (a memory disk), which is relaxed"
		return p
	}
	s, why, fix := findSubIDs()
	if why != "" {
		p.Detail, p.Fix = mine+": "+why, fix
		return p
	}
	if err := s.prepareRoot(); err != nil {
		// Someone else's directory where ours must be is refused, not
		// worked around: falling back to the user's uid would let any
		// local user switch the protection off by making it.
		p.Required = true
		p.Status, p.Detail, p.Fix = StatusUnavailable, err.Error(), "remove it (as root if it is not yours), or relax Options.Relax.HostUID to run sandboxes as your uid"
		return p
	}
	if err := s.try(ctx, gateExe); err != nil {
		p.Status, p.Detail = StatusUnavailable, mine+": "+err.Error()
		p.Fix = "a newuidmap and newgidmap that work here (setuid root, Debian's uidmap), or relax Options.Relax.HostUID"
		return p
	}
	p.Status = StatusActive
	p.Detail = fmt.Sprintf("each sandbox runs as a uid and gid of its own from your subordinate ids %d-%d (%s, %s; leases in %s): the files it writes are not yours",
		s.uid, s.uid+s.count-1, subUIDFile, subGIDFile, s.leases())
	return p
}
