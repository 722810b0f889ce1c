package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// hotpathCommands are the warm commands the hotpath section splits.
var hotpathCommands = []string{"go run .", "go test ./..."}

// hotpathSession is one warm session of a backend of its own, without a
// warm pool (nothing refills beside the timed commands).
type hotpathSession struct {
	name string // what its backend relaxes, for the figures
	b    *local.Backend
	s    *goruntime.Session
	// call and command are each timed call, whole (the client's clock) and
	// the command alone (the runtime server's clock, Result.Duration); cpu
	// is the command's CPU time (the server's rusage, Result.CPU).
	call, command, cpu durations
}

// run ships files and runs command in h's session, keeping both clocks.
func (h *hotpathSession) run(ctx context.Context, files []goruntime.File, command string) (time.Duration, error) {
	start := time.Now()
	res, err := h.s.Execute(ctx, goruntime.Request{Files: files, Command: command, Timeout: 5 * time.Minute})
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", h.name, err)
	}
	if res.ExitCode != 0 {
		return 0, fmt.Errorf("%s: %q: exit %d: %s%s", h.name, command, res.ExitCode, res.Stdout, res.Stderr)
	}
	h.call = append(h.call, d)
	h.command = append(h.command, res.Duration)
	h.cpu = append(h.cpu, res.CPU)
	return d, nil
}

