// Command mcp-conformance-fixture is mcp-server over Streamable HTTP with
// one tool more: test_reconnection, the fixture tool the official MCP
// conformance suite's server-sse-polling scenario calls (SEP-1699: a call
// whose event stream the server closes mid-call, with an SSE retry field,
// and whose result the client gets by reconnecting with Last-Event-ID).
//
// Only scripts/mcp-conformance.sh builds and runs it, for that scenario
// alone; every other scenario runs against cmd/mcp-server itself. The tool
// is never part of mcp-server's tool list (cmd/mcp-server, the image).
// Everything else is the real server: the same Config, flags, backend,
// event store and HTTP guard (mcpserver.New, Server.ServeHTTP); the tool
// is added to its SDK server (Server.MCP).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/backendflag"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcpserver"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

func main() {
	local.ServeIfChild()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp-conformance-fixture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := mcpserver.Defaults()
	cfg.RegisterFlags(fs)
	httpAddr := fs.String("http", "127.0.0.1:0", "serve Streamable HTTP on this address")
	bf := backendflag.Register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mcp-conformance-fixture [mcp-server flags]\n\nmcp-server over HTTP plus the conformance suite's fixture tool test_reconnection; for scripts/mcp-conformance.sh only.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := cliflags.ParseFlagsOnly(fs, args); !ok {
		return code
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg.Logger = log
	cfg.Version = "conformance-fixture"
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "mcp-conformance-fixture: %v\n", err)
		return cliflags.ExitUsage
	}

	backend, err := bf.New(ctx, log)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-conformance-fixture: backend: %v\n", err)
		return 1
	}
	cfg.Backend = backend
	defer backendflag.CloseOnExit(ctx, backend, log)
	srv, err := mcpserver.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-conformance-fixture: %v\n", err)
		return cliflags.ExitUsage
	}
	mcp.AddTool(srv.MCP(), &mcp.Tool{
		Name:        "test_reconnection",
		Description: "Conformance fixture (SEP-1699): closes this call's event stream, asking the client to reconnect, then answers; the answer reaches the client when it resumes with Last-Event-ID.",
	}, testReconnection)

	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-conformance-fixture: --http=%s: %v\n", *httpAddr, err)
		return 1
	}
	if err := srv.ServeHTTP(ctx, ln); err != nil {
		log.Error("http server", "err", err)
		return 1
	}
	return 0
}

// reconnectAfter is the SSE retry the closed stream carries.
const reconnectAfter = 100 * time.Millisecond

// testReconnection closes the call's stream, then returns its result,
// which the go-sdk keeps in the server's event store for the client's
// resumption. A client that could not resume (mcpserver.ResumableVersion:
// one before 2025-11-25 gets no event ID to resume from) gets its result
// on the stream it has.
func testReconnection(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	done := "result on the call's own stream"
	if e := req.Extra; e != nil && e.CloseSSEStream != nil && mcpserver.ResumableVersion(e.Header.Get("Mcp-Protocol-Version")) {
		e.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: reconnectAfter})
		done = "stream closed, result resumed"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "test_reconnection: " + done}}}, nil, nil
}
