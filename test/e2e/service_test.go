//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

const mcpServerLabel = "app.kubernetes.io/name=mcp-server"

// TestMCPServerService deploys manifests/mcp-server, with snapshots
// (manifests/overlays/mcp-server-snapshots: the claim of
// manifests/snapshot-store, bound here to a local volume on the node),
// unchanged but for how its pods reach this cluster's API server (below)
// next to runc's warm pool: two replicas of the mcp-server image,
// --stateless, under the manifests' Role with RBAC enforced. A client
// reaching the Service's ready endpoints (as kube-proxy would; there is
// none here) creates a sandbox, builds a module in it, snapshots it
// through one replica and forks it through the other (snapshot_test.go),
// loses the replica serving a long
// run_go_code, and goes on with the other replica: the same files, a warm
// build cache. A second principal naming the sandbox gets what a missing
// ID gets, and a handle idle past its TTL loses its claim.
//
// The pods' in-cluster config: this cluster has no kube-proxy and mounts
// no service account tokens (the ServiceAccount admission plugin is off),
// so the test gives the pods what the kubelet would: a token of the
// mcp-server ServiceAccount (TokenRequest), the API server's CA and
// KUBERNETES_SERVICE_HOST/PORT naming the API server at the node's IP.
func TestMCPServerService(t *testing.T) {
	rt := runcTarget
	activate(t, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, ns := shared.c, rt.ns
	poolReady(ctx, t, rt, 2)

	tokens := map[string]string{"alice": randHex(t), "bob": randHex(t)}
	store := createSnapshotPV(ctx, t, ns)
	t.Cleanup(func() { deleteSnapshotPV(t, store) })
	if err := applyMCPServer(ctx, t, ns, tokens); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteMCPServer(t, ns) })
	pods := waitMCPReplicas(ctx, t, ns, 2, "")
	t.Logf("mcp-server replicas ready: %v", pods)

	svc := &serviceDialer{ns: ns}
	alice := svc.client(ctx, t, tokens["alice"])
	bob := svc.client(ctx, t, tokens["bob"])
	var calls callCount
	defer func() {
		report(t, "mcp-server", "mcp-server: %d replicas, sandbox kept across replica loss, %d/%d calls ok", len(pods), calls.ok, calls.n)
	}()

	id := calls.tool(ctx, t, alice, "create_sandbox", map[string]any{"ttl_seconds": 600, "labels": map[string]any{"e2e": "replicas"}})["sandbox_id"].(string)
	files := map[string]string{
		"go.mod":         "module example.com/rep\n\ngo 1.26\n",
		"main.go":        "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/rep/greet\"\n)\n\nfunc main() { fmt.Println(greet.Hello(\"replicas\")) }\n",
		"greet/greet.go": "package greet\n\nfunc Hello(who string) string { return \"hello, \" + who }\n",
	}
	// -x lists the commands go build runs: a compile per package it had
	// no cached result for.
	const build = `go build -x -o app . 2>build.log; echo "compiles=$(grep -c '/compile -o' build.log)"; ./app`
	first := calls.tool(ctx, t, alice, "run_go_code", map[string]any{"sandbox_id": id, "files": files, "command": build})
	if n := compiles(t, first); n < 2 || !strings.Contains(first["stdout"].(string), "hello, replicas") {
		t.Fatalf("first build: %d compiles (want main and greet, at least 2), stdout %q", n, first["stdout"])
	}

	// Snapshots in the store both replicas share (snapshot_test.go).
	snapshotAcrossReplicas(ctx, t, svc, tokens, id, build, &calls)

	// A long call on one replica; that replica's pod is deleted under it.
	pinned, victim := svc.pinned(ctx, t, tokens["alice"])
	longDone := make(chan string, 1)
	go func() {
		res, err := pinned.CallTool(ctx, &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{
			"sandbox_id": id, "command": "echo started > started.txt; sleep 30; echo done > done.txt", "timeout_seconds": 60}})
		switch {
		case err != nil:
			longDone <- "error: " + err.Error()
		case !res.IsError || !strings.Contains(resultText(res), "same sandbox_id"):
			// A replica that answers before it goes says the sandbox remains.
			longDone <- "unexpected answer: " + resultText(res)
		default:
			longDone <- "answered: " + resultText(res)
		}
	}()
	waitFile(ctx, t, alice, id, "started.txt") // its polling calls are not counted
	victimPod := podOfIP(ctx, t, ns, victim)
	t.Logf("deleting replica %s (%s) during a run_go_code", victimPod, victim)
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, victimPod, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s: %v", victimPod, err)
	}
	select {
	case r := <-longDone:
		if strings.HasPrefix(r, "unexpected") {
			t.Errorf("the call on the deleted replica: %s", r)
		}
		t.Logf("the call on the deleted replica ended: %.400s", r)
	case <-ctx.Done():
		t.Fatal("the call on the deleted replica never ended")
	}
	// The replica left the Service once its pod was deleted (a
	// terminating pod is not ready): the calls below cannot reach it.
	waitEndpointGone(ctx, t, ns, victim)

	// The other replica: same files, a warm build cache, the binary runs.
	before := svc.dialCount()
	got := calls.tool(ctx, t, alice, "read_file", map[string]any{"sandbox_id": id, "path": "greet/greet.go"})
	if !strings.Contains(fmt.Sprint(got["content"]), "hello, ") {
		t.Errorf("read_file greet/greet.go after the replica loss: %v", got)
	}
	again := calls.tool(ctx, t, alice, "run_go_code", map[string]any{"sandbox_id": id, "command": build})
	if n := compiles(t, again); n != 0 || !strings.Contains(again["stdout"].(string), "hello, replicas") {
		t.Errorf("build after the replica loss: %d compiles (want 0: a warm cache), stdout %q", n, again["stdout"])
	}
	served := svc.dialedSince(before)
	if slices.Contains(served, victim) || len(served) == 0 {
		t.Errorf("calls after the loss went to %v (the deleted replica: %s)", served, victim)
	}
	// The Deployment's replacement may be ready by now and take a call;
	// the surviving replica, ready all along, takes at least one.
	survivor := ""
	for _, p := range pods {
		if p != victimPod {
			survivor = p
		}
	}
	var names []string
	for _, ip := range served {
		names = append(names, podOfIP(ctx, t, ns, ip))
	}
	if !slices.Contains(names, survivor) {
		t.Errorf("no call after the loss was served by the surviving replica %s: %v", survivor, names)
	}
	t.Logf("calls after the loss served by %v (surviving replica: %s)", names, survivor)

	// Another principal: the ID answers as a missing one does.
	missing := randHex(t)
	for _, tool := range []string{"read_file", "run_go_code"} {
		args := func(sid string) map[string]any {
			if tool == "read_file" {
				return map[string]any{"sandbox_id": sid, "path": "main.go"}
			}
			return map[string]any{"sandbox_id": sid, "command": "cat main.go"}
		}
		foreign := calls.toolError(ctx, t, bob, tool, args(id))
		absent := calls.toolError(ctx, t, bob, tool, args(missing))
		if !strings.Contains(foreign, "not found") || strings.ReplaceAll(foreign, id, missing) != absent {
			t.Errorf("%s by bob on alice's sandbox = %q; on a missing ID = %q (want the same not found)", tool, foreign, absent)
		}
	}
	if l := calls.tool(ctx, t, bob, "list_sandboxes", map[string]any{}); strings.Contains(fmt.Sprint(l), id) {
		t.Errorf("bob's list_sandboxes shows alice's sandbox: %v", l)
	}

	// A handle idle past its TTL: the controller deletes its claim.
	short := calls.tool(ctx, t, alice, "create_sandbox", map[string]any{"ttl_seconds": 5})["sandbox_id"].(string)
	start := time.Now()
	if l, err := extClient(t).ExtensionsV1beta1().SandboxClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: agentsandbox.HandleLabel + "=" + short}); err != nil || len(l.Items) != 1 {
		t.Fatalf("claims of the new handle %s: %v, %v", short, l, err)
	}
	waitClaimGone(ctx, t, ns, short)
	t.Logf("a 5 s TTL handle's claim was deleted %v after it was created", time.Since(start).Round(time.Second))
	calls.toolError(ctx, t, alice, "read_file", map[string]any{"sandbox_id": short, "path": "x"})

	calls.tool(ctx, t, alice, "delete_sandbox", map[string]any{"sandbox_id": id})
	waitClaimGone(ctx, t, ns, id)
}

