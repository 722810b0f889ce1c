package local_test

// The rootless helper's reports beyond the battery and the limits: whose
// a sandbox's files are on the host (with and without subordinate ids),
// and a module through the module proxy.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// printOwner has s write a file in /app and prints whose it is on the
// host ("owner UID", seen through Dir()/app) and whether this process,
// the user, may write it ("user-write refused" or "user-write allowed").
func printOwner(ctx context.Context, s *goruntime.Session) error {
	if _, err := s.Execute(ctx, goruntime.Request{Command: "echo sandbox > owned.txt"}); err != nil {
		return err
	}
	sb, ok := s.Sandbox().(*local.Sandbox)
	if !ok {
		return fmt.Errorf("not a local sandbox: %T", s.Sandbox())
	}
	p := filepath.Join(sb.Dir(), "app", "owned.txt")
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	fmt.Println("owner", fi.Sys().(*syscall.Stat_t).Uid)
	if err := os.WriteFile(p, []byte("user"), 0o644); errors.Is(err, fs.ErrPermission) {
		fmt.Println("user-write refused")
	} else {
		fmt.Println("user-write allowed:", err)
	}
	return nil
}

// rootlessPlainHelper opens one sandbox and prints whose its files are
// (printOwner).
func rootlessPlainHelper(ctx context.Context, opts local.Options) int {
	opts.WarmPool = -1
	b, err := local.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rootless helper: new:", err)
		return 1
	}
	defer b.Close(context.Background())
	s, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "rootless helper: open:", err)
		return 1
	}
	defer s.Close(context.Background())
	if err := printOwner(ctx, s); err != nil {
		fmt.Fprintln(os.Stderr, "rootless helper:", err)
		return 1
	}
	printFirstGoTest(ctx, b)
	return 0
}

// printFirstGoTest prints "first go test: seed's test2json" when a fresh
// sandbox's first go test took its per-test results from the seed's
// test2json (TestGoAwareFirstGoTestBuildsNoTest2json), else what went
// wrong.
func printFirstGoTest(ctx context.Context, b *local.Backend) {
	if err := firstGoTestBuildsNoTest2json(ctx, b); err != nil {
		fmt.Printf("first go test: %s\n", strings.ReplaceAll(err.Error(), "\n", "\n\t"))
		return
	}
	fmt.Println("first go test: seed's test2json")
}

// rootlessModules downloads an allowlisted module into a sandbox of a
// backend of its own with a module cache in HOME (HOME is closed to
// others, so the cache is bound in through its staging when sandboxes
// have ids of their own; the cache itself is open to them, as the go
// command makes it) through the host's module proxy, and builds with it.
func rootlessModules(ctx context.Context, opts local.Options) error {
	opts.ModCache = filepath.Join(os.Getenv("HOME"), "modcache")
	opts.AllowModules = []string{allowedModule}
	if err := os.MkdirAll(opts.ModCache, 0o755); err != nil {
		return err
	}
	b, err := local.New(opts)
	if err != nil {
		return err
	}
	defer b.Close(context.Background())
	s, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		return err
	}
	defer s.Close(context.Background())
	res, err := s.Execute(ctx, goruntime.Request{
		Files: []goruntime.File{
			{Path: "go.mod", Data: []byte("module example.com/m\n\ngo 1.22\n\nrequire " + allowedModule + " " + allowedVersion + "\n")},
			{Path: "main.go", Data: []byte("package main\n\nimport \"golang.org/x/sync/errgroup\"\n\nfunc main() { var g errgroup.Group; println(g.Wait() == nil) }\n")},
		},
		Command: "go run .",
	})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 || !strings.HasSuffix(res.Stderr, "true\n") {
		return fmt.Errorf("go run: exit %d, outcome %s: %s", res.ExitCode, res.Outcome, res.Stderr)
	}
	return nil
}
