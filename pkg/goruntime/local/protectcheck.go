package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/seccomp"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
)

// Check reports, for this host and opts, every protection a local sandbox
// runs under: namespaces, the seccomp filter, the nested user namespace
// block, the cgroup memory, pids and cpu controllers, the disk quota and
// the host uid. Unlike New it tries each one for real (a bubblewrap run
// per layer, a cgroup, a small file system), which takes about a second.
// A Required protection whose Status is StatusUnavailable means New or
// Open refuses to run sandboxes with these options.
func Check(ctx context.Context, opts Options) []Protection {
	o := opts.withDefaults()
	root := os.Geteuid() == 0
	var out []Protection
	add := func(p Protection) { out = append(out, p) }

	bw, err := exec.LookPath(o.BwrapPath)
	if err != nil {
		add(Protection{Name: ProtNamespaces, Status: StatusUnavailable, Required: true,
			Detail: fmt.Sprintf("bubblewrap (%s) not found", o.BwrapPath), Fix: installHint})
		return out
	}
	ns := Protection{Name: ProtNamespaces, Status: StatusActive, Required: true,
		Detail: "bubblewrap " + bwrapVersion(bw) + ": user, pid, net, ipc, uts namespaces; all capabilities dropped; read-only root"}
	if o2, err := trialSandbox(ctx, bw, layers{}, -1); err != nil {
		ns.Status, ns.Detail = StatusUnavailable, fmt.Sprintf("bubblewrap cannot create namespaces: %v: %s", err, o2)
		ns.Fix = "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; Ubuntu 24.04+: kernel.apparmor_restrict_unprivileged_userns=0), or run outside a container that forbids them"
	}
	add(ns)

	sc := Protection{Name: ProtSeccomp, Required: !o.Relax.Seccomp}
	switch prog, err := seccomp.Program(); {
	case o.Relax.Seccomp:
		sc.Status, sc.Detail = StatusRelaxed, "Options.Relax.Seccomp: sandboxes may make any system call"
	case err != nil:
		sc.Status, sc.Detail, sc.Fix = StatusUnavailable, err.Error(), "relax it (Options.Relax.Seccomp)"
	default:
		allowed, _ := seccomp.Allowed()
		if o2, err := trialSandbox(ctx, bw, layers{seccompProg: prog}, -1); err != nil {
			sc.Status, sc.Detail = StatusUnavailable, fmt.Sprintf("bubblewrap cannot load the filter: %v: %s", err, o2)
			sc.Fix = "a kernel with CONFIG_SECCOMP_FILTER, or relax it (Options.Relax.Seccomp)"
		} else {
			sc.Status, sc.Detail = StatusActive, fmt.Sprintf("%d system calls allowed (%d instructions); the rest fail with EPERM, clone3 with ENOSYS", len(allowed), len(prog)/8)
		}
	}
	add(sc)

	un := Protection{Name: ProtNestedUserns, Required: !o.Relax.NestedUserns}
	if o.Relax.NestedUserns {
		un.Status, un.Detail = StatusRelaxed, "Options.Relax.NestedUserns: bubblewrap does not block them (the seccomp filter still refuses them unless relaxed too)"
	} else if o2, err := trialSandbox(ctx, bw, layers{usernsBlock: true}, -1, "/bin/sh", "-c", "! unshare --user true 2>/dev/null"); err != nil {
		un.Status, un.Detail = StatusUnavailable, fmt.Sprintf("bubblewrap --disable-userns failed: %v: %s", err, o2)
		un.Fix = "bubblewrap 0.8 or later (scripts/install-deps.sh), or relax it (Options.Relax.NestedUserns)"
	} else {
		un.Status, un.Detail = StatusActive, "bubblewrap --disable-userns (user.max_user_namespaces=1 inside): creating one fails with ENOSPC"
		if !o.Relax.Seccomp {
			un.Detail += ", and the seccomp filter refuses it first with EPERM"
		}
	}
	add(un)

	// The runtime server's binary is also each sandbox's gate, which
	// makes a memory disk; "" when there is none (New would refuse).
	sb, _ := findServerBinary(o)
	out = append(out, checkCgroups(ctx, o)...)
	add(checkDisk(ctx, o, sb.Path))
	add(checkFileTable(o, o.usesMemoryDisk()))
	add(checkConnections(ctx, o, sb.Path))

	hu := Protection{Name: ProtHostUID, Required: root && !o.Relax.HostUID}
	switch {
	case !root:
		hu = checkSubIDs(ctx, o, !o.Relax.DiskQuota, sb.Path)
	case o.Relax.HostUID:
		hu.Status, hu.Detail = StatusRelaxed, "Options.Relax.HostUID: sandboxes run as host root (without capabilities); files they write belong to root"
	default:
		uid := o.HostUIDBase + o.HostUIDCount - 1
		if o2, err := trialSandbox(ctx, bw, layers{}, uid); err != nil {
			hu.Status, hu.Detail = StatusUnavailable, fmt.Sprintf("bubblewrap cannot run as uid %d: %v: %s", uid, err, o2)
			hu.Fix = "allow unprivileged user namespaces (sysctl user.max_user_namespaces > 0), or relax it (Options.Relax.HostUID)"
		} else {
			hu.Status, hu.Detail = StatusActive, fmt.Sprintf("each sandbox runs as a host uid of its own from %d-%d (leases in %s)", o.HostUIDBase, o.HostUIDBase+o.HostUIDCount-1, hostUIDDir)
		}
	}
	add(hu)
	return out
}

