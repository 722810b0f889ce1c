package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// bareExecEnv marks a copy of the bench binary started as the bare Go
// HTTP exec server; its value is the address to listen on.
const bareExecEnv = "GO_RUNTIME_SANDBOX_BENCH_BARE_EXEC"

// ServeIfBareExec serves as the bare Go HTTP exec server and exits when
// this process was started as one (cmd/bench's main calls it first
// thing); otherwise it returns at once.
//
// The bare Go HTTP exec server is the least a Go program can do to run a
// command for an HTTP client: net/http, the request's JSON decoded, the
// command run with `/bin/sh -c` in a process group of its own with its
// output captured (os/exec's pipes), the result encoded as JSON. It is
// the server section's baseline for what our runtime server itself adds
// to /execute: a bare fork+exec in the benchmark process pays neither an
// HTTP round trip nor a server's scheduling, which no runtime server can
// avoid (docs/benchmarks.md).
func ServeIfBareExec() {
	addr := os.Getenv(bareExecEnv)
	if addr == "" {
		return
	}
	os.Unsetenv(bareExecEnv)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /execute", bareExecute)
	_ = http.Serve(ln, mux)
	os.Exit(1)
}

func bareExecute(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Command string `json:"command"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(r.Context(), "/bin/sh", "-c", req.Command)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	_ = cmd.Run()
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"stdout": stdout.String(), "stderr": stderr.String(), "exit_code": code})
}

// startBareExec starts the bare Go HTTP exec server on port, with env
// (GOMAXPROCS as our server's), from this binary.
func startBareExec(ctx context.Context, dir string, port int, env []string) (*server, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	s, err := startServer(ctx, "bare-go-exec-server", dir, url+"/", append(env, bareExecEnv+"=127.0.0.1:"+strconv.Itoa(port)), self)
	return s, url, err
}
