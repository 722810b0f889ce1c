package backendflag

import (
	"context"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
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

// TestFileSizeFlag: --file-size-mb sets local.Options.FileSizeBytes
// (default local.DefaultFileSizeBytes); zero or less is an error naming
// the flag.
func TestFileSizeFlag(t *testing.T) {
	o, err := parse(t).localOptions()
	if err != nil || o.FileSizeBytes != local.DefaultFileSizeBytes {
		t.Fatalf("default: %d, %v; want %d", o.FileSizeBytes, err, int64(local.DefaultFileSizeBytes))
	}
	o, err = parse(t, "--file-size-mb=64").localOptions()
	if err != nil || o.FileSizeBytes != 64<<20 {
		t.Fatalf("--file-size-mb=64: %d, %v", o.FileSizeBytes, err)
	}
	if _, err := parse(t, "--file-size-mb=0").localOptions(); err == nil || !strings.Contains(err.Error(), "--file-size-mb") {
		t.Fatalf("--file-size-mb=0: %v; want an error naming the flag", err)
	}
}
