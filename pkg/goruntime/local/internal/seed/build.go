package seed

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procgroup"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/tree"
)

// buildSeed builds the seed dir (extra: the extra seed, starting from the
// base) in a work directory under root, then seals it (read-only,
// seedOwner's when we run as root) and renames it into place.
func buildSeed(ctx context.Context, root, dir, goroot string, env []string, report func(goruntime.Progress), extra bool) error {
	work, err := os.MkdirTemp(root, buildDirPrefix(filepath.Base(dir)))
	if err != nil {
		return err
	}
	defer tree.Remove(work)
	w, err := newSeedWork(work)
	if err != nil {
		return err
	}
	// What an unfinished build of this seed compiled is taken up again,
	// and kept again when this one is cut short.
	resume := resumeDir(root, filepath.Base(dir))
	resumed, err := w.resume(resume)
	if err != nil {
		return err
	}
	defer func() {
		if ctx.Err() != nil {
			keepForResume(w.cache, resume)
		}
	}()
	if extra && !resumed {
		// The extra seed starts as the base seed and adds to it.
		if err := os.Remove(w.cache); err != nil {
			return err
		}
		if err := Populate(strings.TrimSuffix(dir, extraSuffix()), w.cache); err != nil {
			return err
		}
	}
	if err := w.compile(ctx, goroot, env, report, extra); err != nil {
		return err
	}
	return seal(w.cache, dir)
}

// seedWork is a seed build's work directory: the cache it fills and the
// programs whose builds fill it.
type seedWork struct {
	dir, cache, tmp  string
	src, hello, race string // the seed's module, a hello world, a race test
}

// newSeedWork lays out the work directory dir: an empty cache and the
// programs' sources.
func newSeedWork(dir string) (seedWork, error) {
	w := seedWork{dir: dir, cache: filepath.Join(dir, "gocache"), tmp: filepath.Join(dir, "tmp"),
		src: filepath.Join(dir, "src"), hello: filepath.Join(dir, "hello"), race: filepath.Join(dir, "race")}
	files := map[string]string{
		filepath.Join(w.src, "go.mod"):        seedMod,
		filepath.Join(w.src, "main.go"):       seedMain,
		filepath.Join(w.src, "main_test.go"):  seedTest,
		filepath.Join(w.hello, "main.go"):     helloMain,
		filepath.Join(w.race, "go.mod"):       "module race\n\ngo 1.24\n",
		filepath.Join(w.race, "race_test.go"): raceTest,
	}
	for _, d := range []string{w.cache, w.src, w.tmp, w.hello, w.race} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return w, err
		}
	}
	for name, body := range files {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			return w, err
		}
	}
	return w, nil
}

// resume puts what an unfinished build of this seed compiled (for the
// extra seed: the base seed's entries too), kept at resume, in place of
// the empty cache. It reports whether there was any.
func (w seedWork) resume(resume string) (bool, error) {
	if _, err := os.Stat(resume); err != nil {
		return false, nil
	}
	if err := os.Remove(w.cache); err != nil {
		return false, err
	}
	if err := os.Rename(resume, w.cache); err != nil {
		return false, fmt.Errorf("resume the seed build: %w", err)
	}
	return true, nil
}

// seedStep is one go command of a seed build.
type seedStep struct {
	dir  string
	args []string
	what string
	env  []string
}

// steps are the go commands that fill the cache: the base seed's, or the
// extra seed's.
func (w seedWork) steps(extra bool) []seedStep {
	if !extra {
		return []seedStep{
			{w.hello, []string{"run", "-v", "main.go"}, "compiling the standard library for go run", nil},
			{w.src, []string{"build", "-v", "-o", filepath.Join(w.dir, "seed.bin"), "."}, "compiling 45 common standard packages for go build", nil},
			{w.src, []string{"test", "-count=1", "-short", "."}, "compiling the testing packages for go test", nil},
			{w.src, []string{"vet", "."}, "analysing the standard packages for go vet", nil},
			// Per-test results of a plain go test (Test2json): built here
			// once, not in every sandbox's first go test.
			{w.hello, []string{"build", "-o", filepath.Join(w.cache, Test2json), "cmd/test2json"}, "building test2json for go test's per-test results", nil},
		}
	}
	// What the extra seed adds; the base packages it needs are compiled
	// again here (their cache entries are the base seed's and are
	// skipped when linking).
	steps := []seedStep{
		{w.src, []string{"test", "-count=1", "-short", "-cover", "."}, "compiling the coverage runtime for go test -cover", nil},
		// go tool test2json is built on first use since Go 1.24; a
		// session runs it where the seed's own build (Test2json) is
		// missing, and so may a user.
		{w.hello, []string{"tool", "test2json"}, "building go tool test2json", nil},
	}
	if raceCapable() {
		steps = append(steps, seedStep{w.race, []string{"test", "-count=1", "-race", "."}, "compiling the race-instrumented runtime for go test -race", []string{"CGO_ENABLED=1"}})
	}
	return steps
}

// compile runs the steps with the environment the sandbox's go command
// sees, except for where the caches and temporary files live (which are
// not part of any action ID), reporting how far it is.
func (w seedWork) compile(ctx context.Context, goroot string, env []string, report func(goruntime.Progress), extra bool) error {
	runEnv := append(append([]string{}, env...),
		"GOCACHE="+w.cache, "TMPDIR="+w.tmp, "HOME="+w.dir, "GOPATH="+filepath.Join(w.dir, "gopath"))
	goCmd := filepath.Join(goroot, "bin", "go")
	// What the build compiles, to say how far it is: go build -v names
	// each package as it compiles it.
	want := map[string]bool{}
	list := exec.CommandContext(ctx, goCmd, "list", "-deps", "-test", "-f", "{{.ImportPath}}", ".")
	var listed bytes.Buffer
	list.Dir, list.Env, list.Stdout = w.src, runEnv, &listed
	if err := procgroup.Run(list); err == nil {
		for _, p := range strings.Fields(listed.String()) {
			want[p] = true
		}
	}
	steps := w.steps(extra)
	compiled := 0
	for i, st := range steps {
		p := goruntime.Progress{Stage: Stage, Message: st.what, Step: i + 1, Steps: len(steps), Done: compiled, Total: len(want)}
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
		// compile, cgo and gcc children writing into the cache; and
		// none of it outlives this process (a killed mcp-server's build
		// went on for a minute, and the next process would take its
		// build directory for a dead one's).
		if err := procgroup.Run(cmd); err != nil {
			return fmt.Errorf("go %s: %w: %s", strings.Join(st.args, " "), err, bytes.TrimSpace(out.tail()))
		}
	}
	// go test and go vet compile without naming packages (they have no
	// build -v), so the count stops short of the total: say it is through.
	report(goruntime.Progress{Stage: Stage, Message: "compiled", Step: len(steps), Steps: len(steps), Done: len(want), Total: len(want)})
	return nil
}

// seal makes the built cache the seed dir: without what must stay per
// sandbox, read-only (executables runnable), seedOwner's when we run as
// root, renamed into place and marked complete.
func seal(cache, dir string) error {
	// Drop what must stay per sandbox: trim bookkeeping is written fresh.
	_ = os.Remove(filepath.Join(cache, "trim.txt"))
	root0 := os.Geteuid() == 0
	err := filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
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
			// Go 1.24) are run from the cache, and so is Test2json: keep
			// them runnable.
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
