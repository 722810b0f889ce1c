package main

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcpserver/smoke"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// BenchmarkHelloWorld compares a warm hello-world run through the
// library (Session.Execute on the local backend, in process) with the same
// request through the built mcp-server over stdio (run_go_code). Both use
// a warm sandbox and the same files and command. The "interleaved"
// sub-benchmark alternates the two in one loop, so load on the machine hits
// both alike, and reports their ratio as mcp/library (target <= 1.1).
func BenchmarkHelloWorld(b *testing.B) {
	requireBwrap(b)
	b.Run("library", func(b *testing.B) {
		run := libraryRunner(b, helloCommand)
		for b.Loop() {
			run()
		}
	})
	b.Run("mcp-stdio", func(b *testing.B) {
		run := mcpRunner(b, helloCommand)
		for b.Loop() {
			run()
		}
	})
	b.Run("interleaved", func(b *testing.B) {
		interleave(b, libraryRunner(b, helloCommand), mcpRunner(b, helloCommand))
	})
	// The same with a command that does nothing: what the MCP layer adds
	// per call, in absolute terms.
	b.Run("interleaved-noop", func(b *testing.B) {
		interleave(b, libraryRunner(b, "true"), mcpRunner(b, "true"))
	})
}

// interleave alternates lib and viaMCP and reports each one's mean time
// and their ratio.
func interleave(b *testing.B, lib, viaMCP func()) {
	var libTime, mcpTime time.Duration
	for b.Loop() {
		t0 := time.Now()
		lib()
		t1 := time.Now()
		viaMCP()
		libTime += t1.Sub(t0)
		mcpTime += time.Since(t1)
	}
	b.ReportMetric(float64(libTime.Microseconds())/1000/float64(b.N), "library-ms/op")
	b.ReportMetric(float64(mcpTime.Microseconds())/1000/float64(b.N), "mcp-ms/op")
	b.ReportMetric(float64(mcpTime)/float64(libTime), "mcp/library")
}

const helloCommand = "go run main.go"

// libraryRunner opens a local sandbox in process and returns a function
// writing the hello-world files and running command in it, warmed once.
func libraryRunner(b *testing.B, command string) func() {
	ctx := context.Background()
	backend, err := local.New(local.Options{Relax: localtest.Relax(b)})
	if err != nil {
		b.Fatal(err)
	}
	sess, err := goruntime.Open(ctx, backend, goruntime.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sess.Close(context.Background()) })
	var files []goruntime.File
	for p, c := range smoke.HelloFiles() {
		files = append(files, goruntime.File{Path: p, Data: []byte(c)})
	}
	run := func() {
		res, err := sess.Execute(ctx, goruntime.Request{Files: files, Command: command})
		if err != nil || res.ExitCode != 0 || (command == helloCommand) != (res.Stdout == "hello, world\n") {
			b.Fatalf("Execute: %v %+v", err, res)
		}
	}
	run()
	return run
}

// mcpRunner starts the built mcp-server over stdio and returns a function
// calling run_go_code with the hello-world files and command, warmed once.
func mcpRunner(b *testing.B, command string) func() {
	ctx := context.Background()
	logs := &logSink{}
	cmd := exec.Command(serverBin, serverArgs(b)...)
	cmd.Stderr = logs
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	run := func() {
		r, err := smoke.RunGo(ctx, cs, smoke.HelloFiles(), command, 0)
		if err != nil || r.IsError || (command == helloCommand) != (r.Out.Stdout == "hello, world\n") {
			b.Fatalf("run_go_code: %v %+v\n%s", err, r, logs.String())
		}
	}
	run()
	return run
}
