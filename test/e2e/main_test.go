//go:build e2e

// Package e2e tests go-runtime-sandbox against a real Kubernetes control
// plane: etcd, kube-apiserver, the agent-sandbox controller and
// sandbox-router, with a process node (package processnode) in place of
// the kubelet. Run it with test/e2e/run.sh, which builds the binaries and
// hands them over in the environment (see cluster.BinariesFromEnv).
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/test/e2e/cluster"
)

// testNS is the namespace the project's manifests are applied to and where
// every claim of these tests is made.
const testNS = "e2e"

// shared is the control plane TestMain starts for every test in the package.
// Tests read it; only TestMain writes it.
var shared struct {
	c    *cluster.Cluster
	bins cluster.Binaries
	repo string
	// baseOnce applies manifests/base once, for whichever test needs it first.
	baseOnce sync.Once
	baseErr  error
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	bins, err := cluster.BinariesFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: missing binaries:\n%v\n", err)
		return 1
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	work := os.Getenv("E2E_WORK_DIR")
	if work == "" {
		if work, err = os.MkdirTemp("", "e2e-"); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	crds, err := agentSandboxCRDs(repo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	seedRoot := os.Getenv("E2E_CACHE_DIR")
	if seedRoot == "" {
		seedRoot = filepath.Join(repo, ".cache", "e2e-bin")
	}
	if err := os.MkdirAll(seedRoot, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	seedStart := time.Now()
	seed, err := cluster.EnsureGoCacheSeed(ctx, seedRoot)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: Go build cache seed %s ready in %s\n", seed, time.Since(seedStart).Round(10*time.Millisecond))
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Config{
		Binaries:    bins,
		Dir:         work,
		CRDDir:      crds,
		GoCacheSeed: seed,
		PIDFile:     filepath.Join(work, "pids"),
		Logger:      log,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: control plane did not come up (logs in %s/logs):\n%v\n", work, err)
		return 1
	}
	defer c.Stop()
	var steps []string
	for _, s := range c.Steps {
		steps = append(steps, fmt.Sprintf("%s %s", s.Name, s.Duration.Round(10*time.Millisecond)))
	}
	fmt.Fprintf(os.Stderr, "e2e: control plane up in %s (%s); logs in %s/logs\n",
		time.Since(start).Round(10*time.Millisecond), strings.Join(steps, ", "), work)
	shared.c, shared.bins, shared.repo = c, bins, repo
	return m.Run()
}

// agentSandboxCRDs finds k8s/crds in the agent-sandbox module the main
// module requires, so the CRDs match the SDK version in go.mod.
func agentSandboxCRDs(repo string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/agent-sandbox")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locate the agent-sandbox module (go list -m): %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "k8s", "crds")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("agent-sandbox CRDs: %w", err)
	}
	return dir, nil
}