func bwrapVersion(bw string) string {
	out, err := exec.Command(bw, "--version").Output()
	if err != nil {
		return "(version unknown)"
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "bubblewrap ")
}

// checkCgroups makes and removes a cgroup with the limits opts sets.
// A caller that is not root on cgroup v2 first gets a delegated cgroup
// from its systemd when its own is not its (cgroups.JoinSystemdScope);
// the process stays in that scope.
func checkCgroups(ctx context.Context, o Options) []Protection {
	mem := Protection{Name: ProtCgroupMemory, Required: true}
	pids := Protection{Name: ProtCgroupPids, Required: true}
	cpu := Protection{Name: ProtCgroupCPU}
	unavailable := func(err error) []Protection {
		for i, p := range []*Protection{&mem, &pids, &cpu} {
			// The first row says why; the others point at it.
			p.Status, p.Detail = StatusUnavailable, err.Error()
			if i > 0 {
				p.Detail = fmt.Sprintf("no cgroup could be made (see %s)", mem.Name)
			}
			p.Fix = cgroupFix()
		}
		return []Protection{mem, pids, cpu}
	}
	jctx, cancel := context.WithTimeout(ctx, scopeTimeout)
	scope, err := cgroups.JoinSystemdScope(jctx)
	cancel()
	if err != nil {
		return unavailable(err)
	}
	if scope != nil && scope.Made {
		o.Logger.Info("local backend: moved into a transient scope from your systemd with Delegate=yes, for the sandboxes' cgroups", "unit", scope.Unit, "cgroup", scope.Cgroup)
	}
	cg, err := cgroups.New("check-"+sandboxid.New(), o.cgroupLimits(false, false))
	if err != nil {
		return unavailable(err)
	}
	defer cg.Remove()
	version := "v1"
	if cg.V2 {
		version = "v2"
	}
	if scope != nil {
		version += fmt.Sprintf(" (a transient scope from your systemd, Delegate=yes: %s)", scope.Unit)
	}
	mem.Status, mem.Detail = StatusActive, fmt.Sprintf("cgroup %s, %d MiB per sandbox (RAM+swap), OOM kills counted", version, o.MemoryBytes>>20)
	if o.usesMemoryDisk() {
		mem.Detail += fmt.Sprintf("; plus its memory disk's %d MiB (disk-quota)", o.DiskBytes>>20)
	}
	pids.Status, pids.Detail = StatusActive, fmt.Sprintf("cgroup %s, %d tasks per sandbox", version, o.Processes)
	if cg.CPU == "" {
		cpu.Status, cpu.Detail = StatusUnavailable, "no cpu controller mounted: sandboxes are not capped in CPU time (GOMAXPROCS still is)"
		cpu.Fix = "mount the cgroup v1 cpu controller, or use cgroup v2 with cpu delegated"
	} else {
		cpu.Status, cpu.Detail = StatusActive, fmt.Sprintf("cgroup %s, %d CPUs per sandbox", version, o.CPUs)
	}
	return []Protection{mem, pids, cpu}
}

// scopeTimeout bounds asking the user's systemd for a delegated scope
// (a D-Bus call and one job; milliseconds when systemd answers).
const scopeTimeout = 30 * time.Second

// cgroupFix says how a caller without cgroups gets them on this host.
func cgroupFix() string {
	if cgroups.V1() {
		return "run as root; or have root give you a cgroup group of your own, once per boot: " + SetupCommand(callerName())
	}
	return "run as root; or start the program in a cgroup systemd delegates to you: systemd-run --user --scope -p Delegate=yes <command>"
}

