package smoke

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func newClient(opts *mcp.ClientOptions) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "mcp-smoke", Version: "1"}, opts)
}

// StdioTarget spawns `bin args...` for every session and talks MCP over
// its stdin and stdout, the way Claude Code or Cursor run a local server.
// The server's stderr (its logs) goes to logs.
func StdioTarget(bin string, args []string, logs io.Writer) Target {
	return Target{
		Name: "stdio",
		Connect: func(ctx context.Context, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
			cmd := exec.Command(bin, args...)
			cmd.Stderr = logs
			return newClient(opts).Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 30 * time.Second}, nil)
		},
	}
}

// HTTPServer is an mcp-server process serving Streamable HTTP.
type HTTPServer struct {
	URL  string
	cmd  *exec.Cmd
	done chan error
}

// addrRE finds the listening address in the server's startup log line.
var addrRE = regexp.MustCompile(`serving MCP over Streamable HTTP"? addr=(\S+)`)

// StartHTTP runs `bin --http=127.0.0.1:0 args...` and waits until it
// listens. Its logs are copied to logs.
func StartHTTP(ctx context.Context, bin string, args []string, logs io.Writer) (*HTTPServer, error) {
	cmd := exec.Command(bin, append([]string{"--http=127.0.0.1:0"}, args...)...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &HTTPServer{cmd: cmd, done: make(chan error, 1)}
	go func() {
		err := cmd.Wait()
		pw.Close()
		s.done <- err
	}()
	addr := make(chan string, 1)
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logs, line)
			if m := addrRE.FindStringSubmatch(line); m != nil {
				once.Do(func() { addr <- m[1] })
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case a := <-addr:
		s.URL = "http://" + a + "/mcp"
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("%s exited before listening: %v (its log is above)", bin, err)
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("%s did not listen within 60 s", bin)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return nil, ctx.Err()
	}
}

// Target returns the Target whose sessions are new MCP sessions on s.
func (s *HTTPServer) Target() Target {
	return Target{
		Name:         "http",
		SharedServer: true,
		Connect: func(ctx context.Context, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
			return newClient(opts).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL}, nil)
		},
	}
}

// Stop sends SIGTERM and waits for the server to close its sandboxes and
// exit; it kills it after 60 s.
func (s *HTTPServer) Stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			return fmt.Errorf("mcp-server exited: %w", err)
		}
		return nil
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		return errors.New("mcp-server did not exit within 60 s of SIGTERM")
	}
}
