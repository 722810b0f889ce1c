//go:build e2e

// Package e2e tests go-runtime-sandbox on a real one-node Kubernetes
// cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// containerd with runc and gVisor, a kubelet, the agent-sandbox controller,
// and the sandbox-router as a pod; the sandboxes are pods of the image the
// repository's Dockerfile builds. Run it with test/e2e/run.sh, which builds
// everything, enters its own namespaces and hands the paths over in the
// environment (see cluster.BinariesFromEnv).
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/test/e2e/cluster"
)

// shared is the cluster TestMain starts for every test in the package.
// Tests read it; only TestMain writes it.
var shared struct {
	c    *cluster.Cluster
	repo string
	// images as built (and cached) by build-images.sh.
	images []cluster.Image

	mu sync.Mutex
	// active is the runtime whose warm pool is scaled up; the node has CPU
	// for one pool at a time (see activate).
	active *runtimeTarget
}

// summary collects the lines printed at the end (run.sh shows them): one
// per key, the last report wins (a benchmark runs more than once).
var summary struct {
	mu    sync.Mutex
	keys  []string
	lines map[string]string
}

// report records the summary line for key and logs it.
func report(t testing.TB, key, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	summary.mu.Lock()
	if summary.lines == nil {
		summary.lines = map[string]string{}
	}
	if _, ok := summary.lines[key]; !ok {
		summary.keys = append(summary.keys, key)
	}
	summary.lines[key] = line
	summary.mu.Unlock()
	t.Log(line)
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
		return 1
	}
	bins, err := cluster.BinariesFromEnv(os.Getenv)
	if err != nil {
		return fail("missing binaries:\n%v", err)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		return fail("%v", err)
	}
	work := os.Getenv("E2E_WORK_DIR")
	crds := os.Getenv("E2E_CRD_DIR")
	nodeIP := os.Getenv("E2E_NODE_IP")
	if work == "" || crds == "" || nodeIP == "" {
		return fail("E2E_WORK_DIR, E2E_CRD_DIR and E2E_NODE_IP must be set: run the e2e tests through test/e2e/run.sh")
	}
	imgs, err := cluster.ParseImages(os.Getenv("E2E_IMAGES"))
	if err != nil || len(imgs) == 0 {
		return fail("E2E_IMAGES (build-images.sh's output): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Config{
		Binaries: bins,
		Dir:      work,
		CRDDir:   crds,
		NodeIP:   nodeIP,
		Images:   imgs,
		PIDFile:  filepath.Join(work, "pids"),
		Logger:   log,
		// E2E_CONTROLLER_ARGS: extra agent-sandbox-controller flags,
		// space-separated (docs/e2e.md).
		ControllerArgs: strings.Fields(os.Getenv("E2E_CONTROLLER_ARGS")),
	})
	if err != nil {
		return fail("cluster did not come up (logs in %s/logs):\n%v", work, err)
	}
	defer c.Stop()
	var steps []string
	for _, s := range c.Steps {
		steps = append(steps, fmt.Sprintf("%s %s", s.Name, s.Duration.Round(10*time.Millisecond)))
	}
	fmt.Fprintf(os.Stderr, "e2e: cluster up in %s (%s); logs in %s/logs\n",
		time.Since(start).Round(10*time.Millisecond), strings.Join(steps, ", "), work)
	shared.c, shared.repo, shared.images = c, repo, imgs

	code := m.Run()

	ni := c.NodeInfo
	fmt.Printf("summary: node: kubelet %s Ready (%s; runtime classes runc, gvisor=runsc; kernel %s)\n",
		ni.KubeletVersion, ni.ContainerRuntimeVersion, ni.KernelVersion)
	for _, img := range imgs {
		if img.Name == "runtime" {
			fmt.Printf("summary: image: %s built in %d s, %d MB\n", strings.TrimPrefix(img.Ref, "docker.io/library/"), img.BuildSeconds, img.SizeMB)
		}
	}
	for _, l := range firstGoRunLines() {
		fmt.Printf("summary: %s\n", l)
	}
	summary.mu.Lock()
	for _, k := range summary.keys {
		fmt.Printf("summary: %s\n", summary.lines[k])
	}
	summary.mu.Unlock()
	return code
}