// applyMCPServer creates the tokens Secret and applies manifests/mcp-server
// with the in-cluster access this cluster needs (see TestMCPServerService).
func applyMCPServer(ctx context.Context, t *testing.T, ns string, tokens map[string]string) error {
	c := shared.c
	var lines strings.Builder
	for name, tok := range tokens {
		fmt.Fprintf(&lines, "%s:%s\n", name, tok)
	}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "mcp-server-tokens"},
		StringData: map[string]string{"tokens": lines.String()},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the tokens Secret: %w", err)
	}
	host, port, _ := net.SplitHostPort(c.InClusterAPI)
	dir := t.TempDir()
	// kustomize takes a base outside the kustomization's root only by a
	// relative path.
	base, err := filepath.Rel(dir, mcpServerManifests())
	if err != nil {
		return err
	}
	kust := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: mcp-server
      spec:
        template:
          spec:
            containers:
              - name: mcp-server
                env:
                  - name: KUBERNETES_SERVICE_HOST
                    value: "%s"
                  - name: KUBERNETES_SERVICE_PORT
                    value: "%s"
                volumeMounts:
                  - name: sa
                    mountPath: /var/run/secrets/kubernetes.io/serviceaccount
                    readOnly: true
            volumes:
              - name: sa
                secret:
                  secretName: mcp-server-sa
