package local

import (
	"context"
	"os"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
)

// ServeIfChild turns this process into the sandbox's runtime server when
// the local backend started it inside bubblewrap (it re-executes the
// program that opened the sandbox when no sandbox-server binary is found;
// see Options.ServerPath). It then serves until the sandbox ends and exits;
// otherwise it returns at once. Every main that opens local sandboxes
// should call it first thing:
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
	os.Exit(server.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
