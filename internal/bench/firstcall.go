package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The first-call section (issue 41): what a new user's first calls cost
// on a machine without the seed build cache. The built mcp-server starts
// over stdio on an empty state directory (so an empty seed and empty
// sandbox build caches), and as soon as initialize returns a go-sdk
// client calls run_go_code with hello world, then at once a second,
// different program, then hello world again, each with a progress token,
// counting the progress and log notifications that arrive while it
// waits. The baseline is the bare host running the same three programs
// with `go run main.go` in a row on an empty GOCACHE (the module cache as
// it is: neither program needs a module). Then the server runs on until
// its seed builds are complete (the base seed and the extra one, from its
// log), and fresh servers on that state directory time their first call
// of new code against the bare host's go run of new code with its warm
// cache, interleaved: once the seed is there, a first call is as fast as
// before. As root the section runs again as Config.RootlessUID (after
// root's one-time setup, with subordinate ids, as the rootless section
// does), its own empty state directory and GOCACHE.

// firstCallSecond is the second program: other packages than hello
// world's, so that the call compiles more than the first one left.
const firstCallSecond = `package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

func main() {
	b, _ := json.Marshal(map[string]string{"greeting": strings.ToUpper("hello")})
	fmt.Println(string(b))
}
`

// firstCallSteps are the calls of the section, in order.
var firstCallSteps = []struct{ name, main, stdout string }{
	{"hello world", helloMain, "hello, world\n"},
	{"a second program (encoding/json, strings)", firstCallSecond, "{\"greeting\":\"HELLO\"}\n"},
	{"hello world again", helloMain, "hello, world\n"},
}

// The server's log lines (mcp-server --log-level=debug) that say its seed
// builds are complete (seed.Builder's).
const (
	seedReadyLine  = "local backend: seed build cache ready"
	extraReadyLine = "local backend: extra seed build cache ready"
)

// firstCallSeedWait bounds the wait for the seed builds after the calls.
const firstCallSeedWait = 30 * time.Minute

// firstCallUser is who a run of the section is: this process's user, or
// another through wrap.
type firstCallUser struct {
	name  string   // in the table: "root", "uid 65532"
	wrap  []string // a command that runs its arguments as the user; nil: as this process
	env   []string // the user's environment
	uid   int      // the owner of what the run makes; -1: this process's user
	dir   string   // where the run's state directory and GOCACHE are made
	relax string   // mcp-server's --relax
}

// command returns the command running name with args as u.
func (u firstCallUser) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if len(u.wrap) > 0 {
		args = append(append(slices.Clip(u.wrap[1:]), name), args...)
		name = u.wrap[0]
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = u.env
	return cmd
}

// mkdir makes a new directory under u.dir, given to u.
func (u firstCallUser) mkdir(pattern string) (string, error) {
	d, err := os.MkdirTemp(u.dir, pattern)
	if err != nil {
		return "", err
	}
	if u.uid >= 0 {
		if err := os.Chown(d, u.uid, u.uid); err != nil {
			return "", err
		}
	}
	return d, nil
}

// firstCallSection measures the section as this process's user and, as
// root, as Config.RootlessUID.
func (r *runner) firstCallSection(ctx context.Context) error {
	me := firstCallUser{name: "as " + currentUser(), env: os.Environ(), uid: -1, dir: r.cfg.CacheDir}
	if os.Geteuid() == 0 {
		me.name = "root"
	}
	if err := r.firstCallRun(ctx, me); err != nil {
		return err
	}
	uid := r.cfg.RootlessUID
	if os.Geteuid() != 0 {
		r.note("first-call as uid %d skipped: it needs root, to give the user a cgroup; run it as root: go run ./cmd/bench --sections=first-call", uid)
		return nil
	}
	groups, err := local.DelegateCgroups(uid, uid)
	defer r.removeGroups(groups)
	if err != nil {
		r.note("first-call as uid %d skipped: delegating cgroups failed: %v", uid, err)
		return nil
	}
	home, _, err := r.rootlessDirs()
	if err != nil {
		return err
	}
	wrap, err := asUserWithSubIDs(filepath.Dir(home), uid)
	if err != nil {
		return err
	}
	// The rootless side's HOME holds no Go module cache of root's: the
	// programs need none.
	user := firstCallUser{name: fmt.Sprintf("uid %d", uid), wrap: wrap, env: rootlessEnv(home), uid: uid, dir: r.cfg.CacheDir}
	if err := os.Chmod(filepath.Dir(r.bins["mcp-server"]), 0o755); err != nil {
		return err
	}
	if user.relax, err = r.relaxFor(ctx, user); err != nil {
		return err
	}
	return r.firstCallRun(ctx, user)
}

