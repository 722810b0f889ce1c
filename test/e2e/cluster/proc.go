package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// component is one control-plane process the cluster started.
type component struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	err     error
}

// startComponent runs bin with args in its own process group, its output
// appended to logDir/name.log, with this process's environment plus env
// (KEY=value entries). Its PID is appended to pidFile (when set) so a
// wrapper script can clean up after a test binary that died.
func startComponent(name, bin string, args, env []string, logDir, pidFile string) (*component, error) {
	logPath := filepath.Join(logDir, name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	if pidFile != "" {
		if f, err := os.OpenFile(pidFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			_, _ = fmt.Fprintf(f, "%d\n", cmd.Process.Pid)
			_ = f.Close()
		}
	}
	c := &component{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		_ = logf.Close()
		close(c.exited)
	}()
	return c, nil
}

// stop sends SIGTERM to the component's group, then SIGKILL after grace.
func (c *component) stop(grace time.Duration) {
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-c.exited
	}
}

// failure wraps err with the component's exit status, if it has exited,
// and the tail of its log.
func (c *component) failure(err error) error {
	select {
	case <-c.exited:
		err = fmt.Errorf("%w (%s exited: %v)", err, c.name, c.err)
	default:
	}
	return fmt.Errorf("%s: %w\n--- last lines of %s ---\n%s", c.name, err, c.logPath, tail(c.logPath, 30))
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// waitHTTP polls url until it answers 200, the component exits, or
// timeout passes. A non-empty token is sent as a bearer token; TLS
// certificates are not verified (the API server's are self-signed).
func (c *component) waitHTTP(ctx context.Context, url, token string, timeout time.Duration) error {
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback, self-signed
	}
	deadline := time.Now().Add(timeout)
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		last = err
		select {
		case <-c.exited:
			return c.failure(fmt.Errorf("waiting for %s: %w", url, last))
		case <-ctx.Done():
			return c.failure(fmt.Errorf("waiting for %s: %w", url, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return c.failure(fmt.Errorf("not ready at %s after %s: %w", url, timeout, last))
		}
	}
}

// freePorts returns n distinct loopback TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// lookBinary checks that path is an executable file.
func lookBinary(what, path string) error {
	if path == "" {
		return fmt.Errorf("%s: no path given", what)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: %s is not an executable file", what, path)
	}
	return nil
}
