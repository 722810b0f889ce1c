package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/seccomp"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
)

// Protections: the layers a sandbox runs under besides its namespaces and
// read-only mounts. Each is required unless Options.Relax relaxes it;
// New refuses (ErrUnavailable, naming the fix) when a required one cannot
// be had here, and Check reports each for cmd/sandbox-check.

// Protection names, as Check reports them.
const (
	ProtNamespaces   = "namespaces"
	ProtSeccomp      = "seccomp"
	ProtNestedUserns = "nested-userns-block"
	ProtCgroupMemory = "cgroup-memory"
	ProtCgroupPids   = "cgroup-pids"
	ProtCgroupCPU    = "cgroup-cpu"
	ProtDiskQuota    = "disk-quota"
	ProtHostUID      = "host-uid"
	ProtFileTable    = "file-table"
	ProtConnections  = "connections"
)

// Status is whether a protection is in force.
type Status string

const (
	StatusActive        Status = "active"
	StatusUnavailable   Status = "unavailable"
	StatusRelaxed       Status = "relaxed"        // unavailable or not wanted, and Options.Relax allows that
	StatusNotApplicable Status = "not applicable" // host uid when the caller is not root
)

// Protection is one layer's state on this host.
type Protection struct {
	Name   string
	Status Status
	// Detail says how it is provided, or why it is not.
	Detail string
	// Fix says what makes an unavailable protection available.
	Fix string
	// Required: New and Open refuse to run sandboxes while it is
	// unavailable.
	Required bool
}

// extraFiles are the files the gate (and so bubblewrap) inherits, as fd
// 3, 4, ... in order. Those it opened itself are closed by close.
type extraFiles struct {
	files []*os.File
	owned []*os.File
}

func (x *extraFiles) add(f *os.File) int {
	x.files = append(x.files, f)
	return 2 + len(x.files)
}

// pass lists the descriptors of x but skip: what the gate hands on to
// bubblewrap (gate.Plan.Pass).
func (x *extraFiles) pass(skip int) []int {
	var fds []int
	for fd := 3; fd < 3+len(x.files); fd++ {
		if fd != skip {
			fds = append(fds, fd)
		}
	}
	return fds
}

// pipeWith returns the read end of a pipe holding data (which must fit
// the pipe's buffer: 64 KiB).
func (x *extraFiles) pipeWith(data []byte) (int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	x.owned = append(x.owned, r)
	_, err = w.Write(data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("hand the seccomp program to bubblewrap: %w", err)
	}
	return x.add(r), nil
}

func (x *extraFiles) close() {
	for _, f := range x.owned {
		f.Close()
	}
	x.owned = nil
}

// layers are the per-process protections a sandbox's bubblewrap sets up.
type layers struct {
	seccompProg []byte // nil: no filter
	usernsBlock bool
}

// args are bubblewrap's flags for the seccomp filter and the nested user
// namespace block.
func (ly layers) args(x *extraFiles) ([]string, error) {
	var a []string
	if ly.seccompProg != nil {
		fd, err := x.pipeWith(ly.seccompProg)
		if err != nil {
			return nil, err
		}
		a = append(a, "--seccomp", fmt.Sprint(fd))
	}
	if ly.usernsBlock {
		a = append(a, "--disable-userns", "--assert-userns-disabled")
	}
	return a, nil
}

func (h *host) protectionArgs(x *extraFiles) ([]string, error) { return h.layers.args(x) }