// relaxFor returns --relax=disk when sandbox-check, run as u, says the
// disk quota is the only required protection missing (as make demo
// does: scripts/demo.sh), else nothing.
func (r *runner) relaxFor(ctx context.Context, u firstCallUser) (string, error) {
	if r.bins["sandbox-check"] == "" {
		bins, err := buildOurs(ctx, filepath.Dir(r.bins["mcp-server"]), "sandbox-check")
		if err != nil {
			return "", err
		}
		r.bins["sandbox-check"] = bins["sandbox-check"]
	}
	out, err := u.command(ctx, r.bins["sandbox-check"], "--missing").Output()
	if err != nil {
		return "", fmt.Errorf("sandbox-check --missing as %s: %w", u.name, err)
	}
	if strings.TrimSpace(string(out)) == local.ProtDiskQuota {
		r.note("first-call as %s: the disk quota is unavailable to the user (sandbox-check --missing), so its server runs with --relax=disk, as make demo does", u.name)
		return "disk", nil
	}
	return "", nil
}

// firstCallRun measures the section once as u: the bare host's sequence,
// the server's on an empty state directory, then fresh servers' first
// calls once the seed is complete.
func (r *runner) firstCallRun(ctx context.Context, u firstCallUser) error {
	state, err := u.mkdir("fc-state-") // short: the sandboxes' sockets are under it
	if err != nil {
		return err
	}
	defer r.removeState(ctx, state)
	host, err := u.mkdir("fc-host-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(host)
	r.logf("first-call %s: the bare host's go run on an empty GOCACHE", u.name)
	bare, err := r.hostFirstRuns(ctx, u, host)
	if err != nil {
		return err
	}
	r.logf("first-call %s: mcp-server on the empty state directory %s", u.name, state)
	if err := r.firstCallServer(ctx, u, state, bare); err != nil {
		return err
	}
	r.logf("first-call %s: fresh servers on the seeded state directory, %d rounds", u.name, r.cfg.Rounds)
	return r.seededFirstCalls(ctx, u, state, host)
}

// hostFirstRuns runs firstCallSteps' programs on the bare host as u, in a
// row, with `go run main.go` on a GOCACHE empty at first (under dir,
// kept for seededFirstCalls), and returns their times.
func (r *runner) hostFirstRuns(ctx context.Context, u firstCallUser, dir string) ([]time.Duration, error) {
	var out []time.Duration
	for i, s := range firstCallSteps {
		work := filepath.Join(dir, fmt.Sprint("step", i))
		if err := os.Mkdir(work, 0o755); err != nil {
			return nil, err
		}
		if err := writeModule(work, map[string]string{"main.go": s.main}); err != nil {
			return nil, err
		}
		d, got, err := u.goRun(ctx, dir, work, "go run main.go")
		if err != nil {
			return nil, err
		}
		if got != s.stdout {
			return nil, fmt.Errorf("bare host %s: printed %q, want %q", s.name, got, s.stdout)
		}
		out = append(out, d)
	}
	return out, nil
}

// goRun runs command in work as u with dir/gocache as GOCACHE and returns
// how long it took and its stdout.
func (u firstCallUser) goRun(ctx context.Context, dir, work, command string) (time.Duration, string, error) {
	cmd := u.command(ctx, "/bin/sh", "-c", command)
	cmd.Dir = work
	cmd.Env = append(slices.Clip(u.env), "GOCACHE="+filepath.Join(dir, "gocache"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	d := time.Since(start)
	if err != nil {
		return 0, "", fmt.Errorf("bare host %q as %s: %w: %s", command, u.name, err, stderr.String())
	}
	return d, string(out), nil
}

// firstCallServer times a server's start and its first calls on the empty
// state directory, then waits for its seed builds and says how long they
// took from the server's start.
func (r *runner) firstCallServer(ctx context.Context, u firstCallUser, state string, bare []time.Duration) error {
	logs := newWatchedLog(seedReadyLine, extraReadyLine)
	var n notifications
	start := time.Now()
	cs, err := r.startFirstCallServer(ctx, u, state, logs, &n)
	if err != nil {
		return err
	}
	defer cs.Close()
	r.add(Row{Section: SectionFirstCall, Figure: u.name + ": mcp-server started on an empty state directory, initialize answered", Ours: secs(time.Since(start))})
	for i, s := range firstCallSteps {
		t := time.Now()
		err := runGoCode(ctx, cs, map[string]string{"main.go": s.main}, "go run main.go", s.stdout, fmt.Sprint("first-call-", i))
		d := time.Since(t)
		if err != nil {
			return fmt.Errorf("%s: call %d (%s): %w (mcp-server log: %s)", u.name, i+1, s.name, err, logs)
		}
		progress, logged := n.take()
		r.logf("first-call %s: call %d (%s) answered in %s, %d progress and %d log notifications meanwhile", u.name, i+1, s.name, secs(d), progress, logged)
		r.add(Row{Section: SectionFirstCall, Figure: fmt.Sprintf("%s: call %d, run_go_code %s (%d progress, %d log notifications meanwhile)", u.name, i+1, s.name, progress, logged),
			Ours: secs(d), Baseline: "bare host go run, GOCACHE empty at the first: " + secs(bare[i]), Ratio: ratio(d, bare[i])})
		if i == 0 {
			r.add(Row{Section: SectionFirstCall, Figure: u.name + ": mcp-server start to the first result", Ours: secs(time.Since(start))})
		}
	}
	wctx, cancel := context.WithTimeout(ctx, firstCallSeedWait)
	defer cancel()
	r.logf("first-call %s: waiting for the server's seed builds", u.name)
	for _, line := range []string{seedReadyLine, extraReadyLine} {
		at, err := logs.wait(wctx, line)
		if err != nil {
			return fmt.Errorf("%s: waiting for %q in the server's log: %w (its log: %s)", u.name, line, err, logs)
		}
		r.add(Row{Section: SectionFirstCall, Figure: fmt.Sprintf("%s: %q, after the server's start", u.name, line), Ours: secs(at.Sub(start))})
	}
	return nil
}

// seededFirstCalls times, round by round against the bare host, the first
// run_go_code of new code of a fresh server on state, whose seed is now
// complete.
func (r *runner) seededFirstCalls(ctx context.Context, u firstCallUser, state, host string) error {
	round := 0
	first := func() (time.Duration, error) {
		round++
		var n notifications
		logs := newWatchedLog()
		cs, err := r.startFirstCallServer(ctx, u, state, logs, &n)
		if err != nil {
			return 0, err
		}
		defer cs.Close()
		start := time.Now()
		if err := runGoCode(ctx, cs, smallModule(9000+round), "go run .", "", "seeded"); err != nil {
			return 0, fmt.Errorf("%s: the first call of a seeded server: %w (its log: %s)", u.name, err, logs)
		}
		return time.Since(start), nil
	}
	bare := func() (time.Duration, error) {
		work := filepath.Join(host, fmt.Sprint("round", round))
		if err := os.Mkdir(work, 0o755); err != nil {
			return 0, err
		}
		if err := writeModule(work, smallModule(9500+round)); err != nil {
			return 0, err
		}
		d, _, err := u.goRun(ctx, host, work, "go run .")
		return d, err
	}
	s, err := interleaved(r.cfg.Rounds, first, bare)
	if err != nil {
		return err
	}
	f, h := s[0].p50(), s[1].p50()
	r.add(Row{Section: SectionFirstCall, Figure: u.name + ": seed complete, first run_go_code of new code of a fresh mcp-server, p50", Ours: ms(f),
		Baseline: "bare host go run of new code, warm GOCACHE: " + ms(h), Ratio: ratio(f, h), Target: "<= 1.3"})
	return nil
}

// removeState removes a state directory the section made, with what it
// holds on the host (local.Cleanup).
func (r *runner) removeState(ctx context.Context, state string) {
	if _, err := local.Cleanup(context.WithoutCancel(ctx), local.CleanupOptions{StateDir: state, KillSandboxes: true, RemoveDir: true}); err != nil {
		r.note("first-call: cleaning up %s: %v", state, err)
	}
}

// secs formats a duration in seconds.
func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// currentUser names this process's user.
func currentUser() string { return fmt.Sprintf("uid %d", os.Getuid()) }
