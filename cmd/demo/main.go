// Command demo shows go-runtime-sandbox end to end: Go source uploaded at
// run time is built, run and tested inside a sandbox. It runs two flows:
//
//   - smoke: one main.go; go run, go build -o app, then ./app (the built
//     binary persists in the sandbox);
//   - multi: a module with a sub-package and its test shipped in one call;
//     build, run (greets Alice, Bob and Carol) and go test.
//
// The local backend (bubblewrap on this machine) is the default;
// --backend=agent-sandbox claims a sandbox from a Kubernetes warm pool.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/backendflag"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/demo"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

func main() {
	local.ServeIfChild()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `Usage: demo [flags]

Runs Go code uploaded at run time inside a sandbox and prints each step:

  === single-file smoke flow ===
  -- go run main.go [exit=0] --
  sum(1..100)=5050
  ...
  ==> PoC complete

Exits 0 when every step passed; 1 when a step failed or the sandbox could
not be had (the message names which); 2 for bad flags or arguments.

Examples:
  demo                                   # both flows, local bubblewrap sandbox
  demo --flow=multi --live               # one flow, output as it happens
  demo --flow=fork                       # snapshot, fork three ways, three fixes side by side
  demo --keep                            # leave the sandbox running, print its ID
  demo --claim=ID --flow=smoke           # reuse a sandbox left by --keep
  demo --backend=agent-sandbox --warm-pool-name=go-runtime-pool --api-url=http://ROUTER:8080

Flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	var (
		flow    = fs.String("flow", demo.FlowAll, "which flow to run: all, smoke, multi or fork (build once, snapshot, fork three sandboxes that each try a fix, results side by side)")
		claim   = fs.String("claim", "", "attach to this running sandbox (an ID printed by --keep) instead of opening a new one")
		keep    = fs.Bool("keep", false, "leave the sandbox running at the end (disconnect instead of delete) and print its ID")
		live    = fs.Bool("live", false, "print each command's output as it is produced")
		timeout = fs.Duration("step-timeout", demo.DefaultStepTimeout, "time limit of each step's command")
		verbose = fs.Bool("v", false, "log debug details to stderr")
	)
	bf := backendflag.Register(fs)
	if code, ok := cliflags.ParseFlagsOnly(fs, args); !ok {
		return code
	}
	// Refuse bad values before a sandbox is provisioned.
	if err := demo.CheckFlow(*flow); err != nil {
		fmt.Fprintf(stderr, "demo: --flow: %v\n", err)
		return cliflags.ExitUsage
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "demo: --step-timeout=%s: must be positive\n", *timeout)
		return cliflags.ExitUsage
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	if err := runDemo(ctx, bf, *flow, *claim, *keep, demo.Options{Out: stdout, Live: *live, StepTimeout: *timeout}, logger, stderr); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", bf.Explain(err))
		return 1
	}
	return 0
}

func runDemo(ctx context.Context, bf *backendflag.Flags, flow, claim string, keep bool, opts demo.Options, logger *slog.Logger, stderr io.Writer) (err error) {
	backend, err := bf.New(ctx, logger)
	if err != nil {
		return fmt.Errorf("stage backend: %w", err)
	}
	defer backendflag.CloseOnExit(ctx, backend, logger)
	start := time.Now()
	var sess *goruntime.Session
	sopts := goruntime.Options{Logger: logger, HeadBytes: -1, TailBytes: -1, Progress: progressPrinter(stderr, 5*time.Second)}
	if claim != "" {
		fmt.Fprintf(stderr, "attaching to %s sandbox %s ...\n", backend.Name(), claim)
		sess, err = goruntime.Attach(ctx, backend, claim, sopts)
	} else {
		fmt.Fprintf(stderr, "provisioning %s sandbox ...\n", backend.Name())
		sess, err = goruntime.Open(ctx, backend, sopts)
	}
	if err != nil {
		return fmt.Errorf("stage provision: %w", err)
	}
	fmt.Fprintf(stderr, "sandbox %s ready in %s\n", sess.ID(), time.Since(start).Round(time.Millisecond))
	defer func() {
		// Clean up even when ctx was cancelled by SIGINT/SIGTERM.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if keep {
			if derr := sess.Disconnect(cctx); derr != nil {
				err = errors.Join(err, fmt.Errorf("stage disconnect: %w", derr))
				return
			}
			fmt.Fprintf(stderr, "sandbox %s left running; reattach with --claim=%s\n", sess.ID(), sess.ID())
			return
		}
		if cerr := sess.Close(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("stage delete: %w", cerr))
		}
	}()
	if flow == demo.FlowFork {
		sb, ok := backend.(goruntime.SnapshotBackend)
		if !ok {
			return fmt.Errorf("stage fork: the %s backend has no snapshots (the local and agent-sandbox backends have)", backend.Name())
		}
		return demo.RunFork(ctx, sb, sess, opts)
	}
	return demo.Run(ctx, sess, flow, opts)
}

// progressPrinter prints the backend's progress reports while a sandbox is
// provisioned (the local backend's first start on a machine says once that
// its sandbox runs without the seed build cache, which builds meanwhile):
// a line at every new step, and at most one every `every` in between.
func progressPrinter(w io.Writer, every time.Duration) func(goruntime.Progress) {
	var last goruntime.Progress
	var at time.Time
	return func(p goruntime.Progress) {
		if p.Step == last.Step && p.Message == last.Message && time.Since(at) < every {
			return
		}
		last, at = p, time.Now()
		fmt.Fprintf(w, "  %s\n", p)
	}
}
