//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

// TestWarmPoolReady waits for the base warm pool to fill, then checks each
// of its pods end to end: bound to the process node, Ready, and answering
// the runtime contract's readiness call on its own pod IP.
func TestWarmPoolReady(t *testing.T) {
	ensureBase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	n := waitPoolReady(ctx, t, agentsandbox.DefaultWarmPool)
	t.Logf("warm pool %s: %d replicas ready %s after the manifests were applied (or earlier)", agentsandbox.DefaultWarmPool, n, time.Since(start).Round(time.Millisecond))

	pods, err := shared.c.Client.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || !podReady(&p) {
			continue
		}
		ready++
		if p.Spec.NodeName != shared.c.Node.Name() {
			t.Errorf("pod %s is on node %q, want %q", p.Name, p.Spec.NodeName, shared.c.Node.Name())
		}
		proc, ok := shared.c.Node.Pod(p.Namespace, p.Name)
		if !ok || proc.PID == 0 {
			t.Errorf("pod %s: the process node runs no process for it", p.Name)
			continue
		}
		if p.Status.PodIP != proc.Addr.Addr().String() {
			t.Errorf("pod %s: status podIP %s, process listens on %s", p.Name, p.Status.PodIP, proc.Addr)
		}
		resp, err := http.Get("http://" + proc.Addr.String() + "/")
		if err != nil {
			t.Errorf("pod %s: GET / on %s: %v", p.Name, proc.Addr, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var st struct{ Status string }
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &st) != nil || st.Status != "ok" {
			t.Errorf("pod %s: GET / = %d %s, want 200 {\"status\":\"ok\"}", p.Name, resp.StatusCode, body)
		}
	}
	if ready < int(n) {
		t.Errorf("%d ready pods in %s, want at least the pool's %d; pods: %s", ready, testNS, n, podSummary(t))
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestReattachCloseDisconnect drives one claim through the backend's whole
// life: Open, Disconnect (claim and process stay), Attach by claim name
// from a second backend (state is still there), Close (claim deleted, the
// pod's process gone within 10 s), and Attach after Close
// (ErrSandboxNotFound).
func TestReattachCloseDisconnect(t *testing.T) {
	ensureBase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	waitPoolReady(ctx, t, agentsandbox.DefaultWarmPool)

	b1 := newBackend(ctx, t)
	sb, err := b1.Open(ctx)
	if err != nil {
		t.Fatalf("Open: %v; pods: %s", err, podSummary(t))
	}
	id := sb.ID()
	asb, ok := sb.(*agentsandbox.Sandbox)
	if !ok {
		t.Fatalf("Open returned %T, want *agentsandbox.Sandbox", sb)
	}
	podName := asb.PodName()
	proc, ok := shared.c.Node.Pod(testNS, podName)
	if !ok || proc.PID == 0 {
		t.Fatalf("claim %s: pod %q has no process on the node (node runs %+v)", id, podName, shared.c.Node.Pods())
	}
	res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "echo kept > note.txt && echo $SANDBOX_BASE_DIR"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec: %+v, %v", res, err)
	}
	if got := strings.TrimSpace(res.Stdout); !strings.HasPrefix(got, proc.Dir) {
		t.Errorf("SANDBOX_BASE_DIR = %q, want the pod's directory under %s", got, proc.Dir)
	}

	// Disconnect keeps both the claim and the process.
	if err := sb.Disconnect(ctx); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	ext := extClient(t).ExtensionsV1beta1().SandboxClaims(testNS)
	time.Sleep(time.Second) // give a wrongly deleting backend or GC time to act
	if _, err := ext.Get(ctx, id, metav1.GetOptions{}); err != nil {
		t.Fatalf("claim %s after Disconnect: %v", id, err)
	}
	if p, ok := shared.c.Node.Pod(testNS, podName); !ok || p.PID != proc.PID || processGone(proc.PID) {
		t.Fatalf("after Disconnect the pod's process %d is gone (node has %+v)", proc.PID, p)
	}

	// A second client reattaches by claim name and finds the state.
	b2 := newBackend(ctx, t)
	sb2, err := b2.Attach(ctx, id)
	if err != nil {
		t.Fatalf("Attach(%s): %v", id, err)
	}
	got, err := sb2.ReadFile(ctx, "note.txt")
	if err != nil || string(got) != "kept\n" {
		t.Fatalf("ReadFile(note.txt) after reattach = %q, %v; want \"kept\\n\"", got, err)
	}

	// Close deletes the claim; the cascade removes sandbox, pod and process.
	closed := time.Now()
	if err := sb2.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var claimGone, procGone, podGone time.Duration
	for claimGone == 0 || procGone == 0 || podGone == 0 {
		if claimGone == 0 {
			if _, err := ext.Get(ctx, id, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				claimGone = time.Since(closed)
			}
		}
		if procGone == 0 {
			if _, ok := shared.c.Node.Pod(testNS, podName); !ok && processGone(proc.PID) {
				procGone = time.Since(closed)
			}
		}
		if podGone == 0 {
			if _, err := shared.c.Client.CoreV1().Pods(testNS).Get(ctx, podName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				podGone = time.Since(closed)
			}
		}
		if time.Since(closed) > 10*time.Second {
			t.Fatalf("10 s after Close: claim gone after %v, process %d gone after %v, pod gone after %v (0 = not yet); pods: %s",
				claimGone, proc.PID, procGone, podGone, podSummary(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("after Close: claim gone in %v, process gone in %v, pod object gone in %v",
		claimGone.Round(time.Millisecond), procGone.Round(time.Millisecond), podGone.Round(time.Millisecond))

	if _, err := b2.Attach(ctx, id); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		t.Errorf("Attach(%s) after Close: %v, want ErrSandboxNotFound", id, err)
	}
	if _, err := b2.Attach(ctx, "no-such-claim"); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		t.Errorf("Attach(no-such-claim): %v, want ErrSandboxNotFound", err)
	}
}

// BenchmarkClaimReady measures claim -> ready from a full warm pool, the
// number agent-sandbox's own targets speak of (p50 and p90 at most 1 s).
// Each iteration waits for the pool to be full again, then times
// Backend.Open (claim created, Ready observed, the SDK connected through the
// router) and, from a watch, when the claim's Ready condition turned True.
// Run it with -benchtime=Nx; it reports p50 and p90 of both in ms.
func BenchmarkClaimReady(b *testing.B) {
	ensureBase(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	backend := newBackend(ctx, b)
	ext := extClient(b).ExtensionsV1beta1().SandboxClaims(testNS)
	var opens, readies []time.Duration
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		waitPoolReady(ctx, b, agentsandbox.DefaultWarmPool)
		// Watch from the current state on, so only this iteration's claim
		// can turn Ready.
		list, err := ext.List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		w, err := ext.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			b.Fatal(err)
		}
		readyAt := make(chan time.Time, 1)
		go func() {
			for ev := range w.ResultChan() {
				claim, ok := ev.Object.(*extv1beta1.SandboxClaim)
				if ok && ev.Type != watch.Deleted && meta.IsStatusConditionTrue(claim.Status.Conditions, "Ready") {
					readyAt <- time.Now()
					return
				}
			}
		}()
		b.StartTimer()
		start := time.Now()
		sb, err := backend.Open(ctx)
		opened := time.Since(start)
		b.StopTimer()
		if err != nil {
			w.Stop()
			b.Fatalf("claim %d: Open: %v; pods: %s", i, err, podSummary(b))
		}
		select {
		case at := <-readyAt:
			readies = append(readies, at.Sub(start))
		case <-time.After(5 * time.Second):
			b.Errorf("claim %d (%s): saw no Ready condition on the watch", i, sb.ID())
		}
		w.Stop()
		opens = append(opens, opened)
		if err := sb.Close(ctx); err != nil {
			b.Fatalf("claim %d: Close: %v", i, err)
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(percentile(opens, 50).Microseconds())/1000, "open-p50-ms")
	b.ReportMetric(float64(percentile(opens, 90).Microseconds())/1000, "open-p90-ms")
	if len(readies) > 0 {
		b.ReportMetric(float64(percentile(readies, 50).Microseconds())/1000, "claim-ready-p50-ms")
		b.ReportMetric(float64(percentile(readies, 90).Microseconds())/1000, "claim-ready-p90-ms")
	}
	b.Logf("claim -> ready from a warm pool over %d claims: Open p50 %v p90 %v; claim Ready condition p50 %v p90 %v (agent-sandbox target: p50/p90 <= 1 s)",
		len(opens), percentile(opens, 50).Round(time.Millisecond), percentile(opens, 90).Round(time.Millisecond),
		percentile(readies, 50).Round(time.Millisecond), percentile(readies, 90).Round(time.Millisecond))
}
