package cgroups

// A delegated cgroup v2 from the user's systemd. On a cgroup v2 host with
// systemd (Debian 12/13, Ubuntu 22.04+, Fedora) a user's process sits in
// a cgroup that is not the user's (a login session's scope, owned by
// root), where it can make no cgroup. The user's own service manager
// hands out cgroups that are: a transient scope unit with Delegate=yes,
// holding the process that asked for it, is what `systemd-run --user
// --scope -p Delegate=yes` makes for the command it runs. JoinSystemdScope
// asks for one over the user bus for this process; findLayout then
// finds the scope as this process's own cgroup, and enableControllers
// moves the process to a leaf of it (v2leaf.go).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// scopePrefix starts the names of the scopes JoinSystemdScope asks for:
// go-runtime-sandbox-<pid>-<random>.scope.
const scopePrefix = groupName + "-"

// Scope is the transient systemd scope this process runs in.
type Scope struct {
	Unit   string // the unit's name: go-runtime-sandbox-<pid>-<random>.scope
	Cgroup string // its cgroup v2 directory
	// Made: this call asked systemd for it; false when an earlier call
	// in this process did.
	Made bool
}

// joinMu serializes JoinSystemdScope: the cgroup it changes is the
// process's, one for all its callers (two backends made at once must
// not ask for two scopes).
var joinMu sync.Mutex

// JoinSystemdScope gets this process a cgroup v2 of its own from the
// user's systemd when it needs one: it is not root, the host has no
// cgroup v1 memory and pids hierarchies (v1 has delegate.go), and its
// own v2 cgroup is not writable by it. It then asks the user's service
// manager over the user bus for a transient scope unit with
// Delegate=yes holding this process, waits for the job's result, and
// checks that the process is in the scope's cgroup. It returns the scope
// this process runs in (made now or by an earlier call), or nil when it
// needs none. Errors name what failed and the fix.
func JoinSystemdScope(ctx context.Context) (*Scope, error) {
	if os.Geteuid() == 0 {
		return nil, nil
	}
	mounts, unified, err := mountedControllers()
	if err != nil {
		return nil, fmt.Errorf("find cgroup mounts: %w", err)
	}
	if (mounts["memory"] != "" && mounts["pids"] != "") || unified == "" {
		return nil, nil // v1 (delegate.go), or no cgroups to speak of (findLayout says so)
	}
	return joinScope(ctx, unified)
}

// joinScope is JoinSystemdScope on the cgroup2 mount unified.
func joinScope(ctx context.Context, unified string) (*Scope, error) {
	joinMu.Lock()
	defer joinMu.Unlock()
	dir, err := ownV2Dir(unified)
	if err != nil {
		return nil, err
	}
	if unit := filepath.Base(dir); isOurScope(unit) {
		return &Scope{Unit: unit, Cgroup: dir}, nil
	}
	if writableCgroup(dir) {
		return nil, nil // delegated already (systemd-run --user --scope -p Delegate=yes, a container's own)
	}
	conn, err := dialUserSystemd(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()

	unit, err := scopeName()
	if err != nil {
		return nil, err
	}
	props := []sdbus.Property{
		sdbus.PropDescription("go-runtime-sandbox: sandboxes' cgroups of process " + strconv.Itoa(os.Getpid())),
		sdbus.PropPids(uint32(os.Getpid())),
		{Name: "Delegate", Value: dbus.MakeVariant(true)},
	}
	done := make(chan string, 1) // buffered: the library's dispatcher never waits on us
	// "fail": the name is new, so nothing may be queued for it.
	if _, err := conn.StartTransientUnitContext(ctx, unit, "fail", props, done); err != nil {
		return nil, fmt.Errorf("ask your systemd for a delegated scope %s: %w (or run it under systemd-run --user --scope -p Delegate=yes)", unit, err)
	}
	select {
	case result := <-done:
		if result != "done" {
			return nil, fmt.Errorf("your systemd's job starting scope %s ended %q, not \"done\" (journalctl --user -u %s may say why; or run it under systemd-run --user --scope -p Delegate=yes)", unit, result, unit)
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for your systemd to start scope %s: %w", unit, ctx.Err())
	}
	now, err := ownV2Dir(unified)
	if err != nil {
		return nil, err
	}
	if filepath.Base(now) != unit {
		return nil, fmt.Errorf("your systemd started scope %s, but this process is still in cgroup %s, not the scope's", unit, now)
	}
	if !writableCgroup(now) {
		return nil, fmt.Errorf("your systemd moved this process into scope %s, but did not delegate its cgroup %s to uid %d (Delegate=yes): it is not writable", unit, now, os.Geteuid())
	}
	return &Scope{Unit: unit, Cgroup: now, Made: true}, nil
}

// ownV2Dir is this process's own cgroup v2 directory, the delegated
// cgroup when it was moved to that cgroup's hostLeaf.
func ownV2Dir(unified string) (string, error) {
	own, err := ownCgroups()
	if err != nil {
		return "", fmt.Errorf("read own cgroups: %w", err)
	}
	path, ok := own[""]
	if !ok {
		return "", errors.New("this process has no cgroup v2 (no 0:: line in /proc/self/cgroup)")
	}
	dir := filepath.Join(unified, path)
	if filepath.Base(dir) == hostLeaf {
		dir = filepath.Dir(dir)
	}
	return dir, nil
}

// isOurScope reports whether unit is named like the scopes
// JoinSystemdScope asks for.
func isOurScope(unit string) bool {
	return strings.HasPrefix(unit, scopePrefix) && strings.HasSuffix(unit, ".scope")
}

// writableCgroup reports whether this process (its effective uid) may
// make cgroups in dir, enable controllers for them and move processes
// in: what a delegation gives.
func writableCgroup(dir string) bool {
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control")} {
		if unix.Faccessat(unix.AT_FDCWD, p, unix.W_OK, unix.AT_EACCESS) != nil {
			return false
		}
	}
	return true
}

// scopeName is a new scope's unit name.
func scopeName() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("name a systemd scope: %w", err)
	}
	return fmt.Sprintf("%s%d-%s.scope", scopePrefix, os.Getpid(), hex.EncodeToString(b[:])), nil
}