// callerName is the caller's user name, else its uid.
func callerName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return strconv.Itoa(os.Geteuid())
}

// checkFileTable reports whether the host's open-file table is large
// enough that no sandbox can fill it (fileTableProblem); memoryDisk says
// whether sandboxes' disks are in memory (storage.go).
func checkFileTable(o Options, memoryDisk bool) Protection {
	fileMax, charged := hostFileMax(), o.chargedMemory(memoryDisk)
	if p := fileTableProblem(charged, fileMax); p != nil {
		if o.Relax.FileTable {
			p.Status, p.Required, p.Fix = StatusRelaxed, false, ""
			p.Detail = "Options.Relax.FileTable: " + p.Detail
		}
		return *p
	}
	return Protection{Name: ProtFileTable, Status: StatusActive, Required: !o.Relax.FileTable,
		Detail: fmt.Sprintf("fs.file-max %d: a sandbox holds at most %d files through descriptors (%d tasks x %d, RLIMIT_NOFILE) and about %d through mappings (the %d MiB its memory limit allows)",
			fileMax, int64(o.Processes+OwnTasks)*int64(o.OpenFiles), o.Processes+OwnTasks, o.OpenFiles, charged/mappedFileBytes, charged>>20)}
}

// checkConnections reports whether sandboxes' TCP connections are capped
// (connectionsProblem).
func checkConnections(ctx context.Context, o Options, gateExe string) Protection {
	switch p := connectionsProblem(ctx, o, gateExe); {
	case o.Network:
		return Protection{Name: ProtConnections, Status: StatusNotApplicable,
			Detail: "Options.Network: sandboxes use the host's network namespace, where neither the cap nor the listen queue is theirs to set"}
	case p != nil && o.Relax.Connections:
		return Protection{Name: ProtConnections, Status: StatusRelaxed,
			Detail: "Options.Relax.Connections: " + p.Detail}
	case p != nil:
		return *p
	case o.Relax.Connections:
		return Protection{Name: ProtConnections, Status: StatusRelaxed,
			Detail: "Options.Relax.Connections: a sandbox may queue unaccepted connections the host pays for (listen queue 128 each)"}
	}
	return Protection{Name: ProtConnections, Status: StatusActive, Required: true,
		Detail: fmt.Sprintf("at most %d TCP connections per sandbox and address family (netfilter connlimit in its own network namespace, set by its gate; Options.Connections), %d queued per listener", o.Connections, listenQueue)}
}

// checkDisk makes, mounts and removes a minimal sandbox disk: an ext4
// image as root, a memory disk otherwise.
func checkDisk(ctx context.Context, o Options, gateExe string) Protection {
	if o.Relax.DiskQuota {
		return Protection{Name: ProtDiskQuota, Status: StatusRelaxed,
			Detail: "Options.Relax.DiskQuota: sandboxes write to the state directory's file system, capped only per file (FileSizeBytes)"}
	}
	p := Protection{Name: ProtDiskQuota, Status: StatusUnavailable, Required: true}
	if os.Geteuid() != 0 {
		if p.Detail, p.Fix = memoryDiskProblem(ctx, gateExe); p.Detail != "" {
			return p
		}
		p.Status = StatusActive
		p.Detail = fmt.Sprintf("not root: a tmpfs per sandbox in its own user and mount namespace: %d MiB and %d inodes for /app, HOME with its caches and /tmp together, "+
			"held in memory and charged to the sandbox's memory limit, which is raised by as much (%d MiB in all)", o.DiskBytes>>20, o.DiskInodes, o.chargedMemory(true)>>20)
		if o.MemoryBudgetBytes > 0 {
			p.Detail += fmt.Sprintf("; all your sandboxes together are promised at most %d MiB (Options.MemoryBudgetBytes, by default half the host's memory): %d such at once",
				o.MemoryBudgetBytes>>20, o.MemoryBudgetBytes/o.chargedMemory(true))
		}
		return p
	}
	if p.Detail, p.Fix = disk.HostProblem(); p.Detail != "" {
		return p
	}
	if err := disk.Try(ctx, MinDiskBytes, MinDiskInodes); err != nil {
		p.Detail = "cannot make and loop-mount a small ext4 image: " + err.Error()
		p.Fix = "give this host loop devices (modprobe loop) and e2fsprogs, or relax it (Options.Relax.DiskQuota)"
		return p
	}
	p.Status = StatusActive
	p.Detail = fmt.Sprintf("a loop-mounted ext4 image per sandbox: %d MiB and %d inodes for /app, HOME with its caches and /tmp together", o.DiskBytes>>20, o.DiskInodes)
	return p
}
