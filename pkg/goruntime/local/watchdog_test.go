package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRuntimeFatal reads the Go runtime's last words out of a server log
// whose goroutine dump is larger than the tail a naive reader would take.
func TestRuntimeFatal(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) *os.File {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	dump := strings.Repeat("goroutine 7 [IO wait]:\nruntime: g 0 gp=0x1: unknown pc 0x2\n\tnet/http.(*conn).serve()\n", 2000)
	for _, c := range []struct{ name, log, want string }{
		{"cgo", `{"level":"INFO","msg":"listening"}` + "\nruntime/cgo: pthread_create failed: Resource temporarily unavailable\nSIGABRT: abort\n" + dump,
			"runtime/cgo: pthread_create failed: Resource temporarily unavailable"},
		{"pure", "runtime: failed to create new OS thread (have 9 already; errno=11)\nruntime: may need to increase max user processes (ulimit -u)\nfatal error: newosproc\n" + dump,
			"runtime: failed to create new OS thread (have 9 already; errno=11); runtime: may need to increase max user processes (ulimit -u); fatal error: newosproc"},
		{"clean", `{"level":"INFO","msg":"stopped"}` + "\n", ""},
	} {
		if got := runtimeFatal(write(c.name, c.log)); got != c.want {
			t.Errorf("%s: runtimeFatal = %q, want %q", c.name, got, c.want)
		}
	}
	if got := runtimeFatal(nil); got != "" {
		t.Errorf("no log: %q, want empty", got)
	}
}
