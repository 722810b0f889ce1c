// Command mcp-smoke runs the MCP server's end-to-end scenarios (the ones
// cmd/mcp-server's tests run on the local backend) against any backend:
// it spawns an mcp-server binary with the flags given after "--", talks to
// it with the official MCP SDK client over stdio and Streamable HTTP, and
// prints one line per scenario.
//
//	mcp-smoke                                   # local backend, both transports
//	mcp-smoke -transport=http -- --backend=agent-sandbox --api-url=http://127.0.0.1:8080
//
// It exits 0 when every scenario passed, 1 when one failed, 2 on bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcpserver/smoke"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp-smoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		server    = fs.String("server", "", "mcp-server binary (default: mcp-server next to this program, else on $PATH)")
		transport = fs.String("transport", "both", "stdio, http or both")
		only      = fs.String("run", "", "run only scenarios whose name matches this regular expression")
		verbose   = fs.Bool("v", false, "copy the server's logs to stderr")
		timeout   = fs.Duration("scenario-timeout", 5*time.Minute, "time limit of each scenario")
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: mcp-smoke [flags] [-- mcp-server flags]

Starts a real mcp-server (over stdio, Streamable HTTP or both) and drives
it with the official MCP go-sdk client through the scenarios below, as an
agent would; flags after -- go to mcp-server. Prints one line per
scenario; exits 0 when all passed, 1 when one failed, 2 for bad flags.

Examples:
  mcp-smoke                                  # every scenario, both transports, local backend
  mcp-smoke -transport=stdio -run=timeout -v
  mcp-smoke -- --backend=agent-sandbox --warm-pool-name=go-runtime-pool --api-url=http://ROUTER:8080

Scenarios:
`)
		for _, sc := range smoke.Scenarios() {
			fmt.Fprintf(fs.Output(), "  %s\n", sc.Name)
		}
		fmt.Fprintf(fs.Output(), "\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := cliflags.Parse(fs, args); !ok {
		return code
	}
	serverArgs := fs.Args()
	var match *regexp.Regexp
	if *only != "" {
		var err error
		if match, err = regexp.Compile(*only); err != nil {
			fmt.Fprintf(stderr, "mcp-smoke: -run=%q: %v\n", *only, err)
			return cliflags.ExitUsage
		}
	}
	var transports []string
	switch *transport {
	case "stdio", "http":
		transports = []string{*transport}
	case "both":
		transports = []string{"stdio", "http"}
	default:
		fmt.Fprintf(stderr, "mcp-smoke: -transport=%q: want stdio, http or both\n", *transport)
		return cliflags.ExitUsage
	}
	bin, err := findServer(*server)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-smoke: %v\n", err)
		return cliflags.ExitUsage
	}
	logs := io.Discard
	if *verbose {
		logs = stderr
	}

	failed := 0
	for _, tr := range transports {
		var (
			target smoke.Target
			srv    *smoke.HTTPServer
		)
		if tr == "stdio" {
			target = smoke.StdioTarget(bin, serverArgs, logs)
		} else {
			srv, err = smoke.StartHTTP(ctx, bin, serverArgs, logs)
			if err != nil {
				fmt.Fprintf(stdout, "FAIL http: start the server: %v (rerun with -v for its logs)\n", err)
				failed++
				continue
			}
			target = srv.Target()
		}
		for _, sc := range smoke.Scenarios() {
			if (sc.HTTPOnly && !target.SharedServer) || (match != nil && !match.MatchString(sc.Name)) {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, *timeout)
			start := time.Now()
			err := sc.Run(sctx, target)
			cancel()
			d := time.Since(start).Round(time.Millisecond)
			if err != nil {
				failed++
				fmt.Fprintf(stdout, "FAIL %-5s %-32s %8s\n    %v\n", tr, sc.Name, d, err)
				continue
			}
			fmt.Fprintf(stdout, "ok   %-5s %-32s %8s\n", tr, sc.Name, d)
		}
		if srv != nil {
			if err := srv.Stop(); err != nil {
				failed++
				fmt.Fprintf(stdout, "FAIL http: stop the server: %v\n", err)
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "%d failed\n", failed)
		return 1
	}
	fmt.Fprintln(stdout, "all scenarios passed")
	return 0
}

// findServer resolves the mcp-server binary to spawn.
func findServer(flagValue string) (string, error) {
	if flagValue != "" {
		p, err := exec.LookPath(flagValue)
		if err != nil {
			return "", fmt.Errorf("-server=%s: %w", flagValue, err)
		}
		return filepath.Abs(p)
	}
	if exe, err := os.Executable(); err == nil {
		cand := filepath.Join(filepath.Dir(exe), "mcp-server")
		if fi, err := os.Stat(cand); err == nil && fi.Mode().IsRegular() {
			return cand, nil
		}
	}
	p, err := exec.LookPath("mcp-server")
	if err != nil {
		return "", fmt.Errorf("no mcp-server binary next to mcp-smoke or on $PATH: build it (go build -o bin/ ./cmd/mcp-server ./cmd/mcp-smoke) or pass -server")
	}
	return filepath.Abs(p)
}
