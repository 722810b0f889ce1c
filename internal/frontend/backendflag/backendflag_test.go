package backendflag

import (
	"context"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

func parse(t *testing.T, args ...string) *Flags {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAllowModules: --allow-modules is a comma-separated list of module
// path patterns for local.Options.AllowModules; a bad pattern is an error
// naming the flag; by default the list is empty (feature off).
func TestAllowModules(t *testing.T) {
	o, err := parse(t).localOptions()
	if err != nil || o.AllowModules != nil {
		t.Fatalf("default: %q, %v; want none", o.AllowModules, err)
	}
	o, err = parse(t, "--allow-modules=github.com/foo/*, golang.org/x/text").localOptions()
	if err != nil || !reflect.DeepEqual(o.AllowModules, []string{"github.com/foo/*", "golang.org/x/text"}) {
		t.Fatalf("two patterns: %q, %v", o.AllowModules, err)
	}
	for _, bad := range []string{"github.com/foo/[", "a.com,,b.com", "a.com/../b"} {
		_, err := parse(t, "--allow-modules="+bad).New(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), "--allow-modules") {
			t.Errorf("--allow-modules=%s: %v; want an error naming the flag", bad, err)
		}
	}
}
