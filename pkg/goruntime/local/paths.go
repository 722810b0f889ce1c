package local

import "path/filepath"

// Every path under the state directory is named here. stateDir is the
// backend's Options.StateDir:
//
//	sandboxes/<id>/   one sandbox (layout)
//	seed/<key>/       the seed build cache for one Go toolchain (internal/seed)
//	spare/<seed>/     build caches copied ahead of Open
//	trash/            trees being removed in the background
//	disks/            per-sandbox disk images and the spare disks' markers (sparedisk.go)
//	modproxy/         the module proxy's go commands' working directory (modules.go)
//	handles/<owner>/  durable sandbox handles, one file each (handles.go)
//	snapshots/        snapshots of sandboxes' files (pkg/goruntime/internal/snapshotstore)
//	users.lock        held (flock) by every backend of the directory (users.go)
type stateDir string

func (d stateDir) sandboxes() string        { return filepath.Join(string(d), "sandboxes") }
func (d stateDir) seedRoot() string         { return filepath.Join(string(d), "seed") }
func (d stateDir) spareRoot() string        { return filepath.Join(string(d), "spare") }
func (d stateDir) spare(seed string) string { return filepath.Join(d.spareRoot(), filepath.Base(seed)) }
func (d stateDir) trash() string            { return filepath.Join(string(d), "trash") }
func (d stateDir) disks() string            { return filepath.Join(string(d), "disks") }
func (d stateDir) modProxyWork() string     { return filepath.Join(string(d), "modproxy") }
func (d stateDir) handles() string          { return filepath.Join(string(d), "handles") }
func (d stateDir) snapshots() string        { return filepath.Join(string(d), "snapshots") }
func (d stateDir) cacheDirs() string        { return filepath.Join(string(d), "cachedirs") } // disk's LayerLive
func (d stateDir) usersLock() string        { return filepath.Join(string(d), "users.lock") }

// layout is where one sandbox's directories live on the host.
type layout struct {
	dir  string // state/sandboxes/<id>
	disk string // where its disk is mounted (internal/disk); "": no disk, everything under dir
	// memory: the disk is a memory disk (disk.Memory), mounted only in
	// the sandbox's own mount namespace; its etc and log directories
	// stay under dir, on the host.
	memory bool
	// view is the prefix through which this process reaches the disk's
	// paths: /proc/<bubblewrap's pid>/root for a disk whose mounts are in
	// the sandbox's mount namespace only (a memory disk, another once it
	// left the host; seeDisk), else "".
	view string
	// ownIDs: the sandbox runs as subordinate ids of its own on a memory
	// disk (idleases.go); staged maps the host paths bubblewrap binds that
	// those ids cannot reach to their stagings on the disk (set while the
	// sandbox starts).
	ownIDs bool
	staged map[string]string
}

// source is where bubblewrap binds host path p from: p, or its staging.
func (l layout) source(p string) string {
	for from, to := range l.staged {
		if p == from {
			return to
		}
		if rel, err := filepath.Rel(from, p); err == nil && filepath.IsLocal(rel) {
			return filepath.Join(to, rel)
		}
	}
	return p
}

// data is the directory that holds the sandbox's writable storage.
func (l layout) data() string {
	if l.disk != "" {
		return l.disk
	}
	return l.dir
}

func (l layout) app() string        { return filepath.Join(l.data(), "app") }
func (l layout) home() string       { return filepath.Join(l.data(), "home") }
func (l layout) tmp() string        { return filepath.Join(l.data(), "tmp") }
func (l layout) run() string        { return filepath.Join(l.data(), "run") }
func (l layout) socket() string     { return filepath.Join(l.hostRun(), socketName) }
func (l layout) grpcSocket() string { return filepath.Join(l.hostRun(), grpcSocketName) }

// etc holds the sandbox's passwd, group and hosts files, which the host
// writes before the sandbox starts.
func (l layout) etc() string {
	if l.memory {
		return filepath.Join(l.dir, "etc")
	}
	return filepath.Join(l.data(), "etc")
}

// hostRun is run() as this process reaches it (view).
func (l layout) hostRun() string { return l.view + l.run() }
func (l layout) meta() string    { return filepath.Join(l.dir, "sandbox.json") }
func (l layout) gocache() string { return filepath.Join(l.home(), ".cache", "go-build") }

// logDir holds the runtime server's log, server.log (its stderr, and its
// companion's). It is on the sandbox's disk when it has one, so the log
// counts against the disk quota: a command can make the server log as much
// as it likes (the server caps the file itself, --log-max-bytes, and the
// quota holds even if a command took the server over). A memory disk's
// vanishes with the sandbox, and with it the server's last words: its
// log stays under dir, held to --log-max-bytes by the server and, should
// a command take the server over, to Options.FileSizeBytes by the
// RLIMIT_FSIZE every sandbox process has. Not bound into the sandbox.
// Dir()/log reaches it either way (storage.go). Once a disk has left the
// host, this process reaches its log through view.
func (l layout) logDir() string {
	if l.memory {
		return filepath.Join(l.dir, "log")
	}
	return l.view + filepath.Join(l.data(), "log")
}
func (l layout) log() string { return filepath.Join(l.logDir(), "server.log") }
