package seed

// Before the seed is complete: no sandbox waits for it (Builder.Current).
// A sandbox opened meanwhile starts from an empty build cache, an
// overlay or a copy of Empty's directory, so its go command compiles
// what its programs need, into that sandbox's own cache, where it stays;
// sandboxes opened once the seed is complete start from the seed.
// Nothing a sandbox compiles reaches the seed or another sandbox: the
// seed is built on the host only, and Empty's directory is never
// written.

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Empty returns the directory of root (a state directory's seed/) that a
// sandbox's build cache shows while the seed is not complete: empty, and
// read-only to everyone (a memory disk's overlay reads it as the
// sandbox's ids).
func Empty(root string) (string, error) {
	dir := filepath.Join(root, "empty")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the empty build cache a sandbox starts from without the seed: %w", err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		return "", fmt.Errorf("seal the empty build cache a sandbox starts from without the seed: %w", err)
	}
	return dir, nil
}

// meanwhile is what an Open that starts its sandbox without the seed
// tells its caller, once: that the seed is being built, how far (p, the
// build's latest report: nil when no build runs), and that the sandbox's
// own go command compiles what it needs meanwhile. It is the one wording
// of it; front ends pass it on (goruntime.Progress.String).
func meanwhile(p *goruntime.Progress) goruntime.Progress {
	if p == nil {
		return goruntime.Progress{Stage: Stage, Message: "not built yet (see the log for why); this call compiles what it needs"}
	}
	out := *p // its step and packages say how far
	out.Message = "building the standard library once for this machine; this call compiles what it needs meanwhile"
	return out
}
