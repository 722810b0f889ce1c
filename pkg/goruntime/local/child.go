package local

import (
	"context"
	"os"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/gate"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi"
)

// ServeIfChild turns this process into the sandbox's runtime server when
// the local backend started it inside bubblewrap (it re-executes the
// program that opened the sandbox when no sandbox-server binary is found;
// see Options.ServerPath), or into the sandbox's gate (package gate),
// which becomes bubblewrap, when it started it for that. It then serves
// until the sandbox ends and exits; otherwise it returns at once. The sandboxd process API is served in this
// process (the program links gRPC anyway), not by the companion binary a
// sandbox-server starts. Every main that opens local sandboxes should call
// it first thing:
//
//	func main() {
//		local.ServeIfChild()
//		...
//	}
func ServeIfChild() {
	if gate.Requested(os.Getenv) {
		os.Exit(gate.Main(os.Args[1:], os.Environ(), os.Stderr))
	}
	if os.Getenv(childEnv) != "1" {
		return
	}
	// Commands run by the server must not see the marker.
	os.Unsetenv(childEnv)
	os.Exit(server.MainWith(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv, processapi.Serve))
}
