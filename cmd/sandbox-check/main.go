// Command sandbox-check prints, for this host, every protection a local
// sandbox runs under (namespaces, the seccomp filter, the nested user
// namespace block, cgroup memory/pids/cpu, the disk quota, the host uid)
// as active, unavailable, relaxed or not applicable, with the reason and
// the fix. It tries each one for real, as the local backend would.
//
// Exit status: 0 when the local backend can run sandboxes here with the
// given options, 1 when it would refuse (a required protection is
// unavailable), 2 for bad flags.
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
	"text/tabwriter"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/optionflag"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

func main() {
	// Without a sandbox-server next to it, this program is the gate of
	// the memory disks it tries (package gate).
	local.ServeIfChild()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `Usage: sandbox-check [flags]

Reports which protections local sandboxes get on this host:

  protection           status       detail
  namespaces           active       bubblewrap 0.8.0: user, pid, net, ipc, uts namespaces; ...
  seccomp              active       253 system calls allowed (...); the rest fail with EPERM, ...
  ...

Exits 0 when the local backend can run sandboxes here, 1 when it would
refuse (a required protection is unavailable: the fix is printed), 2 for
bad flags. --relax names protections to do without, as the backend's
Options.Relax (and the --relax flag of mcp-server and demo) would.

Run as a user other than root, it then says which protections that
user's sandboxes get and the one command, for root, that adds those root
can add (the open-file table, and on a cgroup v1 host the user's cgroups;
once per boot):  sudo sandbox-check --setup-user=NAME

To remove everything a state directory holds on this host (its
sandboxes' processes, cgroups, disks with their mounts and loop devices,
host uid leases and directories, the spare disks; the seed build caches
stay unless --remove):  sandbox-check --cleanup [--state-dir DIR] [--kill]
It refuses, naming them, while a backend's process holds the directory or
(without --kill) a sandbox in it runs.

Flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandbox-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	var opts local.Options
	relax := fs.String("relax", "", "comma-separated protections to do without: "+strings.Join(local.RelaxNames, ", "))
	fs.StringVar(&opts.BwrapPath, "bwrap", "", "bubblewrap binary (default bwrap on $PATH)")
	diskMB := fs.Int64("disk-mb", 0, fmt.Sprintf("disk quota per sandbox, MiB (default %d as root; %d otherwise, where the disk is in memory)", local.DefaultDiskBytes>>20, local.DefaultMemoryDiskBytes>>20))
	fs.Int64Var(&opts.DiskInodes, "disk-inodes", local.DefaultDiskInodes, "inode quota per sandbox")
	setup := fs.String("setup-user", "", "as root: the one-time setup (per boot) for the user `NAME` (or uid): raise fs.file-max if the open-file table is too small, and on a cgroup v1 host give the user a cgroup group of its own, so that its sandboxes get memory, task and CPU limits without root; then exit")
	needed := fs.Bool("setup-needed", false, "print what --setup-user would do for you, one step a line (nothing when nothing), then exit 0")
	var clean local.CleanupOptions
	doCleanup := fs.Bool("cleanup", false, "remove everything the state directory holds on this host (see above), then exit; refuses while a backend or (without --kill) a sandbox uses it")
	fs.StringVar(&clean.StateDir, "state-dir", "", "with --cleanup: the state directory (default: the backend's, go-runtime-sandbox in the user's cache directory)")
	fs.BoolVar(&clean.KillSandboxes, "kill", false, "with --cleanup: end the sandboxes still running there instead of refusing")
	fs.BoolVar(&clean.RemoveDir, "remove", false, "with --cleanup: remove the state directory itself, its seed build caches too (the next backend rebuilds them, minutes)")
	missing := fs.Bool("missing", false, "print the required protections that are unavailable here with these options, comma-separated (nothing when none), then exit 0")
	if code, ok := cliflags.ParseFlagsOnly(fs, args); !ok {
		return code
	}
	if !*doCleanup && (clean.StateDir != "" || clean.KillSandboxes || clean.RemoveDir) {
		fmt.Fprintln(stderr, "sandbox-check: --state-dir, --kill and --remove go with --cleanup")
		return cliflags.ExitUsage
	}
	opts.DiskBytes = *diskMB << 20
	r, err := local.ParseRelax(*relax)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-check: --relax=%q: %v\n", *relax, err)
		return cliflags.ExitUsage
	}
	opts.Relax = r
	switch {
	case *doCleanup:
		return cleanup(ctx, clean, stdout, stderr)
	case *setup != "":
		return setupUser(*setup, opts, stdout, stderr)
	case *needed:
		return setupNeeded(opts, stdout)
	}

	prots := local.Check(ctx, opts)
	if *missing {
		var names []string
		for _, p := range prots {
			if p.Status == local.StatusUnavailable && p.Required {
				names = append(names, p.Name)
			}
		}
		if len(names) > 0 {
			fmt.Fprintln(stdout, strings.Join(names, ","))
		}
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "protection\tstatus\tdetail")
	refused := false
	for _, p := range prots {
		status := string(p.Status)
		if p.Status == local.StatusUnavailable && p.Required {
			status += " (required)"
			refused = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, status, p.Detail)
		if p.Fix != "" && p.Status == local.StatusUnavailable {
			// The fix names Options fields; this command's flags are
			// the front ends' for the local backend (optionflag).
			fmt.Fprintf(tw, "\tfix:\t%s\n", optionflag.Text(p.Fix, false))
		}
	}
	tw.Flush()
	if os.Geteuid() != 0 {
		summarize(stdout, prots, opts)
	}
	if refused {
		fmt.Fprintln(stdout, "\nThe local backend refuses to run sandboxes here with these options: apply a fix above, or relax the protection (--relax).")
		return 1
	}
	fmt.Fprintln(stdout, "\nThe local backend can run sandboxes here.")
	return 0
}
