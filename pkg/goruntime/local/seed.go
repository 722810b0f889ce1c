package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procgroup"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/tree"
)

// The seed build cache: built once per machine, Go installation and
// settings, on the host and outside any sandbox, by compiling a hello world,
// a trivial test and the standard packages programs use most. Every new
// sandbox's GOCACHE starts as a view of it, so a sandbox's first `go run`
// compiles only the user's code.
//
// Keeping the seed read-only to sandboxes: when we run as root, a
// sandbox's GOCACHE is a tree of hard links to seed files that belong to
// an unmapped user (nobody) and are mode 0444. A sandbox's processes hold
// no capabilities outside their user namespace, so they can read those
// files and unlink or replace their own links, but cannot write, chmod or
// chown the shared inodes. As an ordinary user we cannot give files away,
// so the seed is copied instead (slower, same isolation).

// seedOwner is the uid/gid the seed's files are given when we run as root.
const seedOwner = 65534

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

// seedKey names a seed by what its build depends on.
func seedKey(goroot string) (string, error) {
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
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\x00seed-v1", goroot, v, goBin.Size(), goBin.ModTime().UTC())
	return v + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// ensureSeed returns the directory of a complete seed build cache for
// goroot, building it first if needed. Concurrent callers (in this or
// other processes) wait for one build.
// report receives progress (see seedProgress).
func ensureSeed(ctx context.Context, state, goroot string, env []string, report func(goruntime.Progress)) (string, error) {
	key, err := seedKey(goroot)
	if err != nil {
		return "", err
	}
	return ensureSeedAt(ctx, state, key, goroot, env, report, false)
}

// ensureSeedExtra is ensureSeed for the extra seed (see seedextra.go).
func ensureSeedExtra(ctx context.Context, state, goroot string, env []string) (string, error) {
	key, err := seedKey(goroot)
	if err != nil {
		return "", err
	}
	return ensureSeedAt(ctx, state, key+extraSeedSuffix(), goroot, env, func(goruntime.Progress) {}, true)
}

func ensureSeedAt(ctx context.Context, state, key, goroot string, env []string, report func(goruntime.Progress), extra bool) (string, error) {
	root := stateDir(state).seedRoot()
	dir := filepath.Join(root, key)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("create seed directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(root, key+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("lock seed: %w", err)
	}
	defer lock.Close()
	if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		report(goruntime.Progress{Stage: seedStage, Message: "waiting for another process that is building it"})
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

func buildSeed(ctx context.Context, root, dir, goroot string, env []string, report func(goruntime.Progress), extra bool) error {
	work, err := os.MkdirTemp(root, buildDirPrefix(filepath.Base(dir)))
	if err != nil {
		return err
	}
	defer tree.Remove(work)
	cache := filepath.Join(work, "gocache")
	src := filepath.Join(work, "src")
	tmp := filepath.Join(work, "tmp")
	for _, d := range []string{cache, src, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{"go.mod": seedMod, "main.go": seedMain, "main_test.go": seedTest}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	hello := filepath.Join(work, "hello")
	if err := os.MkdirAll(hello, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(hello, "main.go"), []byte(helloMain), 0o644); err != nil {
		return err
	}
	race := filepath.Join(work, "race")
	if err := os.MkdirAll(race, 0o755); err != nil {
		return err
	}
	for name, body := range map[string]string{"go.mod": "module race\n\ngo 1.24\n", "race_test.go": raceTest} {
		if err := os.WriteFile(filepath.Join(race, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	// The same environment the sandbox's go command sees, except for
	// where the caches and temporary files live (which are not part of
	// any action ID).
	resume := resumeDir(root, filepath.Base(dir))
	resumed := false
	if _, err := os.Stat(resume); err == nil {
		// What an unfinished build of this seed compiled (for the extra
		// seed: the base seed's entries too).
		if err := os.Remove(cache); err != nil {
			return err
		}
		if err := os.Rename(resume, cache); err != nil {
			return fmt.Errorf("resume the seed build: %w", err)
		}
		resumed = true
	}
	defer func() {
		if ctx.Err() != nil {
			keepForResume(cache, resume)
		}
	}()
	if extra && !resumed {
		// The extra seed starts as the base seed and adds to it.
		if err := os.Remove(cache); err != nil {
			return err
		}
		if err := populateCache(strings.TrimSuffix(dir, extraSeedSuffix()), cache); err != nil {
			return err
		}
	}
	runEnv := append(append([]string{}, env...),
		"GOCACHE="+cache, "TMPDIR="+tmp, "HOME="+work, "GOPATH="+filepath.Join(work, "gopath"))
	goCmd := filepath.Join(goroot, "bin", "go")
	// What the build compiles, to say how far it is: go build -v names
	// each package as it compiles it.
	want := map[string]bool{}
	list := exec.CommandContext(ctx, goCmd, "list", "-deps", "-test", "-f", "{{.ImportPath}}", ".")
	list.Dir, list.Env = src, runEnv
	procgroup.Bind(list)
	if out, err := list.Output(); err == nil {
		for _, p := range strings.Fields(string(out)) {
			want[p] = true
		}
	}
	steps := []struct {
		dir  string
		args []string
		what string
		env  []string
	}{
		{hello, []string{"run", "-v", "main.go"}, "compiling the standard library for go run", nil},
		{src, []string{"build", "-v", "-o", filepath.Join(work, "seed.bin"), "."}, "compiling 45 common standard packages for go build", nil},
		{src, []string{"test", "-count=1", "-short", "."}, "compiling the testing packages for go test", nil},
		{src, []string{"vet", "."}, "analysing the standard packages for go vet", nil},
	}
	if extra {
		// What the extra seed adds; the base packages it needs are
		// compiled again here (their cache entries are the base seed's
		// and are skipped when linking).
		steps = steps[:0]
		steps = append(steps, []struct {
			dir  string
			args []string
			what string
			env  []string
		}{
			{src, []string{"test", "-count=1", "-short", "-cover", "."}, "compiling the coverage runtime for go test -cover", nil},
			// go tool test2json is built on first use since Go 1.24;
			// the session runs it over go test's text for per-test
			// results.
			{hello, []string{"tool", "test2json"}, "building go tool test2json", nil},
		}...)
	}
	if extra && raceCapable() {
		steps = append(steps, struct {
			dir  string
			args []string
			what string
			env  []string
		}{race, []string{"test", "-count=1", "-race", "."}, "compiling the race-instrumented runtime for go test -race", []string{"CGO_ENABLED=1"}})
	}
	compiled := 0
	for i, st := range steps {
		p := goruntime.Progress{Stage: seedStage, Message: st.what, Step: i + 1, Steps: len(steps), Done: compiled, Total: len(want)}
		report(p)
		cmd := exec.CommandContext(ctx, goCmd, st.args...)
		cmd.Dir = st.dir
		cmd.Env = slices.Concat(runEnv, st.env)
		out := &packageCounter{want: want, onPackage: func() {
			compiled++
			p.Done = min(compiled, len(want))
			report(p)
		}}
		cmd.Stdout, cmd.Stderr = out, out
		// The whole group: a go command killed by ctx leaves its
		// compile, cgo and gcc children writing into the cache.
		if err := procgroup.Run(cmd); err != nil {
			return fmt.Errorf("go %s: %w: %s", strings.Join(st.args, " "), err, bytes.TrimSpace(out.tail()))
		}
	}
	// Drop what must stay per sandbox: trim bookkeeping is written fresh.
	_ = os.Remove(filepath.Join(cache, "trim.txt"))
	root0 := os.Geteuid() == 0
	err = filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == cache {
			return nil // sealed after the rename
		}
		mode := os.FileMode(0o444)
		if d.IsDir() {
			mode = 0o555
		} else if info, err := d.Info(); err == nil && info.Mode()&0o111 != 0 {
			// Executables the go command caches (go tool test2json since
			// Go 1.24) are run from the cache: keep them runnable.
			mode = 0o555
		}
		if root0 {
			if err := os.Lchown(p, seedOwner, seedOwner); err != nil {
				return err
			}
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		return fmt.Errorf("seal seed: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Rename(cache, dir); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ".complete"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o444); err != nil {
		return err
	}
	if root0 {
		if err := os.Chown(dir, seedOwner, seedOwner); err != nil {
			return err
		}
	}
	return os.Chmod(dir, 0o555)
}

// seedStage is the Stage of the seed build's progress reports.
const seedStage = "seed build cache"

// packageCounter is a build step's stdout and stderr: it calls onPackage
// for every line that names a package in want (go build -v prints each
// package it compiles) and keeps the last 4 KiB for error messages.
type packageCounter struct {
	want      map[string]bool
	seen      map[string]bool
	onPackage func()
	partial   []byte
	last      []byte
}

func (c *packageCounter) Write(p []byte) (int, error) {
	c.last = append(c.last, p...)
	if len(c.last) > 4096 {
		c.last = c.last[len(c.last)-4096:]
	}
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		if line := string(bytes.TrimSpace(c.partial[:i])); c.want[line] && !c.seen[line] {
			if c.seen == nil {
				c.seen = map[string]bool{}
			}
			c.seen[line] = true
			c.onPackage()
		}
		c.partial = c.partial[i+1:]
	}
	return len(p), nil
}

func (c *packageCounter) tail() []byte { return c.last }
