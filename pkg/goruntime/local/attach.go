package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/sandboxid"
)

// attach reconnects to the running sandbox id from its state file
// (Backend.Attach, AttachHandle).
func (b *Backend) attach(ctx context.Context, id string) (*Sandbox, error) {
	if !sandboxid.Valid(id) {
		return nil, fmt.Errorf("local sandbox %q: not a sandbox ID: %w", id, goruntime.ErrSandboxNotFound)
	}
	l := layout{dir: filepath.Join(b.sandboxes, id)}
	var m meta
	data, err := os.ReadFile(l.meta())
	if err != nil {
		return nil, fmt.Errorf("local sandbox %s: %w", id, goruntime.ErrSandboxNotFound)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("local sandbox %s: bad state file: %v: %w", id, err, goruntime.ErrSandboxNotFound)
	}
	if !procfs.Alive(m.PID, m.StartTime) {
		return nil, fmt.Errorf("local sandbox %s: %w (its process has exited)", id, goruntime.ErrSandboxNotFound)
	}
	if m.Disk != nil {
		l.disk = m.Disk.Dir
		l.memory, l.ownIDs = m.Disk.Memory, m.Disk.OwnIDs
		if m.Disk.InSandboxNS() {
			seeDisk(&l, m.PID)
		}
	}
	if m.Server == 0 {
		m.Server = serverPID(m.Keep)
		if st, err := procfs.ReadStat(m.Server); err == nil {
			m.ServerAt = st.StartTime
		}
	}
	s := &Sandbox{b: b, l: l, meta: m, cl: l.client(serverUID(m.HostUID), b.opts.OutputBytes), keep: keepSet(m.Keep)}
	s.log, _ = os.Open(l.log()) // nil if it is gone: exitedWhy then has no last words to read
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.cl.Ready(rctx); err != nil {
		if ctx.Err() != nil {
			s.cl.Close()
			s.closeLog()
			return nil, fmt.Errorf("attach local sandbox %s: %w", id, ctx.Err())
		}
		return s.attachFailed(ctx, err)
	}
	// The process that opened it may be gone, and its module proxy
	// socket with it: serve it from this one.
	if err := b.modules.serve(id, l, m.HostUID); err != nil {
		b.opts.Logger.Warn("local sandbox: module proxy not served; module downloads will fail until the next attach", "id", id, "err", err)
	}
	return s, nil
}

// attachFailed handles a sandbox whose processes are alive but whose
// runtime server did not answer Attach's readiness check (err): one a
// command stopped (SIGSTOP) or wedged would otherwise run until the
// machine reboots, since prune removes only dead sandboxes. When the
// server is stopped, has exited, or does not answer a second probe either
// (diagnose), the sandbox is killed (its cgroup) and its directory
// removed, and the error wraps goruntime.ErrSandboxGone. A server that
// answers the second probe was only slow: s is returned.
func (s *Sandbox) attachFailed(ctx context.Context, err error) (*Sandbox, error) {
	var cause error
	if s.serverState() == "stopped" {
		cause = errServerWedged
	}
	gone := s.diagnose(ctx, cause, err)
	if gone == nil {
		return s, nil
	}
	if cerr := s.Close(context.WithoutCancel(ctx)); cerr != nil {
		s.b.opts.Logger.Warn("local sandbox: remove after the server stopped answering", "id", s.meta.ID, "err", cerr)
	}
	return nil, fmt.Errorf("attach local sandbox %s: %w", s.meta.ID, gone)
}
