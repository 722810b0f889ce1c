// Command sandbox-processapi serves the sandboxd process API (gRPC
// ProcessService and REST /v1/...) for the runtime server: sandbox-server
// starts it on the first connection to its --grpc-addr or --rest-addr, so
// that an idle server does not carry gRPC. Run it with --help for its
// flags; docs/sandboxd.md has the API.
package main

import (
	"context"
	"os"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi"
)

func main() {
	os.Exit(processapi.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
