package local

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/seed"
)

// Paths inside a sandbox.
const (
	appDir    = "/app"          // work directory, writable
	homeDir   = "/home/sandbox" // HOME, private, writable
	runDir    = "/run/sandbox"  // holds the server's socket
	serverBin = "/.sandbox/server"
	// processAPIBin is the server's process API companion, next to
	// serverBin where the server looks for it.
	processAPIBin = "/.sandbox/" + server.ProcessAPIName
	modCacheRO    = "/go/pkg/mod" // the host module cache, read-only
	// hostSocketsDir holds the host's sockets for a sandbox with ids of
	// its own (idleases.go): the module proxy's.
	hostSocketsDir = "/run/sandbox-host"
	sandboxUID     = 1000
	socketName     = "server.sock"
	childEnv       = "GORUNTIME_SANDBOX_CHILD" // see ServeIfChild

	// shmBytes caps /dev/shm, a tmpfs of its own: its files live in
	// memory charged to the sandbox's memory limit and outlive the
	// command that wrote them, so an unbounded one (bubblewrap's /dev
	// tmpfs is half the host's RAM) would let one command leave every
	// later one starved of memory. Past it, writes fail with ENOSPC.
	shmBytes = 64 << 20
)

// lifelineFD is the descriptor, in the sandbox, of the lifeline: the
// read end of a pipe whose write end only the opening process holds. The
// server is the sandbox's first process (PID 1 of its pid namespace,
// bubblewrap's --as-pid-1) and watches it (--lifeline-fd): EOF (the opener
// closed the sandbox or died) makes the server exit, and with PID 1 the
// kernel ends every process in the namespace; the line "detach"
// (Disconnect) makes it let go. As PID 1 in --init mode the server cannot
// be killed, stopped or traced by the commands it runs
// (internal/server/sandboxinit.go).
const lifelineFD = 3

// procs is GOMAXPROCS for a sandbox's commands: its CPUs, at most the
// host's.
func (h *host) procs() int { return min(h.opts.CPUs, runtime.NumCPU()) }

// sandboxEnv is the environment of the server and so of every command,
// but for GOMAXPROCS: the server runs with 1 (its own work is a request
// or two at a time, and each P costs it ~0.15 MiB resident, a twentieth
// of an idle sandbox) and gives commands procs (serverFlags).
func (h *host) sandboxEnv() []string {
	o := *h.opts
	env := []string{
		"PATH=" + filepath.Join(h.goroot, "bin") + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + homeDir,
		"USER=sandbox",
		"LOGNAME=sandbox",
		"LANG=C.UTF-8",
		"TMPDIR=/tmp",
		"GOCACHE=" + homeDir + "/.cache/go-build",
		"GOPATH=" + homeDir + "/go",
		"GOTOOLCHAIN=local",
		"CGO_ENABLED=0",
		"GOFLAGS=-mod=mod",
		"GOMAXPROCS=1",
		"GOMEMLIMIT=" + strconv.FormatInt(o.MemoryBytes/10*9, 10),
		// The seed's test2json, through GOCACHE's view of the seed
		// (absent in a sandbox opened before the seed was complete).
		goruntime.Test2jsonEnv + "=" + homeDir + "/.cache/go-build/" + seed.Test2json,
	}
	// Each sandbox has its own writable module cache, filled from the
	// host's cache (bound read-only, used as a file:// proxy) and, with
	// Network, from the host's GOPROXY after it; with AllowModules, from
	// the host's module proxy after it (modules.go).
	env = append(env, "GOMODCACHE="+homeDir+"/go/pkg/mod")
	return append(env, h.moduleEnv()...)
}

// seedEnv is sandboxEnv as the seed build on the host needs it: the
// settings that enter action IDs, none of the sandbox paths.
func (h *host) seedEnv() []string {
	var env []string
	for _, kv := range h.sandboxEnv() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOTOOLCHAIN", "CGO_ENABLED", "GOFLAGS", "LANG":
			env = append(env, kv)
		}
	}
	return append(env,
		"PATH="+filepath.Join(h.goroot, "bin")+":/usr/local/bin:/usr/bin:/bin",
		"GOENV=off", "GOPROXY=off", "GOSUMDB=off", "GOMODCACHE="+h.modCache)
}

// bwrapArgs builds bubblewrap's command line for a sandbox. Files it
// passes by descriptor (the seccomp program, bind sources when the sandbox
// runs as a host uid of its own) are added to x.
func (h *host) bwrapArgs(l layout, x *extraFiles, idleExit time.Duration) ([]string, error) {
	a := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxUID),
		"--hostname", "sandbox",
		"--cap-drop", "ALL",
		"--new-session",
		"--clearenv",
	}
	prot, err := h.protectionArgs(x)
	if err != nil {
		return nil, err
	}
	a = append(a, prot...)
	// Without Network the gate has made the sandbox's network namespace
	// (netns.go), and bubblewrap shares it: no --unshare-net.
	for _, kv := range h.sandboxEnv() {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	if h.childMode {
		a = append(a, "--setenv", childEnv, "1")
	}
	a = append(a, systemArgs()...)
	a = append(a, h.mountArgs(l)...)
	a = append(a,
		"--remount-ro", "/",
		"--chdir", appDir,
		"--as-pid-1",
		"--",
		serverBin,
	)
	return append(a, h.serverFlags(idleExit).Args()...), nil
}