`, base, host, port)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		return err
	}
	if out, err := c.Kubectl(ctx, "apply", "--server-side", "--field-manager=e2e", "-n", ns, "-k", dir); err != nil {
		return fmt.Errorf("apply %s: %w\n%s", mcpServerManifests(), err, out)
	}
	exp := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "mcp-server",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for ServiceAccount mcp-server: %w", err)
	}
	ca, err := os.ReadFile(c.ServingCA)
	if err != nil {
		return fmt.Errorf("the API server's serving certificate: %w", err)
	}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "mcp-server-sa"},
		StringData: map[string]string{"token": tr.Status.Token, "ca.crt": string(ca), "namespace": ns},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the service account Secret: %w", err)
	}
	return nil
}

// mcpServerManifests is the kustomization TestMCPServerService applies:
// manifests/mcp-server with the snapshot store.
func mcpServerManifests() string {
	return filepath.Join(shared.repo, "manifests", "overlays", "mcp-server-snapshots")
}

func deleteMCPServer(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := shared.c
	if out, err := c.Kubectl(ctx, "delete", "-n", ns, "-k", mcpServerManifests(), "--wait=true"); err != nil {
		t.Logf("delete %s: %v\n%s", mcpServerManifests(), err, out)
	}
	for _, s := range []string{"mcp-server-tokens", "mcp-server-sa"} {
		_ = c.Client.CoreV1().Secrets(ns).Delete(ctx, s, metav1.DeleteOptions{})
	}
	for ctx.Err() == nil {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: mcpServerLabel})
		if err == nil && len(pods.Items) == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("mcp-server pods still in %s: %s", ns, podSummary(ns))
}

// waitMCPReplicas waits for n Ready mcp-server pods but not, and returns
// their names.
func waitMCPReplicas(ctx context.Context, t *testing.T, ns string, n int, not string) []string {
	t.Helper()
	for {
		pods, err := shared.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: mcpServerLabel})
		var ready []string
		if err == nil {
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && podReady(&p) && p.Name != not {
					ready = append(ready, p.Name)
				}
			}
			if len(ready) >= n {
				return ready
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d Ready mcp-server replicas wanted: %v; pods: %s; logs: %s", n, err, podSummary(ns), mcpLogs(ns))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// mcpLogs returns the tail of every mcp-server pod's log, for failures.
func mcpLogs(ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, _ := shared.c.Kubectl(ctx, "logs", "-n", ns, "-l", mcpServerLabel, "--tail=20", "--prefix")
	return string(out)
}
