package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The rootless section: the local backend run by a user other than root,
// after root's one-time setup (local.DelegateCgroups, what
// `sandbox-check --setup-user` does), against the same backend run as
// root, in one run. Each runs in a side of its own (side.go): a copy of
// this binary, one as root and one as Config.RootlessUID, driven in turn
// by this process, which alternates them round by round (alternated) and
// lets both warm pools refill before every timed step, so load and
// refills fall on both alike. The rootless side has subordinate ids
// (asUserWithSubIDs), as a user Debian's adduser made has, so its
// sandboxes run as ids of their own; it relaxes the disk quota only when
// local.Check reports it unavailable; the table says which protections
// each side ran with.

// rootlessCommands are the go commands the section times, first and warm.
var rootlessCommands = []string{"go run .", "go build -o app ."}

// rootlessTarget bounds each rootless/root ratio (issue 24).
const rootlessTarget = "<= 1.1"

// rootlessSection measures the rootless section; without root, or when
// the cgroups cannot be delegated, it is skipped with a note.
func (r *runner) rootlessSection(ctx context.Context) error {
	return r.withSides(ctx, "rootless", rootlessCommands, func(root, rootless *sideProc) error {
		return r.rootlessFigures(root, rootless)
	})
}

// withSides starts the two sides, as root and as Config.RootlessUID (with
// its cgroups delegated for the run), sets them up running commands in
// their warm sessions, reports their protections, and runs fn with them;
// without root, or when the cgroups cannot be delegated, it notes that
// section is skipped and returns nil.
func (r *runner) withSides(ctx context.Context, section string, commands []string, fn func(root, rootless *sideProc) error) error {
	uid := r.cfg.RootlessUID
	if os.Geteuid() != 0 {
		r.note("%s section skipped: it needs root, to give uid %d a cgroup (local.DelegateCgroups) and run a backend as that uid beside one as root; run it as root: go run ./cmd/bench --sections=%s", section, uid, section)
		return nil
	}
	groups, err := local.DelegateCgroups(uid, uid)
	defer r.removeGroups(groups)
	if err != nil {
		r.note("%s section skipped: delegating cgroups to uid %d failed: %v", section, uid, err)
		return nil
	}
	bin, err := r.sideBinary()
	if err != nil {
		return err
	}
	home, state, err := r.rootlessDirs()
	if err != nil {
		return err
	}
	r.logf("%s: the backend as root and as uid %d (HOME %s, cgroups %s)", section, uid, home, strings.Join(groups, ", "))

	root, err := startSide(ctx, "root", bin, "", os.Environ(), nil, r.cfg.Log)
	if err != nil {
		return err
	}
	defer r.stopSide(root)
	wrap, err := asUserWithSubIDs(filepath.Dir(home), uid)
	if err != nil {
		return err
	}
	rootless, err := startSide(ctx, "rootless", bin, home, rootlessEnv(home), wrap, r.cfg.Log)
	if err != nil {
		return err
	}
	defer r.stopSide(rootless)

	hellos, err := setupSides(
		sideCall{root, sideSetup{ServerPath: r.bins["sandbox-server"], StateDir: r.cfg.StateDir, Commands: commands}},
		sideCall{rootless, sideSetup{ServerPath: r.bins["sandbox-server"], StateDir: state, Rootless: true, Commands: commands}})
	if err != nil {
		return err
	}
	if h := hellos[0]; h.EUID != 0 {
		return fmt.Errorf("the root side runs as effective uid %d, not root", h.EUID)
	}
	if h := hellos[1]; h.UID != uid || h.EUID != uid {
		return fmt.Errorf("the rootless side runs as uid %d (effective %d), not %d", h.UID, h.EUID, uid)
	}
	r.protectionFigures(section, hellos[0], hellos[1], uid)
	return fn(root, rootless)
}

