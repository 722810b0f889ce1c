// A linter-like tool that reports findings to stderr as Markdown, with
// "# " headings and file:line:col locations, and exits 1. It ran; it did not
// fail to build. (Run as a binary, with no go run trailer, its stderr
// cannot be told from a compiler's by text alone.)
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("checked 2 files")
	fmt.Fprintln(os.Stderr, "# Findings")
	fmt.Fprintln(os.Stderr, "handlers.go:12:5: error returned by Close is ignored")
	fmt.Fprintln(os.Stderr, "store.go:40:2: unused parameter ctx")
	os.Exit(1)
}
