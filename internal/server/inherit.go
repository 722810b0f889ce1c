package server

import (
	"fmt"
	"os/exec"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cloexec"
)

// startHanding starts cmd after marking every descriptor of this process
// close-on-exec, so that cmd gets exactly what it is handed (its standard
// streams and ExtraFiles): nothing the server inherited, whoever started
// it, and nothing opened since without the flag. Every child the server
// starts itself goes through it (procStarter); the server's start marks
// what it inherited once more (MainWith), and the process API's commands
// are marked in processapi.
func startHanding(cmd *exec.Cmd) error {
	if err := cloexec.Except(); err != nil {
		return fmt.Errorf("start %s with only its own descriptors: %w", cmd.Path, err)
	}
	return cmd.Start()
}
