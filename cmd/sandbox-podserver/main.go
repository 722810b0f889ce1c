// Command sandbox-podserver is the runtime server of a pod (the image's
// entrypoint, manifests/base): sandbox-server with the sandboxd process
// API (gRPC ProcessService and REST /v1/...) served inside the same
// process, as the local backend runs it, instead of by the
// sandbox-processapi companion. A pod's server is its PID 1 with --init:
// the API, through which every command of the agent-sandbox backend runs,
// then shares the protections of the pid namespace's init, where a
// companion, an ordinary process of the commands' uid, could be killed or
// stopped by them (kill -9 -1, kill -STOP -1). It takes sandbox-server's
// flags (--help); docs/sandbox-server.md has them, docs/sandboxd.md the API.
package main

import (
	"context"
	"os"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi"
)

func main() {
	os.Exit(server.MainWith(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv, processapi.Serve))
}
