package local

import (
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/contract"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
)

// meta is a sandbox's sandbox.json: what another process needs to attach
// to it and to tear it down.
type meta struct {
	ID        string         `json:"id"`
	PID       int            `json:"pid"`        // bubblewrap's pid on the host
	StartTime uint64         `json:"start_time"` // its start time in clock ticks, against pid reuse
	Keep      []int          `json:"keep"`       // bubblewrap and the server (older sandboxes: also bubblewrap's init and a lifeline shell)
	Server    int            `json:"server_pid"` // the runtime server's pid on the host (0: unknown, older sandboxes)
	ServerAt  uint64         `json:"server_start"`
	Cgroup    cgroups.Cgroup `json:"cgroup"`
	Created   time.Time      `json:"created"`
	Network   bool           `json:"network"`
	HostUID   int            `json:"host_uid,omitempty"` // the host uid it runs as (0: the caller's)
	Disk      *disk.Disk     `json:"disk,omitempty"`     // its disk (nil: no disk quota)
}

// Sandbox is one local sandbox. It implements goruntime.Sandbox; its
// methods are safe for concurrent use.
type Sandbox struct {
	b    *Backend
	l    layout
	meta meta
	cl   *contract.Client
	keep map[int]bool

	mu       sync.Mutex
	done     bool     // closed or disconnected
	gone     error    // set once the sandbox was found dead; wraps ErrSandboxGone
	lifeline *os.File // write end of the lifeline pipe; nil after Attach
	exited   chan struct{}
	// log is the server's log, open for reading (nil: it could not be
	// opened): it outlives a disk that leaves the host with its sandbox.
	log *os.File

	proc processConn // gRPC connection for ExecStream

	// onCommand, when set, is told when a command (Exec, ExecStream)
	// starts (true) and ends (false): the warm pool holds its refill
	// until a claimed sandbox's first commands are done (pool.go).
	onCommand func(start bool)
	// onEnd, when set, is called once the sandbox is closed or
	// disconnected: the warm pool then refills at once, as no command of
	// it will run beside the refill (pool.go).
	onEnd func()

	// seed is the seed build cache its disk's cache overlay shows, for a
	// sandbox this process started on a disk of the host ("": another),
	// which layerLive layers again over a snapshot (snapcow.go).
	seed string
}

// commandEvent tells onCommand, if set, that a command started or ended.
func (s *Sandbox) commandEvent(start bool) {
	s.mu.Lock()
	f := s.onCommand
	s.mu.Unlock()
	if f != nil {
		f(start)
	}
}

var (
	_ goruntime.Sandbox           = (*Sandbox)(nil)
	_ goruntime.UnpackExecSandbox = (*Sandbox)(nil) // operations.go
	_ goruntime.RangeReader       = (*Sandbox)(nil) // operations.go
)

// ID names the sandbox for Backend.Attach: the name of its state directory.
func (s *Sandbox) ID() string { return s.meta.ID }

// Dir is the sandbox's state directory on the host; Dir()/app is /app.
func (s *Sandbox) Dir() string { return s.l.dir }

func (s *Sandbox) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return goruntime.ErrClosed
	}
	return s.gone
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
