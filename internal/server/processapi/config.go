package processapi

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi/apiconfig"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/shell"
)

// Defaults for Config fields left zero.
const (
	DefaultMetadataEnvPrefix = "SANDBOX_"
	DefaultShutdownTimeout   = 10 * time.Second
	// processGrace is how long commands get between SIGTERM and SIGKILL
	// when the server shuts down.
	processGrace = 2 * time.Second
	// readHeaderTimeout bounds reading a REST request's headers; bodies are
	// unbounded (large file transfers are the point of the REST API).
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 60 * time.Second
)

// Config says where and how to serve the sandboxd API; its one home is
// apiconfig, which the runtime server imports without linking this package.
type Config = apiconfig.Config

// ChildTracker is a process-wide orphan reaper's view of the children this
// server starts and waits for itself (apiconfig.ChildTracker).
type ChildTracker = apiconfig.ChildTracker

// Observer hears of the commands the process API runs
// (apiconfig.Observer).
type Observer = apiconfig.Observer

func withDefaults(c Config) Config {
	if c.MetadataEnvPrefix == "" {
		c.MetadataEnvPrefix = DefaultMetadataEnvPrefix
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func validate(c Config) error {
	if !c.Enabled() {
		return errors.New("sandboxd: neither a gRPC nor a REST address is set")
	}
	if c.RootDir == "" {
		return errors.New("sandboxd: root directory is required")
	}
	if c.GRPCAddr != "" && c.GRPCAddr == c.RESTAddr && !strings.HasSuffix(c.GRPCAddr, ":0") {
		return fmt.Errorf("sandboxd: gRPC and REST addresses must differ (both %q)", c.GRPCAddr)
	}
	if c.StreamChunkSize < 0 {
		return fmt.Errorf("sandboxd: stream chunk size %d is negative", c.StreamChunkSize)
	}
	for k := range c.Env {
		if !shell.EnvironKey(k) {
			return fmt.Errorf("sandboxd: environment variable name %q is invalid", k)
		}
	}
	return nil
}
