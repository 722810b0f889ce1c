package local

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
)

// lifelineExitWait is how long Close lets a sandbox end by its lifeline
// (the server exits, bubblewrap reaps it and exits) before it kills what
// is left in its cgroup.
const lifelineExitWait = 2 * time.Second

// Close destroys the sandbox: its processes, cgroup and state directory.
// Calling it again returns nil.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	if s.onEnd != nil {
		s.onEnd()
	}
	s.cl.Close()
	s.proc.close()
	s.b.modules.stop(s.meta.ID)
	if s.lifeline != nil {
		s.lifeline.Close() // the server (PID 1) exits, and the sandbox with it
	}
	var errs []error
	if s.exited != nil {
		// Bubblewrap reaps the server once it has taken the sandbox with
		// it: killed before that, bubblewrap would leave the server to the
		// host's init, which may reap it seconds later, and the cgroup
		// would hold it as long. A server that cannot see its lifeline
		// (stopped) is killed with the rest below.
		select {
		case <-s.exited:
		case <-time.After(lifelineExitWait):
		}
	}
	cg := s.meta.Cgroup
	if err := cg.Remove(); err != nil {
		errs = append(errs, err)
	}
	if s.exited != nil {
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			errs = append(errs, fmt.Errorf("bubblewrap (pid %d) did not exit", s.meta.PID))
		}
	} else if procfs.Alive(s.meta.PID, s.meta.StartTime) {
		_ = syscall.Kill(s.meta.PID, syscall.SIGKILL)
	}
	s.closeLog() // it holds the disk's file system
	if err := (storage{uid: s.meta.HostUID, disk: s.meta.Disk, leases: s.b.host.uidLeases()}).release(s.l.dir); err != nil {
		errs = append(errs, err)
	}
	if err := s.b.trash(s.l.dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close local sandbox %s: %w", s.meta.ID, err)
	}
	return nil
}

// Disconnect leaves the sandbox running for Backend.Attach, from this or
// another process, and releases this client.
func (s *Sandbox) Disconnect(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	if s.onEnd != nil {
		s.onEnd()
	}
	s.cl.Close()
	s.proc.close()
	s.closeLog()
	if s.lifeline != nil {
		_, err := s.lifeline.Write([]byte("detach\n"))
		s.lifeline.Close()
		if err != nil {
			return fmt.Errorf("disconnect local sandbox %s: %w", s.meta.ID, err)
		}
	}
	return nil
}

// closeLog closes the descriptor of the server's log this process holds.
func (s *Sandbox) closeLog() {
	if s.log != nil {
		s.log.Close()
		s.log = nil
	}
}
