package local

import (
	"context"
	"io"
	"os"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi/apiconfig"
)

// ServeIfChild turns this process into the sandbox's runtime server when
// the local backend started it inside bubblewrap (it re-executes the
// program that opened the sandbox when no sandbox-server binary is found;
// see Options.ServerPath). It then serves until the sandbox ends and exits;
// otherwise it returns at once. The sandboxd process API is served in this
// process (the program links gRPC anyway), not by the companion binary a
// sandbox-server starts. Every main that opens local sandboxes should call
// it first thing:
//
//	func main() {
//		local.ServeIfChild()
//		...
//	}
func ServeIfChild() {
	if os.Getenv(childEnv) != "1" {
		return
	}
	// Commands run by the server must not see the marker.
	os.Unsetenv(childEnv)
	os.Exit(server.MainWith(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv, serveProcessAPI))
}

// serveProcessAPI is the server.ProcessAPIFunc of a re-executed program.
func serveProcessAPI(ctx context.Context, c apiconfig.Config) (io.Closer, error) {
	srv, err := processapi.Start(ctx, c)
	if err != nil {
		return nil, err // not a nil *processapi.Server in a non-nil Closer
	}
	return srv, nil
}
