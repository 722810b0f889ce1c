// Command pause is the e2e node's pod sandbox ("infra") container: it holds a
// pod's namespaces open, does nothing else, and exits on SIGINT or SIGTERM.
// As PID 1 of the pod's PID namespace (when shared) it also reaps orphaned
// children. test/e2e/build-images.sh builds it static into a scratch image,
// because the e2e node has no registry to pull registry.k8s.io/pause from.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that has exited; WNOHANG so a live one does not block.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
