package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// seedProgram touches the standard-library packages small Go programs and
// their tests use, so their compiled forms land in the seed cache.
var seedProgram = map[string]string{
	"go.mod": "module seed\n\ngo 1.24\n",
	"main.go": `package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	var mu sync.Mutex
	mu.Lock()
	b, _ := json.Marshal(map[string]float64{"pi": math.Pi})
	w := bufio.NewWriter(os.Stdout)
	s := []string{strconv.Itoa(1), strings.ToUpper("a")}
	sort.Strings(s)
	fmt.Fprintln(w, string(b), s, errors.New("x"), time.Second)
	w.Flush()
	mu.Unlock()
}
`,
	"main_test.go": `package main

import "testing"

func TestSeed(t *testing.T) {}
`,
}

// EnsureGoCacheSeed returns a Go build cache holding the compiled
// standard-library packages a small program and its tests need, building
// it under cacheDir/gocache-seed-<go version> on first use. The process
// node copies it into each pod's GOCACHE, standing in for the image's
// prebuilt cache that the template's seed-cache init container copies.
func EnsureGoCacheSeed(ctx context.Context, cacheDir string) (string, error) {
	ver, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	dir := filepath.Join(cacheDir, "gocache-seed-"+strings.TrimSpace(string(ver)))
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(cacheDir, ".gocache-seed-")
	if err != nil {
		return "", fmt.Errorf("seed cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "src")
	cache := filepath.Join(tmp, "cache")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", fmt.Errorf("seed cache: %w", err)
	}
	for name, body := range seedProgram {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			return "", fmt.Errorf("seed cache: %w", err)
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "GOCACHE=" + cache, "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod"}
	for _, args := range [][]string{{"build", "-o", os.DevNull, "."}, {"test", "-count=1", "."}, {"vet", "."}} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = src, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("seed cache: go %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(cache, ".complete"), nil, 0o644); err != nil {
		return "", fmt.Errorf("seed cache: %w", err)
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(cache, dir); err != nil {
		return "", fmt.Errorf("seed cache: %w", err)
	}
	return dir, nil
}
