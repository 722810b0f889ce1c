package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extclientset "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned"
)

// What runs on the cluster once it is up: the project's manifests applied
// unchanged (server-side apply, as a user would) and the waits that tell
// when they are usable. The e2e tests and cmd/e2e-cluster (make cluster)
// share them.

// EnsureNamespace creates namespace ns unless it exists.
func (c *Cluster) EnsureNamespace(ctx context.Context, ns string) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// ApplyKustomization applies the kustomization in dir to namespace ns by
// server-side apply (field manager "e2e"); force takes over fields another
// manager set (a re-apply that scales a warm pool back up).
func (c *Cluster) ApplyKustomization(ctx context.Context, ns, dir string, force bool) error {
	args := []string{"apply", "--server-side", "--field-manager=e2e", "-n", ns, "-k", dir}
	if force {
		args = append(args, "--force-conflicts")
	}
	if out, err := c.Kubectl(ctx, args...); err != nil {
		return fmt.Errorf("apply %s to %s: %w\n%s", dir, ns, err, out)
	}
	return nil
}

// WaitRouter waits for a Ready sandbox-router pod (manifests/router) in ns
// and returns its IP.
func (c *Cluster) WaitRouter(ctx context.Context, ns string) (string, error) {
	for {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=sandbox-router"})
		if err == nil {
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && PodReady(&p) && p.Status.PodIP != "" {
					return p.Status.PodIP, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no Ready sandbox-router pod in %s: %w (last list error: %v); pods: %s", ns, ctx.Err(), err, c.PodSummary(ns))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitWarmPool waits until the SandboxWarmPool ns/pool has at least n
// ready replicas (n <= 0: all it wants) and returns how many it wants in
// all. A pool scaled to 0 is never ready.
func (c *Cluster) WaitWarmPool(ctx context.Context, ns, pool string, n int32) (int32, error) {
	ext, err := extclientset.NewForConfig(c.REST)
	if err != nil {
		return 0, fmt.Errorf("agent-sandbox extensions client: %w", err)
	}
	var last string
	for {
		wp, err := ext.ExtensionsV1beta1().SandboxWarmPools(ns).Get(ctx, pool, metav1.GetOptions{})
		if err == nil {
			want := int32(1)
			if wp.Spec.Replicas != nil {
				want = *wp.Spec.Replicas
			}
			need := want
			if n > 0 {
				need = min(n, want)
			}
			if want > 0 && wp.Status.ReadyReplicas >= need {
				return want, nil
			}
			last = fmt.Sprintf("%d of %d ready, waiting for %d", wp.Status.ReadyReplicas, want, need)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("warm pool %s/%s not ready: %w (%s); pods: %s", ns, pool, ctx.Err(), last, c.PodSummary(ns))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PodSummary lists a namespace's pods with phase, readiness and the reason
// of any waiting container, for error messages.
func (c *Cluster) PodSummary(ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var s []string
	for _, p := range pods.Items {
		ready := "not-ready"
		if PodReady(&p) {
			ready = "ready"
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

// PodReady reports whether p's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
