package gotool

import (
	"strings"
	"testing"
)

func TestRelPath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"./main.go", "main.go"},
		{"pkg/x.go", "pkg/x.go"},
		{"/app/pkg/x.go", "pkg/x.go"},
		{"/application/x.go", "/application/x.go"},
		{"/usr/local/go/src/fmt/print.go", "/usr/local/go/src/fmt/print.go"},
		{"../other/x.go", "../other/x.go"},
		{"/app", "."},
	} {
		if got := RelPath(c.in, "/app"); got != c.want {
			t.Errorf("RelPath(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseBuildOutputSkipsProgramOutput(t *testing.T) {
	// A program logging with log.Lshortfile prints "main.go:12: msg"
	// lines: they are findings only in the shape, so callers parse only
	// what the go tool printed. Here: continuation, go: errors, noise.
	out := "# example.com/m\n./a.go:3:5: x declared and not used\n\tmore detail\nexit status 1\ngo: downloading example.com/x v1.0.0\ngo: cannot find main module, but found .git/config in /app\nnote: module requires Go 1.99\n"
	got := ParseBuildOutput(out, SourceCompile, "/app")
	if len(got) != 2 {
		t.Fatalf("got %d diagnostics: %+v", len(got), got)
	}
	if got[0].File != "a.go" || got[0].Line != 3 || got[0].Column != 5 || got[0].Message != "x declared and not used\n\tmore detail" {
		t.Errorf("first = %+v", got[0])
	}
	if got[1].File != "" || got[1].Message != "cannot find main module, but found .git/config in /app" {
		t.Errorf("second = %+v", got[1])
	}
	if s := got[0].String(); s != "a.go:3:5: x declared and not used\n\tmore detail" {
		t.Errorf("String() = %q", s)
	}
}

func TestParseBenchmarkLine(t *testing.T) {
	b, ok := ParseBenchmarkLine("BenchmarkSprint/small-8   \t 1000000\t      1052 ns/op\t  12.50 MB/s\t     128 B/op\t       2 allocs/op\t 3.00 widgets/op")
	if !ok {
		t.Fatal("not parsed")
	}
	if b.Name != "BenchmarkSprint/small" || b.Procs != 8 || b.Iterations != 1000000 || b.NsPerOp != 1052 ||
		b.BytesPerOp != 128 || b.AllocsPerOp != 2 || b.MBPerSec != 12.5 || b.Metrics["widgets/op"] != 3 {
		t.Errorf("got %+v", b)
	}
	for _, l := range []string{"BenchmarkX", "BenchmarkX-2   \t", "ok  \tpkg\t0.1s", "Benchmark results: 3 ns/op"} {
		if _, ok := ParseBenchmarkLine(l); ok {
			t.Errorf("%q parsed as a benchmark", l)
		}
	}
}

func TestIsGoTest(t *testing.T) {
	for cmd, want := range map[string]bool{
		"go test ./...":                    true,
		"cd sub && go test -v .":           true,
		"/usr/local/go/bin/go test -run X": true,
		"go run .":                         false,
		"go vet ./... ; go build":          false,
		"echo go test":                     true, // a word match; only enables parsing
		"gotest ./...":                     false,
	} {
		if got := IsGoTest(cmd); got != want {
			t.Errorf("IsGoTest(%q) = %v", cmd, got)
		}
	}
}

func TestSplitTestOutput(t *testing.T) {
	out := "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\nok  \texample.com/a\t0.01s\n?   \texample.com/b\t[no test files]\nFAIL\texample.com/c [build failed]\nFAIL\n"
	got := SplitTestOutput(out)
	if len(got) != 3 || got[0].Package != "example.com/a" || got[1].Package != "example.com/b" || got[2].Package != "example.com/c" {
		t.Fatalf("got %+v", got)
	}
	if got[0].Text != "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\nok  \texample.com/a\t0.01s\n" {
		t.Errorf("first chunk %q", got[0].Text)
	}
}

func TestParseTestEventsToleratesJunk(t *testing.T) {
	stream := "go: warning: something\n{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"TestX\"}\nnot json {\n{\"Action\":\"output\",\"Package\":\"p\",\"Test\":\"TestX\",\"Output\":\"hello\\n\"}\n{\"Action\":\"fail\",\"Package\":\"p\"}\n"
	r := ParseTestEvents([]byte(stream))
	if r.Events != 3 || len(r.Tests) != 1 || r.Tests[0].Status != TestFail || r.Tests[0].Output != "hello\n" {
		t.Errorf("got %+v", r)
	}
	if !LooksLikeTestEvents(stream[strings.Index(stream, "{"):]) || LooksLikeTestEvents("hello") {
		t.Error("LooksLikeTestEvents")
	}
}
