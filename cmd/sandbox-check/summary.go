package main

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// summarize tells a caller other than root, under the table, which
// protections its sandboxes get, which they lack, and the one command
// (root's one-time setup, local.SetupNeeded) that adds those root can add.
func summarize(w io.Writer, prots []local.Protection, opts local.Options) {
	uid := os.Geteuid()
	name := strconv.Itoa(uid)
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	var get, relaxed, missing []string
	for _, p := range prots {
		switch p.Status {
		case local.StatusActive:
			get = append(get, p.Name)
		case local.StatusRelaxed:
			relaxed = append(relaxed, p.Name)
		case local.StatusUnavailable:
			missing = append(missing, p.Name)
		}
	}
	fmt.Fprintf(w, "\nAs %s (uid %d), sandboxes here get: %s.\n", name, uid, list(get))
	if len(relaxed) > 0 {
		fmt.Fprintf(w, "Relaxed (--relax): %s.\n", list(relaxed))
	}
	if len(missing) == 0 {
		return
	}
	fmt.Fprintf(w, "Missing: %s.\n", list(missing))
	steps := local.SetupNeeded(uid, opts)
	added := map[string]bool{}
	var adds []string
	for _, s := range steps {
		for _, p := range s.Protections {
			if !added[p] && slices.Contains(missing, p) {
				adds = append(adds, p)
			}
			added[p] = true
		}
	}
	if len(adds) > 0 {
		fmt.Fprintf(w, "Root adds %s with one command, once per boot:\n    %s\n", list(adds), local.SetupCommand(name))
		for _, s := range steps {
			fmt.Fprintf(w, "  (it will %s)\n", s.What)
		}
	}
	var rest []string
	for _, p := range missing {
		if !added[p] {
			rest = append(rest, p)
		}
	}
	if len(rest) > 0 {
		fmt.Fprintf(w, "No setup by root adds %s for %s: see the fix above.\n", list(rest), name)
	}
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
