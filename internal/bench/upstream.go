package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The upstream baselines are read and built at run time from the
// agent-sandbox module in the Go module cache: nothing of upstream's is
// part of this repository.
const (
	upstreamModule  = "sigs.k8s.io/agent-sandbox"
	upstreamVersion = "v1.0.3"
	// pythonRuntimeDir is upstream's Python runtime (FastAPI app "main:app")
	// inside the module.
	pythonRuntimeDir = "examples/python-runtime-sandbox"
	// sandboxdPackage is upstream's standalone sandboxd daemon.
	sandboxdPackage = upstreamModule + "/packages/sandboxd/cmd/sandboxd"
)

// goTool runs the go command in dir (a neutral directory outside any
// module when empty) and returns its stdout.
func goTool(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	if dir == "" {
		dir = os.TempDir()
	}
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// upstreamDir downloads (or finds) the agent-sandbox module in the module
// cache and returns its directory.
func upstreamDir(ctx context.Context) (string, error) {
	out, err := goTool(ctx, "", "mod", "download", "-json", upstreamModule+"@"+upstreamVersion)
	if err != nil {
		return "", fmt.Errorf("download %s@%s: %w", upstreamModule, upstreamVersion, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download: %w", err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("download %s@%s: %s", upstreamModule, upstreamVersion, m.Error)
	}
	return m.Dir, nil
}

// pythonRuntime returns the directory of upstream's Python runtime, after
// checking that python3 can import what it needs (FastAPI, uvicorn and
// python-multipart, from Debian's python3-fastapi, python3-uvicorn and
// python3-multipart: scripts/install-deps.sh).
//
// It returns the interpreter too: Debian's /usr/bin/python3, which sees
// the Debian packages, when present (a python3 earlier on PATH, from pyenv
// say, does not).
func pythonRuntime(ctx context.Context) (python, dir string, err error) {
	python = "/usr/bin/python3"
	if !isExec(python) {
		python = "python3"
	}
	if out, err := exec.CommandContext(ctx, python, "-c", "import fastapi, uvicorn, multipart").CombinedOutput(); err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return "", "", fmt.Errorf("%s cannot import fastapi, uvicorn and multipart (%s): install them with scripts/install-deps.sh python3-fastapi python3-uvicorn python3-multipart",
			python, lines[len(lines)-1])
	}
	mod, err := upstreamDir(ctx)
	if err != nil {
		return "", "", err
	}
	dir = filepath.Join(mod, pythonRuntimeDir)
	if _, err := os.Stat(filepath.Join(dir, "main.py")); err != nil {
		return "", "", fmt.Errorf("upstream Python runtime: %w", err)
	}
	return python, dir, nil
}

// sandboxdBinary returns upstream's sandboxd built from the module,
// building it into cacheDir once (a throwaway module that requires
// agent-sandbox at upstreamVersion; minutes on 2 cores the first time).
// Concurrent runs build it once, under a lock file.
func sandboxdBinary(ctx context.Context, cacheDir string, logf func(string, ...any)) (string, error) {
	bin := filepath.Join(cacheDir, "sandboxd-"+upstreamVersion)
	if isExec(bin) {
		return bin, nil
	}
	build := filepath.Join(cacheDir, "sandboxd-build-"+upstreamVersion)
	if err := os.MkdirAll(build, 0o755); err != nil {
		return "", fmt.Errorf("sandboxd build directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(cacheDir, "sandboxd.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("lock sandboxd build: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock sandboxd build: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if isExec(bin) {
		return bin, nil
	}
	logf("building upstream sandboxd %s into %s (once; a few minutes on 2 cores)", upstreamVersion, bin)
	files := map[string]string{
		"go.mod":   "module benchsandboxd\n\ngo 1.26\n",
		"tools.go": "//go:build tools\n\npackage tools\n\nimport _ \"" + sandboxdPackage + "\"\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(build, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	if _, err := goTool(ctx, build, "get", upstreamModule+"@"+upstreamVersion); err != nil {
		return "", err
	}
	tmp := bin + ".tmp"
	if _, err := goTool(ctx, build, "build", "-o", tmp, sandboxdPackage); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// buildOurs builds the named commands of this repository (run from inside
// it: make bench) into dir and returns their paths by name.
func buildOurs(ctx context.Context, dir string, names ...string) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return nil, errors.New("run the benchmark from inside the go-runtime-sandbox repository (make bench): it builds cmd/sandbox-server and cmd/mcp-server")
	}
	root := filepath.Dir(mod)
	paths := map[string]string{}
	args := []string{"build", "-o", dir + "/"}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
		paths[n] = filepath.Join(dir, n)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build (docs/local-backend.md, "Which server runs")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w: %s", strings.Join(names, " "), err, out)
	}
	return paths, nil
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
