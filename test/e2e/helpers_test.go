//go:build e2e

package e2e

import (
	"bytes"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	extclientset "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/test/e2e/cluster"
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

// podSummary lists a namespace's pods for failure messages
// (cluster.PodSummary).
func podSummary(ns string) string { return shared.c.PodSummary(ns) }

func podReady(p *corev1.Pod) bool { return cluster.PodReady(p) }

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