// rootlessFigures times Open with and without the warm pool, and each of
// rootlessCommands first in a fresh session and in a warm one, on both
// sides, alternating.
func (r *runner) rootlessFigures(root, rootless *sideProc) error {
	settle := func() error {
		for _, p := range []*sideProc{root, rootless} {
			if _, err := p.call(sideRequest{Op: opSettle}); err != nil {
				return err
			}
		}
		return nil
	}
	step := func(p *sideProc, req func() sideRequest) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			if err := settle(); err != nil {
				return 0, err
			}
			rep, err := p.call(req())
			return rep.Took, err
		}
	}
	open := func(pool bool) func() sideRequest {
		return func() sideRequest { return sideRequest{Op: opOpen, Pool: pool} }
	}
	r.logf("rootless: open, %d rounds", r.cfg.Rounds)
	s, err := alternated(r.cfg.Rounds, step(root, open(true)), step(rootless, open(true)), step(root, open(false)), step(rootless, open(false)))
	if err != nil {
		return err
	}
	for i, what := range []string{"with the warm pool", "without the pool (a start)"} {
		base, ours := s[2*i], s[2*i+1]
		r.addRootless("open a sandbox "+what+", p50", ours.p50(), base.p50(), rootlessTarget)
		r.addRootless("open a sandbox "+what+", p90", ours.pct(90), base.pct(90), "")
	}
	code := 1000 // every timed command builds new code
	run := func(op, command string) func() sideRequest {
		return func() sideRequest { code++; return sideRequest{Op: op, Command: command, Code: code} }
	}
	for _, c := range rootlessCommands {
		r.logf("rootless: first and warm `%s`, %d rounds", c, r.cfg.Rounds)
		s, err := alternated(r.cfg.Rounds, step(root, run(opFirst, c)), step(rootless, run(opFirst, c)),
			step(root, run(opWarm, c)), step(rootless, run(opWarm, c)))
		if err != nil {
			return err
		}
		r.addRootless(fmt.Sprintf("first `%s` of new code in a fresh session, p50", c), s[1].p50(), s[0].p50(), rootlessTarget)
		r.addRootless(fmt.Sprintf("warm `%s` of new code, p50", c), s[3].p50(), s[2].p50(), rootlessTarget)
	}
	return nil
}

func (r *runner) addRootless(figure string, ours, root time.Duration, target string) {
	r.add(Row{Section: SectionRootless, Figure: figure, Ours: ms(ours), Baseline: "as root: " + ms(root), Ratio: ratio(ours, root), Target: target})
}

// protectionFigures puts the protections each side's sandboxes ran under
// in the table (a count and what was not in force) and in notes (every
// one by name, and why those not in force were not).
func (r *runner) protectionFigures(section string, root, rootless *sideHello, uid int) {
	r.add(Row{Section: section, Figure: "protections in force", Ours: protectionsText(rootless.Protections),
		Baseline: "as root: " + protectionsText(root.Protections)})
	for _, side := range []struct {
		name string
		h    *sideHello
	}{{"root", root}, {fmt.Sprintf("rootless (uid %d)", uid), rootless}} {
		var active, other []string
		for _, p := range side.h.Protections {
			if p.Status == local.StatusActive {
				active = append(active, p.Name)
			} else {
				other = append(other, fmt.Sprintf("%s %s: %s", p.Name, p.Status, p.Detail))
			}
		}
		r.note("%s side's sandboxes ran with %s%s", side.name, strings.Join(active, ", "), strings.Join(append([]string{""}, other...), "; "))
		for _, n := range side.h.Notes {
			r.note("%s side: %s", side.name, strings.TrimPrefix(n, "note: "))
		}
	}
}

// protectionsText counts the protections in force and names the others
// with their status: "8 of 10 active (disk-quota relaxed, host-uid not
// applicable)".
func protectionsText(ps []local.Protection) string {
	active := 0
	var other []string
	for _, p := range ps {
		if p.Status == local.StatusActive {
			active++
		} else {
			other = append(other, fmt.Sprintf("%s %s", p.Name, p.Status))
		}
	}
	s := fmt.Sprintf("%d of %d active", active, len(ps))
	if len(other) > 0 {
		s += " (" + strings.Join(other, ", ") + ")"
	}
	return s
}

// sideCall is one side's setup request.
type sideCall struct {
	p     *sideProc
	setup sideSetup
}

