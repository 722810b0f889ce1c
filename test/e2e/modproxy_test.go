//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/testmodules"
)

// TestModuleProxyInCluster runs manifests/modproxy (cmd/modproxy from the
// runtime image, as a Deployment) beside the runc warm pool and uses it
// from a claimed sandbox pod, as manifests/overlays/modproxy has the pods
// do: an allowed module is downloaded and built through it; one off the
// allowlist is refused with the proxy's message naming the pattern to
// add (the local backend's --allow-modules message, with this server's
// setting); a download that goes around it fails.
//
// The run's network namespace reaches no module proxy on the internet and
// resolves no names (no DNS, no kube-proxy), so here the proxy's own go
// command fetches from a directory of modules on the node (GOPROXY=file://
// through a hostPath volume) instead of proxy.golang.org, and the pod is
// pointed at the proxy pod's IP instead of http://go-modproxy:8080. For the
// same reason the direct download fails here for want of a route, not
// because of the overlay's NetworkPolicy: the CNI bridge enforces none (the
// policy is checked as rendered by TestOverlaysServerDryRun).
func TestModuleProxyInCluster(t *testing.T) {
	rt := runcTarget
	activate(t, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, ns := shared.c, rt.ns

	upstream, err := os.MkdirTemp("", "e2e-modules-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(upstream) })
	greet := map[string]string{"greet.go": "package greet\n\nfunc Hello() string { return \"hello through the in-cluster proxy\" }\n"}
	for _, m := range []string{"example.com/allowed", "example.com/denied"} {
		if err := testmodules.Write(upstream, m, "v1.0.0", greet); err != nil {
			t.Fatal(err)
		}
	}

	if err := c.ApplyKustomization(ctx, ns, filepath.Join(shared.repo, "manifests", "modproxy"), false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := c.Kubectl(ctx, "delete", "-n", ns, "--wait=false", "-k", filepath.Join(shared.repo, "manifests", "modproxy")); err != nil {
			t.Logf("delete manifests/modproxy: %v\n%s", err, out)
		}
	})
	// The allowlist, and the upstream a file:// directory on the node.
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "modproxy",
			"env": []any{
				map[string]any{"name": "MODPROXY_ALLOW_MODULES", "value": "example.com/allowed"},
				map[string]any{"name": "GOPROXY", "value": "file:///upstream"},
				map[string]any{"name": "GOSUMDB", "value": "off"},
			},
			"volumeMounts": []any{map[string]any{"name": "upstream", "mountPath": "/upstream", "readOnly": true}},
		}},
		"volumes": []any{map[string]any{"name": "upstream", "hostPath": map[string]any{"path": upstream, "type": "Directory"}}},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Patch(ctx, "go-modproxy", types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "e2e"}); err != nil {
		t.Fatalf("patch go-modproxy: %v", err)
	}
	proxyIP := waitModproxy(ctx, t, ns)

	sb := openSandbox(ctx, t, rt, modes[1])
	proxyEnv := fmt.Sprintf("GOPROXY=http://%s:8080 GOSUMDB=off", proxyIP)
	setup := mustExec(ctx, t, sb, "mkdir -p /app/mods && cd /app/mods && go mod init example.com/usesmods && "+
		`printf 'package main\n\nimport (\n\t"fmt"\n\n\t"example.com/allowed"\n)\n\nfunc main() { fmt.Println(greet.Hello()) }\n' > main.go`)
	if setup.ExitCode != 0 {
		t.Fatalf("module setup: exit %d: %s", setup.ExitCode, setup.Stderr)
	}

	allowed := mustExec(ctx, t, sb, "cd /app/mods && "+proxyEnv+" go get example.com/allowed@v1.0.0 && "+proxyEnv+" go run .")
	if allowed.ExitCode != 0 || !strings.Contains(allowed.Stdout, "hello through the in-cluster proxy") {
		t.Errorf("allowed module through the proxy: exit %d\nstdout: %s\nstderr: %s\nproxy log: %s", allowed.ExitCode, allowed.Stdout, allowed.Stderr, modproxyLogs(ctx, ns))
	}

	denied := mustExec(ctx, t, sb, "cd /app/mods && "+proxyEnv+" go get example.com/denied@v1.0.0")
	const refusal = "To let sandboxes download it, add a pattern: example.com/denied (modproxy --allow-modules, manifests/modproxy)"
	if denied.ExitCode == 0 || !strings.Contains(denied.Stderr, refusal) {
		t.Errorf("module off the allowlist: exit %d, want a failure saying %q\nstderr: %s", denied.ExitCode, refusal, denied.Stderr)
	}

	for _, around := range []string{
		"GOPROXY=direct GOSUMDB=off go get example.com/allowed@v1.0.0",                                      // the module's origin
		"GOPROXY=https://proxy.golang.org GOSUMDB=off GOFLAGS=-mod=mod go mod download rsc.io/quote@v1.5.2", // the real proxy
	} {
		res := mustExec(ctx, t, sb, "cd /app && mkdir -p around && cd around && rm -rf go.mod && go mod init around >/dev/null 2>&1; GOMODCACHE=/tmp/around-cache "+around)
		if res.ExitCode == 0 {
			t.Errorf("%s: succeeded, want it to fail (only the in-cluster proxy is reachable)\n%s", around, res.Stdout)
		} else {
			t.Logf("%s: exit %d (%.200s)", around, res.ExitCode, strings.TrimSpace(res.Stderr))
		}
	}
	report(t, "modproxy", "in-cluster module proxy: allowed module fetched and built in a pod, off-list refused with the pattern to add, direct download failed")
}

// waitModproxy waits for a Ready go-modproxy pod in ns and returns its IP.
func waitModproxy(ctx context.Context, t *testing.T, ns string) string {
	t.Helper()
	for {
		pods, err := shared.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=go-modproxy"})
		if err == nil {
			for _, p := range pods.Items {
				// The patched template's pod: the first one may still be going.
				if p.DeletionTimestamp == nil && podReady(&p) && p.Status.PodIP != "" && hasVolume(p.Spec.Volumes, "upstream") {
					return p.Status.PodIP
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no Ready go-modproxy pod in %s: %v; pods: %s; logs: %s", ns, err, podSummary(ns), modproxyLogs(context.Background(), ns))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func hasVolume(vs []corev1.Volume, name string) bool {
	for _, v := range vs {
		if v.Name == name {
			return true
		}
	}
	return false
}

func modproxyLogs(ctx context.Context, ns string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := shared.c.Kubectl(ctx, "logs", "-n", ns, "-l", "app.kubernetes.io/name=go-modproxy", "--tail=30")
	return string(out)
}
