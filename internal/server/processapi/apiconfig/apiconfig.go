// Package apiconfig is the configuration of the sandboxd process API
// (processapi.Config): what the runtime server hands a process API it
// serves in-process (server.ProcessAPIFunc) and what processapi.Start
// takes, one type for both. It links nothing but the standard library and
// procevents, so the runtime server builds one without linking the API
// (cmd/sandbox-server's TestNoGRPCInTheIdleServer); processapi applies
// its defaults and checks it.
package apiconfig

import (
	"log/slog"
	"net"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/procevents"
)

// Config says where and how to serve the sandboxd API.
type Config struct {
	// GRPCAddr is where ProcessService listens: "host:port" (port 0 picks a
	// free one) or "unix:/path/to.sock". Empty turns gRPC off.
	GRPCAddr string
	// RESTAddr is where the REST API listens, in the same forms. Empty
	// turns REST off.
	RESTAddr string
	// GRPCListener and RESTListener, when set, are served instead of
	// opening GRPCAddr and RESTAddr (the companion binary gets its
	// listeners from the runtime server this way). Close closes them.
	GRPCListener, RESTListener net.Listener
	// RootDir confines file operations and is every command's default
	// working directory. Required; created if missing.
	RootDir string
	// Env is added to every command's environment (request env_vars win
	// over it; both win over the server process's own environment).
	Env map[string]string
	// MetadataEnvPrefix selects the variables GET /v1/metadata shows
	// (names that look secret are never shown). Default "SANDBOX_" (processapi.DefaultMetadataEnvPrefix).
	MetadataEnvPrefix string
	// StreamChunkSize is the read buffer, in bytes, for Start's output
	// events; 0 means upstream's default (4096).
	StreamChunkSize int
	// ShutdownTimeout bounds Close: commands get SIGTERM, then SIGKILL
	// after 2 s, and open connections are cut when it passes. Default 10 s
	// (processapi.DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// Logger receives server logs; nil means slog.Default().
	Logger *slog.Logger
	// Children, when set, hears of every command the server starts. A
	// process that also reaps orphans (the runtime server as PID 1 or as a
	// child subreaper) must set it, or its reaper could collect a
	// command's exit status before this server waits for it (the command
	// would then report exit code -1).
	Children ChildTracker
	// Observer, when set, hears of every command's start and end and of
	// the bytes it reads and writes (the runtime server's metrics).
	Observer Observer
}

// ChildTracker is a process-wide orphan reaper's view of the children this
// server starts and waits for itself.
type ChildTracker interface {
	// Starting is called just before a command is started. Until the
	// returned func is called, with the child's pid or with 0 when nothing
	// was started, reaping must wait.
	Starting() (started func(pid int))
	// Exited is called after the server has waited for pid.
	Exited(pid int)
}

// Enabled reports whether either API is to be served.
func (c Config) Enabled() bool {
	return c.GRPCAddr != "" || c.RESTAddr != "" || c.GRPCListener != nil || c.RESTListener != nil
}

// Observer hears of the commands the process API runs (the runtime
// server's metrics, or the companion's event pipe back to them).
type Observer = procevents.Observer
