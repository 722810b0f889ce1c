package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// server is one runtime server process under test.
type server struct {
	name string
	cmd  *exec.Cmd
	log  string // file with its stdout and stderr
	done chan struct{}
}

// startServer starts bin with args and env (added to the bench's own),
// logging to dir/<name>.log, and waits until GET health answers 200.
func startServer(ctx context.Context, name, dir, health string, env []string, bin string, args ...string) (*server, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, health, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited before answering %s: %s", name, health, tailFile(logPath, 800))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not answer %s within a minute: %s", name, health, tailFile(logPath, 800))
		}
	}
}

// stop kills the server's process group and waits for it.
func (s *server) stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// memory is a server's idle memory in MiB, summed over its process and
// its descendants (uvicorn's worker is a child process when it reloads;
// a Go server is one process).
type memory struct {
	RSS  float64 // VmRSS: resident pages, including file-backed ones shared through the page cache
	Anon float64 // RssAnon: resident private anonymous pages, what each extra server costs
}

// memoryMiB reads the server's idle memory from /proc/<pid>/status.
func (s *server) memoryMiB() (memory, error) {
	var m memory
	for _, pid := range append([]int{s.cmd.Process.Pid}, descendants(s.cmd.Process.Pid)...) {
		rss, err := statusKiB(pid, "VmRSS:")
		if err != nil {
			return m, err
		}
		anon, err := statusKiB(pid, "RssAnon:")
		if err != nil {
			return m, err
		}
		m.RSS += rss / 1024
		m.Anon += anon / 1024
	}
	return m, nil
}

// statusKiB reads one "Name:   N kB" line of /proc/<pid>/status.
func statusKiB(pid int, field string) (float64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// descendants lists pid's children, grandchildren and so on.
func descendants(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
				out = append(out, descendants(c)...)
			}
		}
	}
	return out
}

// freePort asks the kernel for a free loopback TCP port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func tailFile(path string, n int) string {
	data, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(data))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}