// setupProtections decides, from the options and this host, which layers
// sandboxes get, and fails (naming the fix) when a required one is
// unavailable, or when a trial sandbox with every layer fails (naming
// the layer, diagnoseTrial). Relaxed ones are logged. The two checks
// that start processes (the trial and connectionsProblem's gate) run
// beside the others: a new backend is the first thing a fresh front end
// waits for.
func (h *host) setupProtections() error {
	o := *h.opts
	root := os.Geteuid() == 0
	var problems []string // every required protection missing, each with its fix
	if !o.Relax.Seccomp {
		prog, err := seccomp.Program()
		if err != nil {
			problems = append(problems, fmt.Sprintf("seccomp filter: %v (or relax it: Options.Relax.Seccomp)", err))
		}
		h.layers.seccompProg = prog
	}
	h.layers.usernsBlock = !o.Relax.NestedUserns
	h.hostUID = root && !o.Relax.HostUID
	type trialed struct {
		out string
		err error
	}
	trial := inBackground(func() trialed {
		out, err := trialSandbox(context.Background(), h.bwrap, h.layers, h.trialUID())
		return trialed{out, err}
	})
	connections := inBackground(func() *Protection {
		if o.Relax.Connections {
			return nil
		}
		return connectionsProblem(context.Background(), o, h.server)
	})
	if !o.Relax.DiskQuota {
		detail, fix := disk.HostProblem()
		if !root {
			detail, fix = memoryDiskProblem(context.Background(), h.server)
		}
		if detail != "" {
			problems = append(problems, fmt.Sprintf("disk quota unavailable: %s; fix: %s", detail, fix))
		}
		h.diskQuota, h.memoryDisk = true, o.usesMemoryDisk()
	}
	if !root {
		switch p := checkSubIDs(context.Background(), o, h.memoryDisk, h.server); p.Status {
		case StatusActive:
			s, _, _ := findSubIDs()
			h.subIDs = &s
		case StatusRelaxed:
		case StatusUnavailable:
			if p.Required {
				problems = append(problems, fmt.Sprintf("host uid per sandbox unavailable: %s; fix: %s", p.Detail, p.Fix))
				break
			}
			fallthrough
		default:
			o.Logger.Info("local backend: sandboxes run as your uid, not as subordinate uids of their own", "why", p.Detail, "fix", p.Fix)
		}
	}
	if !o.Relax.FileTable {
		if p := fileTableProblem(o.chargedMemory(h.memoryDisk), hostFileMax()); p != nil {
			problems = append(problems, fmt.Sprintf("open-file table too small: %s; fix: %s", p.Detail, p.Fix))
		}
	}
	if p := connections(); p != nil {
		problems = append(problems, fmt.Sprintf("TCP connection cap unavailable: %s; fix: %s", p.Detail, p.Fix))
	}
	for _, p := range checkCgroups(context.Background(), o) {
		if p.Required && p.Status == StatusUnavailable {
			problems = append(problems, fmt.Sprintf("cgroups unavailable: %s; fix: %s", p.Detail, p.Fix))
			break // the memory and pids rows share one cause
		}
	}
	tried := trial() // waited for either way: its bubblewrap is our child
	switch len(problems) {
	case 0:
	case 1:
		return errors.New(problems[0])
	default:
		return fmt.Errorf("%d required protections are unavailable (sandbox-check shows them all): %s", len(problems), strings.Join(problems, "; and "))
	}
	if tried.err != nil {
		return errors.New(h.diagnoseTrial(context.Background(), tried.out, tried.err))
	}
	for _, r := range []struct {
		relaxed bool
		name    string
	}{{o.Relax.Seccomp, ProtSeccomp}, {o.Relax.NestedUserns, ProtNestedUserns}, {o.Relax.HostUID, ProtHostUID}, {o.Relax.DiskQuota, ProtDiskQuota}, {o.Relax.FileTable, ProtFileTable}, {o.Relax.Connections, ProtConnections}} {
		if r.relaxed {
			o.Logger.Warn("local backend: protection relaxed by Options.Relax; sandboxes run without it", "protection", r.name)
		}
	}
	return nil
}

// inBackground runs f on a goroutine of its own and returns a function
// that waits for its result.
func inBackground[T any](f func() T) func() T {
	done := make(chan T, 1)
	go func() { done <- f() }()
	return sync.OnceValue(func() T { return <-done })
}