// errNoUserBus starts the error saying there is no user bus to reach the
// user's systemd on.
var errNoUserBus = errors.New("no user systemd")

// dialUserSystemd connects to the user's service manager on the user bus,
// found as sd_bus_open_user finds it: DBUS_SESSION_BUS_ADDRESS, else the
// socket $XDG_RUNTIME_DIR/bus. Without either it fails (errNoUserBus)
// rather than let the D-Bus library start a bus of its own (dbus-launch),
// where no systemd listens.
func dialUserSystemd(ctx context.Context) (*sdbus.Conn, error) {
	var (
		conn *sdbus.Conn
		err  error
		addr = os.Getenv("DBUS_SESSION_BUS_ADDRESS")
	)
	switch runtime := os.Getenv("XDG_RUNTIME_DIR"); {
	case addr != "" && !strings.HasPrefix(addr, "autolaunch:"):
		conn, err = sdbus.NewUserConnectionContext(ctx)
	case runtime != "" && isSocket(filepath.Join(runtime, "bus")):
		addr = "unix:path=" + dbus.EscapeBusAddressValue(filepath.Join(runtime, "bus"))
		conn, err = sdbus.NewConnection(func() (*dbus.Conn, error) { return dialBus(ctx, addr) })
	case runtime == "":
		return nil, fmt.Errorf("%w: DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR are unset, so there is no user bus to ask your systemd for a delegated cgroup on: "+
			"run it under systemd-run --user --scope -p Delegate=yes, or as root", errNoUserBus)
	default:
		return nil, fmt.Errorf("%w: DBUS_SESSION_BUS_ADDRESS is unset and there is no socket $XDG_RUNTIME_DIR/bus (%s), so there is no user bus to ask your systemd for a delegated cgroup on: "+
			"run it under systemd-run --user --scope -p Delegate=yes, or as root", errNoUserBus, filepath.Join(runtime, "bus"))
	}
	if err != nil {
		return nil, fmt.Errorf("connect to your systemd on the user bus %s: %w (or run it under systemd-run --user --scope -p Delegate=yes)", addr, err)
	}
	return conn, nil
}

// dialBus opens a connection to the bus at addr, authenticated as this
// process's uid (EXTERNAL, no user name lookup) and registered (Hello),
// as sdbus.NewUserConnectionContext does for DBUS_SESSION_BUS_ADDRESS.
func dialBus(ctx context.Context, addr string) (*dbus.Conn, error) {
	c, err := dbus.Dial(addr, dbus.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Hello(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// isSocket reports whether path is a unix socket.
func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}
