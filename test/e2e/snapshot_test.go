//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/test/e2e/cluster"
)

// The snapshot store of TestMCPServerService: manifests/snapshot-store's
// claim, bound to a local volume on the node (what
// manifests/snapshot-store/local-pv makes, with this run's directory and
// node), which both mcp-server replicas mount.
const snapshotPV = "go-runtime-snapshots-e2e"

// createSnapshotPV makes the local volume the claim of namespace ns binds
// to, on a directory of this run, and returns that directory.
func createSnapshotPV(ctx context.Context, t *testing.T, ns string) string {
	t.Helper()
	dir := filepath.Join(shared.c.Dir, "snapshots-"+ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fs := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: snapshotPV},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			VolumeMode:                    &fs,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "go-runtime-snapshots"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{cluster.NodeName}}},
			}}}},
		},
	}
	if _, err := shared.c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create the snapshots' volume: %v", err)
	}
	return dir
}

func deleteSnapshotPV(t *testing.T, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shared.c.Client.CoreV1().PersistentVolumes().Delete(ctx, snapshotPV, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete the snapshots' volume: %v", err)
	}
	_ = os.RemoveAll(dir)
}

// snapshotAcrossReplicas is issue 42's must-show 3, on TestMCPServerService's
// two replicas and alice's sandbox id (its module built once by build):
// snapshot_sandbox through one replica, create_sandbox from_snapshot (the
// fork) through the other, into another pod; the fork's first build
// compiles nothing (the build cache came with the snapshot); fork_sandbox
// of the live sandbox through the first; bob cannot use alice's snapshot.
// Summary: `snapshot: save X ms, fork Y ms, first build Z ms (agent-sandbox, runc)`.
func snapshotAcrossReplicas(ctx context.Context, t *testing.T, svc *serviceDialer, tokens map[string]string, id, build string, calls *callCount) {
	t.Helper()
	ns := svc.ns
	ips, err := svc.endpoints(ctx)
	if err != nil || len(ips) < 2 {
		t.Fatalf("two ready mcp-server endpoints wanted: %v, %v", ips, err)
	}
	pin := func(token, ip string) *mcp.ClientSession {
		return connectMCP(ctx, t, token, func(context.Context) (string, error) { return ip, nil })
	}
	one, two := pin(tokens["alice"], ips[0]), pin(tokens["alice"], ips[1])
	bob := pin(tokens["bob"], ips[1])
	t.Logf("snapshot through %s (%s), fork through %s (%s)", ips[0], podOfIP(ctx, t, ns, ips[0]), ips[1], podOfIP(ctx, t, ns, ips[1]))

	start := time.Now()
	snap := calls.tool(ctx, t, one, "snapshot_sandbox", map[string]any{"sandbox_id": id, "labels": map[string]any{"step": "built"}})
	save := time.Since(start)
	snapID, _ := snap["snapshot_id"].(string)
	if snapID == "" || snap["method"] != "stream" {
		t.Fatalf("snapshot_sandbox: %v", snap)
	}
	t.Logf("snapshot %s: %v bytes in %v", snapID, snap["bytes"], save.Round(time.Millisecond))

	if l := calls.tool(ctx, t, two, "list_snapshots", map[string]any{}); !strings.Contains(fmt.Sprint(l["snapshots"]), snapID) {
		t.Errorf("list_snapshots through the other replica: %v", l)
	}
	foreign := calls.toolError(ctx, t, bob, "create_sandbox", map[string]any{"from_snapshot": snapID})
	missing := randHex(t)
	absent := calls.toolError(ctx, t, bob, "create_sandbox", map[string]any{"from_snapshot": missing})
	if !strings.Contains(foreign, "not found") || strings.ReplaceAll(foreign, snapID, missing) != absent {
		t.Errorf("bob's create_sandbox from alice's snapshot = %q; from a missing one = %q (want the same not found)", foreign, absent)
	}

	start = time.Now()
	forkID, _ := calls.tool(ctx, t, two, "create_sandbox", map[string]any{"from_snapshot": snapID, "ttl_seconds": 600})["sandbox_id"].(string)
	fork := time.Since(start)
	if forkID == "" {
		t.Fatal("create_sandbox from_snapshot gave no sandbox_id")
	}
	if a, b := handlePod(ctx, t, ns, id), handlePod(ctx, t, ns, forkID); a == b {
		t.Errorf("the fork %s is in the original's pod %s", forkID, a)
	} else {
		t.Logf("original in sandbox %s, fork in %s", a, b)
	}
	// The same build in the original, warm, for comparison (logged; the
	// local backend's bench holds the fork's first build to 1.2x it).
	warm := calls.tool(ctx, t, one, "run_go_code", map[string]any{"sandbox_id": id, "command": build})
	first := calls.tool(ctx, t, two, "run_go_code", map[string]any{"sandbox_id": forkID, "command": build})
	n := compiles(t, first)
	if n != 0 || !strings.Contains(fmt.Sprint(first["stdout"]), "hello, replicas") {
		t.Errorf("the fork's first build: %d compiles (want 0: the snapshot's build cache), stdout %q", n, first["stdout"])
	}
	buildMS, _ := first["duration_ms"].(float64)
	warmMS, _ := warm["duration_ms"].(float64)
	t.Logf("the fork's first build %d ms (%d compiles); the same build in the original, warm: %d ms (%d compiles)", int64(buildMS), n, int64(warmMS), compiles(t, warm))
	report(t, "snapshot", "snapshot: save %d ms, fork %d ms, first build %d ms (agent-sandbox, runc)", save.Milliseconds(), fork.Milliseconds(), int64(buildMS))

	// fork_sandbox of the live sandbox, with a file written just before.
	calls.tool(ctx, t, two, "run_go_code", map[string]any{"sandbox_id": id, "command": "echo newest > newest.txt"})
	forks := calls.tool(ctx, t, one, "fork_sandbox", map[string]any{"sandbox_id": id, "count": 1, "ttl_seconds": 600})
	list, _ := forks["forks"].([]any)
	var liveFork string
	if len(list) == 1 {
		f, _ := list[0].(map[string]any)
		liveFork, _ = f["sandbox_id"].(string)
	}
	if liveFork == "" {
		t.Fatalf("fork_sandbox: %v", forks)
	}
	if got := calls.tool(ctx, t, two, "read_file", map[string]any{"sandbox_id": liveFork, "path": "newest.txt"}); !strings.Contains(fmt.Sprint(got["content"]), "newest") {
		t.Errorf("the live fork lacks the file written just before: %v", got)
	}
	for _, f := range []string{forkID, liveFork} {
		calls.tool(ctx, t, one, "delete_sandbox", map[string]any{"sandbox_id": f})
	}
	calls.tool(ctx, t, two, "delete_snapshot", map[string]any{"snapshot_id": snapID})
	calls.toolError(ctx, t, one, "create_sandbox", map[string]any{"from_snapshot": snapID})
}

// handlePod returns the Sandbox (and pod) name of handle id's claim.
func handlePod(ctx context.Context, t *testing.T, ns, id string) string {
	t.Helper()
	l, err := extClient(t).ExtensionsV1beta1().SandboxClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: agentsandbox.HandleLabel + "=" + id})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("claim of handle %s: %v, %v", id, l, err)
	}
	return l.Items[0].Status.SandboxStatus.Name
}