// trialSandbox runs a minimal sandbox (every namespace, the layers ly, cmd or
// /bin/true) as host uid uid (-1: as the caller) and returns bubblewrap's
// output on failure.
func trialSandbox(ctx context.Context, bwrap string, ly layers, uid int, cmd ...string) (string, error) {
	var x extraFiles
	defer x.close()
	a := []string{"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
		"--cap-drop", "ALL"}
	a = append(append(a, systemArgs()...), "--proc", "/proc", "--dev", "/dev")
	prot, err := ly.args(&x)
	if err != nil {
		return "", err
	}
	a = append(a, prot...)
	if len(cmd) == 0 {
		cmd = []string{"/bin/true"}
	}
	a = append(append(a, "--"), cmd...)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, bwrap, a...)
	c.ExtraFiles = x.files
	if uid >= 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	}
	out, err := c.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// trialUID is the uid trial sandboxes run as: the last of the sandbox range when
// sandboxes get host uids of their own, else the caller's own (-1).
func (h *host) trialUID() int {
	if h.hostUID {
		return h.opts.HostUIDBase + h.opts.HostUIDCount - 1
	}
	return -1
}

// diagnoseTrial names which layer made a trial sandbox with all of them fail.
func (h *host) diagnoseTrial(ctx context.Context, out string, err error) string {
	if o, err := trialSandbox(ctx, h.bwrap, layers{}, -1); err != nil {
		return fmt.Sprintf("bubblewrap cannot create namespaces here (%v: %s); allow unprivileged user namespaces "+
			"(sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged_userns=0), "+
			"or run outside a container that forbids them", err, o)
	}
	if h.hostUID {
		if o, err := trialSandbox(ctx, h.bwrap, layers{}, h.trialUID()); err != nil {
			return fmt.Sprintf("bubblewrap cannot run as an unprivileged host uid (%d) here (%v: %s): allow unprivileged user namespaces "+
				"(sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1), or relax it (Options.Relax.HostUID) to run sandboxes as root",
				h.trialUID(), err, o)
		}
	}
	if h.seccompProg != nil {
		if o, err := trialSandbox(ctx, h.bwrap, layers{seccompProg: h.seccompProg}, h.trialUID()); err != nil {
			return fmt.Sprintf("bubblewrap cannot load the seccomp filter (%v: %s): the kernel needs CONFIG_SECCOMP_FILTER; or relax it (Options.Relax.Seccomp)", err, o)
		}
	}
	if h.usernsBlock {
		if o, err := trialSandbox(ctx, h.bwrap, layers{usernsBlock: true}, h.trialUID()); err != nil {
			return fmt.Sprintf("bubblewrap cannot block nested user namespaces (%v: %s): --disable-userns needs bubblewrap 0.8 or later (scripts/install-deps.sh); or relax it (Options.Relax.NestedUserns)", err, o)
		}
	}
	return fmt.Sprintf("bubblewrap fails with this sandbox's protections (%v: %s)", err, out)
}

// RelaxNames are the names ParseRelax accepts, in Relax's field order.
var RelaxNames = []string{"seccomp", "userns", "hostuid", "disk", "filetable", "connections"}

// ParseRelax turns a comma-separated list of RelaxNames ("seccomp,disk",
// as front ends take it on their command line) into a Relax. Errors name
// the valid values; the caller names where the list came from.
func ParseRelax(s string) (Relax, error) {
	var r Relax
	for _, name := range strings.Split(s, ",") {
		switch strings.TrimSpace(name) {
		case "":
		case "seccomp":
			r.Seccomp = true
		case "userns":
			r.NestedUserns = true
		case "hostuid":
			r.HostUID = true
		case "disk":
			r.DiskQuota = true
		case "filetable":
			r.FileTable = true
		case "connections":
			r.Connections = true
		default:
			return r, fmt.Errorf("unknown protection %q (valid: %s)", name, strings.Join(RelaxNames, ", "))
		}
	}
	return r, nil
}
