package mcpserver

import (
	"context"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// BenchmarkOverhead measures what the MCP layer adds to one call, in
// process (in-memory transport, goruntimetest backend, a command that does nothing):
// "direct" is Session.Execute, "mcp" the same through run_go_code.
func BenchmarkOverhead(b *testing.B) {
	ctx := context.Background()
	files := map[string]any{"main.go": "package main\n\nfunc main() {}\n"}
	b.Run("direct", func(b *testing.B) {
		sess, err := goruntime.Open(ctx, goruntimetest.New(b.TempDir()), goruntime.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close(ctx)
		req := goruntime.Request{Files: []goruntime.File{{Path: "main.go", Data: []byte(files["main.go"].(string))}}, Command: "true"}
		for b.Loop() {
			if _, err := sess.Execute(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mcp", func(b *testing.B) {
		s, err := New(Config{Backend: goruntimetest.New(b.TempDir())})
		if err != nil {
			b.Fatal(err)
		}
		cs := connectMemory(b, s, nil)
		for b.Loop() {
			res := call(b, cs, "run_go_code", map[string]any{"files": files, "command": "true"})
			if res.IsError {
				b.Fatal(text(res))
			}
		}
	})
}
