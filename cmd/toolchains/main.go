// Command toolchains provisions extra Go toolchains for the local backend's
// sandboxes (Request.GoVersion, run_go_code's go_version): it downloads
// each as the golang.org/toolchain module into the host module cache,
// which every sandbox reads offline. Adding needs network once (the
// host's GOPROXY); sandboxes never do.
//
//	toolchains list                 # the default Go and those provisioned
//	toolchains add 1.25.9 1.24.13   # download and unpack (about 70 MB each)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: toolchains [flags] list
       toolchains [flags] add VERSION...

Provisions Go toolchains that local sandboxes can run offline
(goruntime.Request.GoVersion, run_go_code's go_version). "add" downloads
each VERSION (e.g. 1.25.9) through the host's GOPROXY into the host module
cache as golang.org/toolchain, verified against the checksum database, and
unpacks it there; "list" prints what sandboxes can run.

flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolchains", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modCache := fs.String("mod-cache", "", "host module cache the sandboxes read (default: go env GOMODCACHE, as the local backend uses)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if code, ok := cliflags.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return cliflags.ExitUsage
	}
	// Listing and provisioning run no sandbox: the store needs the host's
	// Go and module cache, not the sandboxes' protections.
	store, err := local.NewToolchainStore(local.Options{ModCache: *modCache})
	if err != nil {
		fmt.Fprintf(stderr, "toolchains: %v\n", err)
		return 1
	}
	switch cmd, versions := fs.Arg(0), fs.Args()[1:]; cmd {
	case "list":
		if len(versions) > 0 {
			fmt.Fprintf(stderr, "toolchains: list takes no arguments\n")
			return cliflags.ExitUsage
		}
		current, others, err := store.List()
		if err != nil {
			fmt.Fprintf(stderr, "toolchains: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s (default)\n", current)
		for _, v := range others {
			fmt.Fprintln(stdout, v)
		}
		return 0
	case "add":
		if len(versions) == 0 {
			fmt.Fprintf(stderr, "toolchains: add needs at least one version, e.g. toolchains add 1.25.9\n")
			return cliflags.ExitUsage
		}
		for _, v := range versions {
			fmt.Fprintf(stderr, "toolchains: adding Go %s (downloads about 70 MB)...\n", strings.TrimPrefix(v, "go"))
			if err := store.Provision(ctx, v, stderr); err != nil {
				fmt.Fprintf(stderr, "toolchains: %v\n", err)
				return 1
			}
		}
		fmt.Fprintf(stderr, "toolchains: done; sandboxes can now run them offline\n")
		return 0
	default:
		fmt.Fprintf(stderr, "toolchains: unknown command %q (want list or add)\n", cmd)
		return cliflags.ExitUsage
	}
}