// setupSides sets the sides up at the same time (nothing is timed yet)
// and returns their hellos in order.
func setupSides(calls ...sideCall) ([]*sideHello, error) {
	hellos := make([]*sideHello, len(calls))
	errs := make([]error, len(calls))
	done := make(chan struct{})
	for i, c := range calls {
		go func() {
			defer func() { done <- struct{}{} }()
			rep, err := c.p.call(sideRequest{Op: opSetup, Setup: &c.setup})
			hellos[i], errs[i] = rep.Hello, err
			if err == nil && rep.Hello == nil {
				errs[i] = fmt.Errorf("%s side: setup answered without a hello", c.p.name)
			}
		}()
	}
	for range calls {
		<-done
	}
	return hellos, errors.Join(errs...)
}

// sideBinary copies this executable next to our built servers, in a
// directory the rootless uid can read (go run's own is root's alone), and
// returns the copy.
func (r *runner) sideBinary() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(r.bins["sandbox-server"])
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "bench-side")
	in, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	return dst, out.Close()
}

// rootlessDirs makes the rootless side's HOME and state directory under
// Config.RootlessDir, given to the rootless uid. They are kept: the state
// directory's seed build cache is built once per machine.
func (r *runner) rootlessDirs() (home, state string, err error) {
	dir := r.cfg.RootlessDir
	if dir == "" {
		dir = filepath.Join(r.cfg.CacheDir, "rootless")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	home, state = filepath.Join(dir, "home"), filepath.Join(dir, "state")
	for _, d := range []string{home, state} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return "", "", err
		}
		if err := os.Chown(d, r.cfg.RootlessUID, r.cfg.RootlessUID); err != nil {
			return "", "", err
		}
	}
	return home, state, nil
}

// rootlessEnv is this process's environment without what names root's
// own directories, with HOME set to home.
func rootlessEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); {
		case k == "HOME", k == "USER", k == "LOGNAME", k == "TMPDIR", k == "GOCACHE", k == "GOMODCACHE", k == "GOPATH", k == "GOENV",
			strings.HasPrefix(k, "XDG_"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home)
}

func (r *runner) stopSide(p *sideProc) {
	if err := p.stop(); err != nil {
		r.logf("rootless: %v", err)
	}
}

// removeGroups removes the groups delegated for the run (empty once the
// rootless side's backends are closed).
func (r *runner) removeGroups(groups []string) {
	for _, g := range groups {
		if err := os.Remove(g); err != nil {
			r.logf("rootless: remove the delegated cgroup: %v", err)
		}
	}
}

// rootlessSubIDs is the first of the 65,536 subordinate uids and gids the
// rootless side is granted: a user as Debian's adduser makes one has
// some, and its sandboxes then run as ids of their own.
const rootlessSubIDs = 1_800_100_000

// asUserWithSubIDs is the command that runs the rootless side as uid
// with an account and subordinate ids (rootlessSubIDs): in a mount
// namespace of its own, passwd, subuid and subgid files written in dir
// are layered over the host's /etc (a read-only overlay), and the side
// becomes uid there. The host's files stay as they are. Files bound over
// /etc/passwd one by one were unmounted there when the host renamed a
// new /etc/passwd over the old one (useradd, usermod), and the side then
// had no account (newuidmap: "Cannot determine your user name").
func asUserWithSubIDs(dir string, uid int) ([]string, error) {
	etc := filepath.Join(dir, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return nil, err
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return nil, err
	}
	passwd = fmt.Appendf(passwd, "grs-bench:x:%d:%d::/nonexistent:/usr/sbin/nologin\n", uid, uid)
	subids := fmt.Appendf(nil, "grs-bench:%d:65536\n", rootlessSubIDs)
	for name, body := range map[string][]byte{"passwd": passwd, "subuid": subids, "subgid": subids} {
		if err := os.WriteFile(filepath.Join(etc, name), body, 0o644); err != nil {
			return nil, err
		}
	}
	id := strconv.Itoa(uid)
	wrap := `mount -t overlay -o "lowerdir=$1:/etc" overlay /etc && shift && exec "$@"`
	return []string{"unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", wrap, "as-user", etc,
		"setpriv", "--reuid=" + id, "--regid=" + id, "--clear-groups", "--"}, nil
}