// mountArgs are bubblewrap's arguments for the sandbox's file system
// past the system's (systemArgs): the host's /etc files it reads, its
// own, Go, the module cache, /proc, /dev and its writable directories.
func (h *host) mountArgs(l layout) []string {
	var a []string
	// bind binds a path of ours. When sandboxes run as a host uid of
	// their own, bubblewrap runs as that uid and must reach every source
	// path: as root's, the sandbox's own directories are on its disk
	// under runRoot, and the module cache, Go and the server are staged
	// there when their own paths are not (stage.go); as a user's
	// subordinate ids, its disk is under the user's subIDRoot and the
	// rest is staged on it (idleases.go, l.source).
	bind := func(flag, src, dst string) { a = append(a, flag, l.source(src), dst) }
	etc := []string{"/etc/ssl", "/etc/ca-certificates", "/etc/localtime", "/etc/nsswitch.conf", "/etc/alternatives"}
	if h.opts.Network {
		etc = append(etc, "/etc/resolv.conf", "/etc/hosts", "/etc/gai.conf")
	} else {
		bind("--ro-bind", filepath.Join(l.etc(), "hosts"), "/etc/hosts")
	}
	for _, p := range etc {
		a = append(a, "--ro-bind-try", p, p)
	}
	if h.modCache == "" {
		a = append(a, "--dir", modCacheRO)
	}
	bind("--ro-bind", filepath.Join(l.etc(), "passwd"), "/etc/passwd")
	bind("--ro-bind", filepath.Join(l.etc(), "group"), "/etc/group")
	if !strings.HasPrefix(h.goroot, "/usr/") {
		bind("--ro-bind", h.bindGoroot, h.goroot)
	}
	if h.modCache != "" {
		bind("--ro-bind", h.bindModCache, modCacheRO)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev",
		"--perms", "1777", "--size", strconv.Itoa(shmBytes), "--tmpfs", "/dev/shm")
	bind("--bind", l.app(), appDir)
	bind("--bind", l.home(), homeDir)
	bind("--bind", l.tmp(), "/tmp")
	bind("--bind", l.run(), runDir)
	bind("--ro-bind", h.bindServer, serverBin)
	if h.processAPI != "" {
		bind("--ro-bind", h.bindProcessAPI, processAPIBin)
	}
	if l.ownIDs {
		// The host's sockets for it (the module proxy's), in a directory
		// the sandbox cannot change (modules.go).
		a = append(a, "--ro-bind", filepath.Join(l.disk, disk.HostDir), hostSocketsDir)
	}
	return a
}

// serverFlags are the settings of a sandbox's runtime server; idleExit,
// when positive, makes it end the sandbox once idle that long (a handle's
// sandbox, handles.go).
func (h *host) serverFlags(idleExit time.Duration) server.Flags {
	f := server.Defaults()
	f.Init = true
	f.LifelineFD = lifelineFD
	f.IdleExitSeconds = int64((idleExit + time.Second - 1) / time.Second)
	f.Addr = "unix:" + runDir + "/" + socketName
	f.GRPCAddr = "unix:" + runDir + "/" + grpcSocketName
	f.BaseDir = appDir
	f.ExecTimeout.D = h.opts.ExecTimeout
	f.MaxOutputBytes = h.opts.OutputBytes
	f.OSThreads = serverOSThreads
	f.CommandGOMAXPROCS = int64(h.procs())
	// The go command's telemetry off: no counter files under the
	// sandbox's HOME. Only the mode file sets it (GOTELEMETRY in the
	// environment is read-only: the go command reports the mode there).
	f.GoTelemetry = "off"
	h.modules.relayFlags(&f, h.subIDs != nil)
	return f
}

// writeEtc writes the sandbox's own passwd, group and hosts files.
func writeEtc(l layout) error {
	files := map[string]string{
		"passwd": fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:%d:%d:sandbox:%s:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", sandboxUID, sandboxUID, homeDir),
		"group":  fmt.Sprintf("root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n", sandboxUID),
		"hosts":  "127.0.0.1 localhost sandbox\n::1 localhost\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(l.etc(), name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// systemArgs are bubblewrap's arguments for the system, read-only: /usr
// and the top-level links or directories that point into it on
// merged-/usr systems. Sandboxes and the protection probes see the host
// through these alone, never through a recursive bind of "/": that would
// also copy every mount under it, among them other sandboxes' disks,
// which their owners unmount at any moment (bubblewrap then fails to
// remount the vanished one read-only).
func systemArgs() []string {
	a := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	return a
}
