// Command sandbox-server is the runtime server inside every sandbox, a pod
// on Kubernetes or a local bubblewrap sandbox. Run it with --help for its
// flags; docs/sandbox-server.md has the contract.
package main

import (
	"context"
	"os"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
)

func main() {
	os.Exit(server.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
