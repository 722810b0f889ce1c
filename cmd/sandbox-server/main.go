// Command sandbox-server is the runtime server inside every sandbox, a pod
// on Kubernetes or a local bubblewrap sandbox. Run it with --help for its
// flags; docs/sandbox-server.md has the contract. Started by the local
// backend with gate.Env set, it is instead the sandbox's gate on the host
// (package gate), which becomes bubblewrap.
package main

import (
	"context"
	"os"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/gate"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
)

func main() {
	if gate.Requested(os.Getenv) {
		os.Exit(gate.Main(os.Args[1:], os.Environ(), os.Stderr))
	}
	os.Exit(server.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
