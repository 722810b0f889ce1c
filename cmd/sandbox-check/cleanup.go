package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// cleanup runs local.Cleanup and says what it removed. It returns the
// exit status: 0 done, 1 refused (in use) or failed.
func cleanup(ctx context.Context, opts local.CleanupOptions, stdout, stderr io.Writer) int {
	rep, err := local.Cleanup(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-check: --cleanup: %v\n", err)
		if errors.Is(err, local.ErrStateDirInUse) {
			fmt.Fprintln(stderr, "Nothing was removed.")
		}
		return 1
	}
	fmt.Fprintln(stdout, rep)
	if opts.RemoveDir {
		fmt.Fprintf(stdout, "Removed %s (its seed build caches too).\n", rep.StateDir)
	} else {
		fmt.Fprintf(stdout, "The seed build caches in %s stay (--remove removes them and the directory).\n", rep.StateDir)
	}
	return 0
}
