// The process kills itself with SIGKILL; the shell reports 128+9.
package main

import (
	"fmt"
	"os"
	"syscall"
)

func main() {
	fmt.Println("about to be killed")
	os.Stdout.Sync()
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
