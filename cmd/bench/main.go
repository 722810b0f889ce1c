// Command bench measures go-runtime-sandbox side by side with its
// baselines on this machine and prints a table of ratios with the machine
// it ran on: the runtime server against a bare fork+exec, upstream
// agent-sandbox's Python runtime and its sandboxd daemon; local sandbox
// open, first and warm go runs and 8 sandboxes at once against the bare
// host; an MCP call against a library call; where a warm sandbox's go run
// and go test spend time beyond the bare host's (hotpath); the CPU a sandboxed CPU-bound
// program gets against the same program of the caller's on a busy
// machine (cpu-share); with --sections=rootless
// (as root), the local backend run by another user against the same as
// root; with --sections=scale, hundreds of live local sandboxes at once
// (memory each, open, warm go run, teardown, open+close a second, and
// nothing left on the host after); with --sections=snapshots, the local
// backend's snapshots, forks and rollback (as root: as root and as a user);
// with --sections=first-call, a new user's first calls through mcp-server
// on an empty state directory (as root and as another user) against the
// bare host's go run on an empty GOCACHE. `make bench` runs it;
// docs/benchmarks.md shows the last table and how to read it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/bench"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

func main() {
	local.ServeIfChild()
	bench.ServeIfSide()     // the rootless section's sides are copies of this binary
	bench.ServeIfBareExec() // and so is the server section's bare Go HTTP exec server
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// startCPUProfile profiles this process into path until the returned
// func is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// run parses args, measures and prints the table to stdout (progress to
// stderr). Exit codes: 0 every target met, 1 a target missed or a figure
// could not be measured, 2 bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := bench.Defaults()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bench.RegisterFlags(fs, &cfg)
	cpuProfile := fs.String("cpuprofile", "", "write this process's CPU profile to `file` (go tool pprof): where the library's own time goes, e.g. in --sections=scale")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: bench [flags]\n\n"+
			"Measures go-runtime-sandbox against its baselines on this machine, side by side in one run,\n"+
			"and prints a Markdown table of ratios (docs/benchmarks.md). Run it from the repository\n"+
			"(make bench): it builds cmd/sandbox-server and cmd/mcp-server, reads upstream's Python runtime\n"+
			"from the Go module cache and builds upstream's sandboxd once into --cache-dir.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := cliflags.ParseFlagsOnly(fs, args); !ok {
		return code
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return cliflags.ExitUsage
	}
	cfg.Log = stderr
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return cliflags.ExitUsage
		}
		defer stop()
	}
	rep, err := bench.Run(ctx, cfg)
	if rep != nil {
		rep.Print(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	if missed := rep.Missed(); len(missed) > 0 {
		fmt.Fprintf(stderr, "bench: %d of the targets missed\n", len(missed))
		return 1
	}
	return 0
}
