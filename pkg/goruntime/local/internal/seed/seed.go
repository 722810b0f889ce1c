// Package seed builds and links the local backend's seed build cache:
// built once per machine, Go installation and settings, on the host and
// outside any sandbox, by compiling a hello world, a trivial test and the
// standard packages programs use most (programs.go, _seed/). Every
// sandbox opened once it is complete starts with a GOCACHE that is a view
// of it (link.go, or the disk's overlay), so its first `go run` compiles
// only the user's code; one opened before starts from an empty cache and
// compiles what it needs itself (meanwhile.go). The extra seed adds go
// test -race and -cover (extra.go); Builder runs one backend's builds in
// the background and shares them with every caller that waits.
//
// Keeping the seed read-only to sandboxes: when we run as root, a
// sandbox's GOCACHE is a tree of hard links to seed files that belong to
// an unmapped user (nobody) and are mode 0444. A sandbox's processes hold
// no capabilities outside their user namespace, so they can read those
// files and unlink or replace their own links, but cannot write, chmod or
// chown the shared inodes. As an ordinary user we cannot give files away,
// so the seed is copied instead (slower, same isolation).
//
// Every function takes the seed root (a state directory's seed/), the Go
// installation and the build's environment as parameters; nothing here is
// global.
package seed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/tree"
)

// seedOwner is the uid/gid the seed's files are given when we run as root.
const seedOwner = 65534

// Test2json is where the seed holds a build of cmd/test2json, relative to
// the seed (so to a sandbox's GOCACHE, which shows it): the program a
// session runs over a plain go test's text for per-test results
// (goruntime.Test2jsonEnv). It is built once per machine with the seed,
// outside any sandbox, and sealed with it (nobody's, 0555): every sandbox
// runs the same file, none can change it for another (a sandbox's own
// view of it is an overlay's or a link's, as for every seed file), and no
// fresh sandbox builds it. A `go build` never takes a linked program
// from the build cache, and `go tool test2json`'s cached one is found
// only through a `go tool` run (~90 ms of CPU each), hence a file of its
// own. The go command leaves it alone: its cache is the
// two-hex-digit directories (go clean -cache and trimming remove
// nothing else).
const Test2json = "go-runtime-sandbox/test2json"

// raceCapable reports whether a sandbox can use the race detector: it
// needs cgo, so a C compiler under the host's /usr (bound into every
// sandbox). The seed then holds the race variant of the standard library.
func raceCapable() bool {
	p, err := exec.LookPath("gcc")
	if err != nil {
		return false
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return strings.HasPrefix(p, "/usr/")
}

// keyOf names the seed of the Go installation goroot by what its build
// depends on; the seed lives in the seed root's directory of that name.
func keyOf(goroot string) (string, error) {
	version, err := os.ReadFile(filepath.Join(goroot, "VERSION"))
	if err != nil {
		return "", fmt.Errorf("read Go version: %w", err)
	}
	v, _, _ := strings.Cut(string(version), "\n")
	goBin, err := os.Stat(filepath.Join(goroot, "bin", "go"))
	if err != nil {
		return "", fmt.Errorf("find go command: %w", err)
	}
	h := sha256.New()
	// seed-v2: the seed holds Test2json (a seed-v1 lacks it, and sealed
	// seeds are never added to).
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\x00seed-v2", goroot, v, goBin.Size(), goBin.ModTime().UTC())
	return v + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// ensure returns the directory of a complete seed build cache for goroot
// in root (a state directory's seed/), building it first if needed with
// the environment env (the settings that enter the sandboxes' action
// IDs). Concurrent callers (in this or other processes) wait for one
// build. report receives progress (Stage).
func ensure(ctx context.Context, root, goroot string, env []string, report func(goruntime.Progress)) (string, error) {
	key, err := keyOf(goroot)
	if err != nil {
		return "", err
	}
	return ensureAt(ctx, root, key, goroot, env, report, false)
}

// ensureExtra is ensure for the extra seed (extra.go).
func ensureExtra(ctx context.Context, root, goroot string, env []string) (string, error) {
	key, err := keyOf(goroot)
	if err != nil {
		return "", err
	}
	return ensureAt(ctx, root, key+extraSuffix(), goroot, env, func(goruntime.Progress) {}, true)
}

func ensureAt(ctx context.Context, root, key, goroot string, env []string, report func(goruntime.Progress), extra bool) (string, error) {
	dir := filepath.Join(root, key)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("create seed directory: %w", err)
	}
	lock, err := os.OpenFile(lockPath(root, key), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("lock seed: %w", err)
	}
	defer lock.Close()
	if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		report(goruntime.Progress{Stage: Stage, Message: "waiting for another process that is building it"})
	}
	if err := flockContext(ctx, lock); err != nil {
		return "", fmt.Errorf("lock seed: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil // built while we waited
	}
	// Holding the lock, no other build of this key runs: a build
	// directory of it is what a killed process left behind.
	if stale, _ := filepath.Glob(filepath.Join(root, buildDirPrefix(key)+"*")); len(stale) > 0 {
		for _, d := range stale {
			keepForResume(filepath.Join(d, "gocache"), resumeDir(root, key))
			_ = tree.Remove(d)
		}
	}
	if err := buildSeed(ctx, root, dir, goroot, env, report, extra); err != nil {
		return "", fmt.Errorf("build seed Go build cache for %s: %w", goroot, err)
	}
	return dir, nil
}

// lockPath is the lock file of the builds of the seed key in root: the
// process building it holds it (flock), and others wait for it.
func lockPath(root, key string) string { return filepath.Join(root, key+".lock") }

// resumeDir is where an unfinished seed build of key leaves its build
// cache, for the next build of key to start from. Without it a process
// that lives shorter than a build (a demo run, a CLI call: Close cancels
// the build) would start over every time and never finish; with it each
// one adds what it compiled. The go command's cache survives a killed
// build: it checks an entry's index line and its output's size on read,
// so what a kill left half-written is a miss, not an error.
func resumeDir(root, key string) string { return filepath.Join(root, "resume-"+key) }

// keepForResume moves the build cache of an unfinished build to resume,
// unless one is there already (it holds at least as much: builds of a key
// run one at a time and each starts from it).
func keepForResume(cache, resume string) {
	if _, err := os.Stat(resume); err == nil {
		return
	}
	if fi, err := os.Stat(cache); err == nil && fi.IsDir() {
		_ = os.Rename(cache, resume)
	}
}

// buildDirPrefix names the temporary directories a seed build of key
// works in: "build-<key>." and a random suffix. The dot keeps one key's
// directories apart from those of a key it prefixes (the extra seed's
// key is the base key with "-extra-..." appended).
func buildDirPrefix(key string) string { return "build-" + key + "." }

func flockContext(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