// openHotpath opens a warm session of a backend of its own with relax
// and no warm pool; closeIt closes both.
func (r *runner) openHotpath(ctx context.Context, name string, relax local.Relax) (h *hotpathSession, closeIt func(), err error) {
	b, err := r.newLocal(ctx, local.Options{WarmPool: -1, Relax: relax})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	s, err := goruntime.Open(ctx, b, goruntime.Options{})
	if err != nil {
		_ = b.Close(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return &hotpathSession{name: name, b: b, s: s}, func() {
		_ = s.Close(context.WithoutCancel(ctx))
		_ = b.Close(context.WithoutCancel(ctx))
	}, nil
}

// hostRunCPU is hostRun that also returns the command's CPU time (user
// and system, its own and that of the processes it waited for).
func hostRunCPU(ctx context.Context, dir, command string) (wall, cpu time.Duration, err error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("host %q: %w: %s", command, err, out)
	}
	return time.Since(start), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// hotpathSection splits where a warm sandbox's time goes beyond the bare
// host's (issue 41), each part measured side by side in the same rounds:
// the call around the command (the client's clock minus the server's:
// the files and the command in one HTTP round trip over the unix
// socket, the limit counters), the go command itself in the sandbox against the bare
// host, and what the seccomp filter and the disk of its own (with a host
// uid of its own) add, each from a sandbox with that protection relaxed
// (Options.Relax) beside one with every protection; each in wall time
// and in CPU time (the runtime server's rusage of the command against
// the host's of its own), which a busy machine sways far less: on a
// shared machine the wall figures carry the CPU the sandboxes' cgroup
// gets against everything else, the CPU figures the work done. A relaxed
// variant this machine or user cannot open is left out with a note. Then
// the fixed cost of a call: `true` through Sandbox.Exec against a bare
// exec, and the small module's files sent with it.
func (r *runner) hotpathSection(ctx context.Context) error {
	variants := []struct {
		name  string
		relax local.Relax
	}{
		{"every protection", local.Relax{}},
		{"no seccomp filter", local.Relax{Seccomp: true}},
		{"no disk of its own, no uid of its own", local.Relax{DiskQuota: true, HostUID: true}},
	}
	var hs []*hotpathSession
	for i, v := range variants {
		h, closeIt, err := r.openHotpath(ctx, v.name, v.relax)
		if err != nil && i > 0 {
			r.note("hotpath: no sandbox with %s here (%v): its rows are left out", v.name, err)
			continue
		}
		if err != nil {
			return err
		}
		defer closeIt()
		hs = append(hs, h)
	}
	host, err := os.MkdirTemp("", "bench-host-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(host)
	code := 0
	for _, c := range hotpathCommands {
		steps := make([]func() (time.Duration, error), 0, len(hs)+1)
		var hostCPU durations
		for _, h := range hs {
			h.call, h.command, h.cpu = nil, nil, nil
			steps = append(steps, func() (time.Duration, error) {
				code++
				return h.run(ctx, files(smallModule(9000+code)), c)
			})
		}
		steps = append(steps, func() (time.Duration, error) {
			code++
			if err := writeModule(host, smallModule(9000+code)); err != nil {
				return 0, err
			}
			wall, cpu, err := hostRunCPU(ctx, host, c)
			hostCPU = append(hostCPU, cpu)
			return wall, err
		})
		s, err := alternated(r.cfg.Rounds, steps...)
		if err != nil {
			return err
		}
		bare := s[len(hs)]
		full := hs[0]
		// alternated keeps one sample per round for each step; the
		// sessions' own lists hold the warm-up round's too.
		call, command, cpu := full.call[1:], full.command[1:], full.cpu[1:]
		hostCPU = hostCPU[1:]
		r.add(Row{Section: "hotpath", Figure: fmt.Sprintf("warm `%s`: the call around the command (client's clock - server's), p50", c),
			Ours: ms(added(call, command).p50()), Baseline: "the whole call: " + ms(call.p50()), Ratio: ratio(added(call, command).p50(), call.p50())})
		r.add(Row{Section: "hotpath", Figure: fmt.Sprintf("warm `%s`: the command in the sandbox (server's clock), p50", c),
			Ours: ms(command.p50()), Baseline: "bare host: " + ms(bare.p50()), Ratio: ratio(command.p50(), bare.p50())})
		r.add(Row{Section: "hotpath", Figure: fmt.Sprintf("warm `%s`: the command's CPU time in the sandbox (server's rusage), p50", c),
			Ours: ms(cpu.p50()), Baseline: "bare host: " + ms(hostCPU.p50()), Ratio: ratio(cpu.p50(), hostCPU.p50())})
		for i, h := range hs[1:] {
			r.add(Row{Section: "hotpath", Figure: fmt.Sprintf("warm `%s`: every protection - %s, p50 per round", c, h.name),
				Ours: ms(added(s[0], s[i+1]).p50()), Baseline: h.name + ": " + ms(s[i+1].p50()), Ratio: ratio(s[0].p50(), s[i+1].p50())})
			hcpu := h.cpu[1:]
			r.add(Row{Section: "hotpath", Figure: fmt.Sprintf("warm `%s`: every protection - %s, CPU time, p50 per round", c, h.name),
				Ours: ms(added(cpu, hcpu).p50()), Baseline: h.name + ": " + ms(hcpu.p50()), Ratio: ratio(cpu.p50(), hcpu.p50())})
		}
	}
	if err := r.firstGoTest(ctx, hs[0]); err != nil {
		return err
	}
	return r.fixedCosts(ctx, hs[0].s)
}

// firstGoTest times the first `go test ./...` of new code in a fresh
// session of h's backend (Open and Close untimed) against the same in
// h's warm session, rounds alternated. What a fresh session's first go
// test may pay beyond a warm one's is what the session does once per
// sandbox: since the seed holds test2json (seed.Test2json), building it
// is not among it.
func (r *runner) firstGoTest(ctx context.Context, h *hotpathSession) error {
	const c = "go test ./..."
	code := 0
	first := func() (time.Duration, error) {
		code++
		fresh, err := goruntime.Open(ctx, h.b, goruntime.Options{})
		if err != nil {
			return 0, err
		}
		defer fresh.Close(context.WithoutCancel(ctx))
		return execOK(ctx, fresh, goruntime.Request{Files: files(smallModule(9500 + code)), Command: c})
	}
	warm := func() (time.Duration, error) {
		code++
		return execOK(ctx, h.s, goruntime.Request{Files: files(smallModule(9500 + code)), Command: c})
	}
	s, err := alternated(r.cfg.Rounds, first, warm)
	if err != nil {
		return err
	}
	r.add(Row{Section: "hotpath", Figure: fmt.Sprintf("first `%s` of new code in a fresh session (no warm pool), p50", c), Ours: ms(s[0].p50()),
		Baseline: "same in a warm session: " + ms(s[1].p50()), Ratio: ratio(s[0].p50(), s[1].p50()), Target: "<= 1.2"})
	return nil
}

// fixedCosts measures what every call pays whatever it runs: `true`
// through Sandbox.Exec (HTTP over the unix socket, the runtime server's
// fork and exec, the limit counters) against a bare exec of the same in
// this process, and the same through Session.Execute with the small
// module's three files (sent with the command: POST /unpack-execute).
func (r *runner) fixedCosts(ctx context.Context, s *goruntime.Session) error {
	sb := s.Sandbox()
	exe := func() (time.Duration, error) {
		start := time.Now()
		res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "true", Timeout: time.Minute})
		if err != nil {
			return 0, err
		}
		if res.ExitCode != 0 {
			return 0, fmt.Errorf("true: exit %d: %s", res.ExitCode, res.Stderr)
		}
		return time.Since(start), nil
	}
	shipped := func() (time.Duration, error) {
		return execOK(ctx, s, goruntime.Request{Files: files(smallModule(0)), Command: "true"})
	}
	bare := func() (time.Duration, error) { return timed(bareExec) }
	st, err := alternated(r.cfg.Rounds*10, bare, exe, shipped)
	if err != nil {
		return err
	}
	r.add(Row{Section: "hotpath", Figure: "`true` through Sandbox.Exec - a bare exec, p50 per round", Ours: ms(added(st[1], st[0]).p50()),
		Baseline: "bare exec: " + ms(st[0].p50()), Ratio: ratio(st[1].p50(), st[0].p50())})
	r.add(Row{Section: "hotpath", Figure: "the small module's 3 files sent with `true` (POST /unpack-execute), p50 per round", Ours: ms(added(st[2], st[1]).p50()),
		Baseline: "`true` through Sandbox.Exec: " + ms(st[1].p50()), Ratio: ratio(st[2].p50(), st[1].p50())})
	return nil
}
