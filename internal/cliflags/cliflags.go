// Package cliflags holds the rule every main of this repository follows
// when it parses its command line: -h or --help prints the usage and
// exits 0, a bad flag exits 2 after the flag package has said why, and a
// command that takes flags alone refuses a positional argument with exit
// 2, naming it. It links only the standard library, so the runtime
// server, which runs inside sandboxes, uses it too.
package cliflags

import (
	"errors"
	"flag"
	"fmt"
)

// ExitUsage is a main's exit code for a bad command line.
const ExitUsage = 2

// Parse parses args with fs (made with flag.ContinueOnError). When ok is
// false the main returns code at once: 0 after -h, ExitUsage for a bad
// flag.
func Parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return ExitUsage, false
	}
	return 0, true
}

// ParseFlagsOnly is Parse for a command that takes no positional
// arguments: one left after the flags is refused on fs's output with
// ExitUsage.
func ParseFlagsOnly(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if code, ok := Parse(fs, args); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments %q (flags only; see -h)\n", fs.Name(), fs.Args())
		return ExitUsage, false
	}
	return 0, true
}
