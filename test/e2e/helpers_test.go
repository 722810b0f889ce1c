//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extclientset "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned"
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

// podSummary lists a namespace's pods with phase, readiness and the
// reason of any waiting container, for failure messages.
func podSummary(ns string) string {
	pods, err := shared.c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
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
		why := ""
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				why += fmt.Sprintf(",%s:%s %s", cs.Name, w.Reason, w.Message)
			}
		}
		s = append(s, fmt.Sprintf("%s(%s,%s,node=%q%s)", p.Name, p.Status.Phase, ready, p.Spec.NodeName, why))
	}
	return fmt.Sprint(s)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
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
