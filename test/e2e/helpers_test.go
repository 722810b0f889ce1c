//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extclientset "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

// extClient returns a typed client for agent-sandbox's extension kinds.
func extClient(t testing.TB) *extclientset.Clientset {
	t.Helper()
	c, err := extclientset.NewForConfig(shared.c.REST)
	if err != nil {
		t.Fatalf("extensions client: %v", err)
	}
	return c
}

// ensureBase applies manifests/base to testNS, once per run, by
// server-side apply of the kustomization exactly as it is in the repo.
func ensureBase(t testing.TB) {
	t.Helper()
	shared.baseOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c := shared.c
		_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			shared.baseErr = fmt.Errorf("create namespace %s: %w", testNS, err)
			return
		}
		out, err := c.Kubectl(ctx, "apply", "--server-side", "--field-manager=e2e", "-n", testNS, "-k", filepath.Join(shared.repo, "manifests", "base"))
		if err != nil {
			shared.baseErr = fmt.Errorf("apply manifests/base: %w\n%s", err, out)
		}
	})
	if shared.baseErr != nil {
		t.Fatal(shared.baseErr)
	}
}

// waitPoolReady waits until the warm pool has all its replicas ready and
// returns how many that is.
func waitPoolReady(ctx context.Context, t testing.TB, pool string) int32 {
	t.Helper()
	ext := extClient(t)
	var last string
	for {
		wp, err := ext.ExtensionsV1beta1().SandboxWarmPools(testNS).Get(ctx, pool, metav1.GetOptions{})
		if err == nil {
			want := int32(1)
			if wp.Spec.Replicas != nil {
				want = *wp.Spec.Replicas
			}
			if want > 0 && wp.Status.ReadyReplicas == want {
				return want
			}
			last = fmt.Sprintf("%d of %d ready (status %+v)", wp.Status.ReadyReplicas, want, wp.Status)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("warm pool %s/%s not ready: %s; pods: %s", testNS, pool, last, podSummary(t))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// podSummary lists the test namespace's pods with phase and readiness, for
// failure messages.
func podSummary(t testing.TB) string {
	pods, err := shared.c.Client.CoreV1().Pods(testNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var s []string
	for _, p := range pods.Items {
		ready := "not-ready"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = "ready"
			}
		}
		s = append(s, fmt.Sprintf("%s(%s,%s,node=%q)", p.Name, p.Status.Phase, ready, p.Spec.NodeName))
	}
	return fmt.Sprint(s)
}

// newBackend returns the agent-sandbox backend in direct-URL mode against
// the real sandbox-router; commands reach the pod's process API at its pod
// IP (this host is on the pod network).
func newBackend(ctx context.Context, t testing.TB) *agentsandbox.Backend {
	t.Helper()
	b, err := agentsandbox.New(ctx, agentsandbox.Options{
		Namespace:    testNS,
		APIURL:       shared.c.RouterURL,
		Connectivity: agentsandbox.ConnectivityInClusterPodIP,
		RestConfig:   shared.c.REST,
		ReadyTimeout: 90 * time.Second,
	})
	if err != nil {
		t.Fatalf("agent-sandbox backend: %v", err)
	}
	return b
}

// processGone reports whether no process has the given PID any more.
func processGone(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

// percentile returns the p-th percentile (0..100) of ds by nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(p/100*float64(len(s))+0.999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
