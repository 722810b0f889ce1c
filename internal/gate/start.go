package gate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The host side: starting a gate, and mapping the ids of its user
// namespace when the caller's own uid is not all it maps.

// UserNS is the user and mount namespace a gate with a memory disk runs
// in. The caller is its root. A sandbox with host ids of its own also has
// Sub (subordinate ids of the caller's, from /etc/subuid and
// /etc/subgid) mapped to Inner, which takes the setuid helpers newuidmap
// and newgidmap (Map); the gate then starts with its capabilities in the
// namespace as ambient ones, since it is not yet the namespace's root when
// it starts.
type UserNS struct {
	UID, GID int  // the caller's
	Sub      *IDs // nil: only the caller's ids are mapped
	Inner    int  // what Sub maps to
	// NewUIDMap and NewGIDMap are the helpers' paths (with Sub).
	NewUIDMap, NewGIDMap string
}

// Takes are the ids a gate in ns takes before it becomes its command
// (Plan.UID, Plan.GID): Inner with subordinate ids, else none (0, 0): it
// stays the namespace's root, the caller.
func (ns *UserNS) Takes() (uid, gid int) {
	if ns == nil || ns.Sub == nil {
		return 0, 0
	}
	return ns.Inner, ns.Inner
}

// IDs are a user id and a group id.
type IDs struct{ UID, GID int }

// Command returns the command that starts exe (a runtime server binary,
// or a program that calls local.ServeIfChild) as a gate for p, with the
// environment env, in a session of its own, in ns's namespaces when ns is
// not nil. The caller sets its output and extra files and starts it;
// with ns.Sub set it must then Map the gate's ids before releasing it.
//
// The namespaces come from unshare(1) (util-linux 2.38 or later, found
// in env's PATH), which then execs the gate: the Go runtime can create a
// user namespace for a child only by copying the whole calling process
// (no vfork: syscall.SysProcAttr), which costs a large caller
// milliseconds and leaves its memory copy-on-write, slowing it after every
// start. unshare makes the mounts private, maps the caller to root
// without subordinate ids (--map-root-user), and otherwise passes its
// capabilities in the namespace on as ambient ones (--keep-caps).
func Command(exe string, p Plan, ns *UserNS, env []string) (*exec.Cmd, error) {
	args, err := p.Args()
	if err != nil {
		return nil, err
	}
	if p.Disk != nil && ns == nil {
		return nil, errors.New("gate plan: a memory disk needs a user namespace of its own")
	}
	cmd := exec.Command(exe, args...)
	if ns != nil {
		unshare, err := LookPath("unshare", envPath(env))
		if err != nil {
			return nil, fmt.Errorf("%w (util-linux 2.38 or later: scripts/install-deps.sh)", err)
		}
		u := []string{"--user", "--mount", "--propagation=private", "--map-root-user"}
		if ns.Sub != nil {
			u[3] = "--keep-caps"
		}
		cmd = exec.Command(unshare, append(append(u, "--", exe), args...)...)
	}
	cmd.Env = append(append([]string{}, env...), Env+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd, nil
}

// Run runs a gate for p (its WaitFD set here) with exe, ns and env as
// Command takes them, maps its ids, releases it and waits for its command
// to end, at most 30 seconds: a trial of what a sandbox's start would do
// (sandbox-check, the backend's checks in New). It returns the output of
// the gate and of its command.
func Run(ctx context.Context, exe string, p Plan, ns *UserNS, env []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	release, released, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer release.Close()
	defer released.Close()
	p.WaitFD = 3
	cmd, err := Command(exe, p, ns, env)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.ExtraFiles = []*os.File{release}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the gate %s: %w", exe, err)
	}
	release.Close()
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	defer stop()
	if err := Map(ctx, cmd.Process.Pid, ns); err != nil {
		released.Close()
		_ = cmd.Wait()
		return out.Bytes(), err
	}
	if _, err := released.Write([]byte("go\n")); err != nil {
		_ = cmd.Wait()
		return out.Bytes(), fmt.Errorf("release the gate: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return out.Bytes(), fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))
	}
	return out.Bytes(), nil
}

// LookPath finds an executable named name in the directories of path
// (a PATH): the gate's helpers are found in the gate's own PATH, not the
// caller's.
func LookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if p := filepath.Join(dir, name); unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, path)
}

// envPath is the PATH of the environment env.
func envPath(env []string) string {
	var path string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return path
}

// Map writes the id maps of the user namespace of the gate pid, started
// by Command with ns: with ns.Sub set, the caller's ids to 0 and ns.Sub's
// to ns.Inner, with newuidmap and newgidmap side by side, as soon as the
// namespace exists; otherwise unshare wrote them, and Map does nothing.
func Map(ctx context.Context, pid int, ns *UserNS) error {
	if ns == nil || ns.Sub == nil {
		return nil
	}
	if err := awaitUserNS(ctx, pid); err != nil {
		return err
	}
	maps := []struct {
		tool          string
		caller, inner int
	}{{ns.NewUIDMap, ns.UID, ns.Sub.UID}, {ns.NewGIDMap, ns.GID, ns.Sub.GID}}
	errs := make(chan error, len(maps))
	for _, m := range maps {
		go func() {
			out, err := exec.CommandContext(ctx, m.tool, strconv.Itoa(pid), "0", strconv.Itoa(m.caller), "1",
				strconv.Itoa(ns.Inner), strconv.Itoa(m.inner), "1").CombinedOutput()
			if err != nil {
				err = fmt.Errorf("map %d to %d in the sandbox's user namespace (%s): %w: %s", m.inner, ns.Inner, m.tool, err, strings.TrimSpace(string(out)))
			}
			errs <- err
		}()
	}
	return errors.Join(<-errs, <-errs)
}

// awaitUserNS waits until process pid is in a user namespace other than
// this process's: unshare(1) has made the gate's.
func awaitUserNS(ctx context.Context, pid int) error {
	own, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		return fmt.Errorf("read this process's user namespace: %w", err)
	}
	link := "/proc/" + strconv.Itoa(pid) + "/ns/user"
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 2*time.Millisecond) {
		ns, err := os.Readlink(link)
		if err != nil {
			return fmt.Errorf("the gate's user namespace: %w", err)
		}
		if ns != own {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the gate made no user namespace: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
}
