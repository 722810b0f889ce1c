package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoGRPCInTheIdleServer: the runtime server that idles in every
// sandbox links no gRPC or protobuf-generated API (their package init
// alone costs ~4.5 MiB of RSS, docs/benchmarks.md "Idle RSS"); the
// process API lives in cmd/sandbox-processapi, which the server starts on
// demand.
func TestNoGRPCInTheIdleServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var bad []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "google.golang.org/grpc") || strings.Contains(p, "agent-sandbox/packages/sandboxd") ||
			strings.HasSuffix(p, "/internal/server/processapi") {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("cmd/sandbox-server links %d packages that belong in cmd/sandbox-processapi: %v", len(bad), bad)
	}
}
