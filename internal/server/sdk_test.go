package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	sandboxv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	sdk "sigs.k8s.io/agent-sandbox/clients/go/sandbox"
	agentsfake "sigs.k8s.io/agent-sandbox/clients/k8s/clientset/versioned/fake"
	extfake "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned/fake"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

const (
	testNamespace = "default"
	testWarmPool  = "go-pool"
)

// fakeCluster is a K8sHelper over fake clientsets in which a reactor
// plays the agent-sandbox controller: each new SandboxClaim gets a name
// (the fake tracker does not honour generateName), is bound to a fresh
// Sandbox that is already Ready, and records that binding in its status.
func fakeCluster(t *testing.T) *sdk.K8sHelper {
	t.Helper()
	agents := agentsfake.NewSimpleClientset()
	ext := extfake.NewSimpleClientset()
	var seq atomic.Int64
	ext.PrependReactor("create", "sandboxclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		claim, ok := a.(k8stesting.CreateAction).GetObject().(*extv1beta1.SandboxClaim)
		if !ok {
			return false, nil, nil
		}
		if claim.Spec.WarmPoolRef.Name != testWarmPool {
			return true, nil, fmt.Errorf("warm pool %q does not exist", claim.Spec.WarmPoolRef.Name)
		}
		n := seq.Add(1)
		if claim.Name == "" {
			claim.Name = fmt.Sprintf("%s%05d", claim.GenerateName, n)
		}
		sb := &sandboxv1beta1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-warm-%d", testWarmPool, n), Namespace: claim.Namespace},
			Status: sandboxv1beta1.SandboxStatus{
				PodIPs: []string{"127.0.0.1"},
				Conditions: []metav1.Condition{{
					Type:               string(sandboxv1beta1.SandboxConditionReady),
					Status:             metav1.ConditionTrue,
					Reason:             "DependenciesReady",
					LastTransitionTime: metav1.Now(),
				}},
			},
		}
		if _, err := agents.AgentsV1beta1().Sandboxes(claim.Namespace).Create(context.Background(), sb, metav1.CreateOptions{}); err != nil {
			return true, nil, fmt.Errorf("create sandbox for claim %s: %w", claim.Name, err)
		}
		claim.Status.SandboxStatus.Name = sb.Name
		return false, claim, nil // the tracker stores the claim as changed here
	})
	return &sdk.K8sHelper{
		AgentsClient:     agents.AgentsV1beta1(),
		ExtensionsClient: ext.ExtensionsV1beta1(),
		Log:              logr.Discard(),
	}
}

// headerRecorder remembers the X-Sandbox-* headers the SDK sent.
type headerRecorder struct {
	next http.Handler
	mu   sync.Mutex
	ids  map[string]bool
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.ids[r.Header.Get("X-Sandbox-ID")+"|"+r.Header.Get("X-Sandbox-Namespace")+"|"+r.Header.Get("X-Sandbox-Port")] = true
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

// openSDKSandbox claims a sandbox through the real SDK client in Direct
// URL mode, pointed at a fresh runtime server.
func openSDKSandbox(t *testing.T, mutate func(*Config)) (*sdk.Sandbox, *testServer, *headerRecorder) {
	t.Helper()
	ts := startServer(t, mutate)
	rec := &headerRecorder{next: ts.Server, ids: map[string]bool{}}
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	client, err := sdk.NewClient(t.Context(), sdk.Options{
		APIURL:              hs.URL,
		K8sHelper:           fakeCluster(t),
		Quiet:               true,
		SandboxReadyTimeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatalf("sdk.NewClient: %v", err)
	}
	sb, err := client.CreateSandbox(t.Context(), testWarmPool, testNamespace)
	if err != nil {
		t.Fatalf("CreateSandbox: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.Background()); err != nil {
			t.Errorf("sandbox Close: %v", err)
		}
	})
	return sb, ts, rec
}

func httpStatus(err error) int {
	var he *sdk.HTTPError
	if errors.As(err, &he) {
		return he.StatusCode
	}
	return 0
}

func TestSDKConformance(t *testing.T) {
	sb, ts, rec := openSDKSandbox(t, nil)
	ctx := t.Context()

	t.Run("Run", func(t *testing.T) {
		res, err := sb.Run(ctx, "echo hello && echo oops >&2 && exit 7")
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if res.Stdout != "hello\n" || res.Stderr != "oops\n" || res.ExitCode != 7 {
			t.Fatalf("Run = %+v, want stdout hello, stderr oops, exit 7", res)
		}
	})
	t.Run("RunPipesInBaseDir", func(t *testing.T) {
		res, err := sb.Run(ctx, "pwd | tr a-z A-Z")
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if want := strings.ToUpper(ts.Base) + "\n"; res.Stdout != want {
			t.Fatalf("pwd = %q, want %q", res.Stdout, want)
		}
	})
	t.Run("WriteReadListExists", func(t *testing.T) {
		content := []byte("package main\n\nfunc main() { println(\"hi\") }\n\x00\xff binary tail")
		if err := sb.Write(ctx, "main.go", content); err != nil {
			t.Fatalf("Write: %v", err)
		}
		got, err := sb.Read(ctx, "main.go")
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if string(got) != string(content) {
			t.Fatalf("Read = %q, want %q", got, content)
		}
		entries, err := sb.List(ctx, ".")
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var found *sdk.FileEntry
		for i := range entries {
			if entries[i].Name == "main.go" {
				found = &entries[i]
			}
		}
		if found == nil || found.Type != sdk.FileTypeFile || found.Size != int64(len(content)) {
			t.Fatalf("List(.) = %+v, want main.go as a %d-byte file", entries, len(content))
		}
		if age := time.Since(found.ModTime); age < -time.Minute || age > time.Minute {
			t.Fatalf("main.go mod_time %s is %s from now", found.ModTime, age)
		}
		for name, want := range map[string]bool{"main.go": true, "nope.go": false, ".": true} {
			ok, err := sb.Exists(ctx, name)
			if err != nil || ok != want {
				t.Fatalf("Exists(%q) = %v, %v; want %v", name, ok, err, want)
			}
		}
	})
	t.Run("ListSubdirectory", func(t *testing.T) {
		if _, err := sb.Run(ctx, "mkdir -p pkg/sub && echo x > pkg/sub/f.txt"); err != nil {
			t.Fatal(err)
		}
		entries, err := sb.List(ctx, "pkg")
		if err != nil {
			t.Fatalf("List(pkg): %v", err)
		}
		if len(entries) != 1 || entries[0].Name != "sub" || entries[0].Type != sdk.FileTypeDirectory {
			t.Fatalf("List(pkg) = %+v, want one directory sub", entries)
		}
		got, err := sb.Read(ctx, "pkg/sub/f.txt")
		if err != nil || string(got) != "x\n" {
			t.Fatalf("Read(pkg/sub/f.txt) = %q, %v", got, err)
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		if _, err := sb.Read(ctx, "missing.txt"); httpStatus(err) != http.StatusNotFound {
			t.Fatalf("Read(missing) error %v, want HTTP 404", err)
		}
		if _, err := sb.Read(ctx, "pkg"); httpStatus(err) != http.StatusNotFound {
			t.Fatalf("Read(a directory) error %v, want HTTP 404", err)
		}
		if _, err := sb.List(ctx, "main.go"); httpStatus(err) != http.StatusNotFound {
			t.Fatalf("List(a file) error %v, want HTTP 404", err)
		}
	})
	t.Run("Traversal", func(t *testing.T) {
		if _, err := sb.Run(ctx, "ln -s /etc planted && ln -s ../.. up"); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"../secret", "..", "pkg/../../x", "planted/passwd", "up", "up/etc/hostname"} {
			if _, err := sb.Read(ctx, name); httpStatus(err) != http.StatusForbidden {
				t.Errorf("Read(%q) error %v, want HTTP 403", name, err)
			}
			if _, err := sb.List(ctx, name); httpStatus(err) != http.StatusForbidden {
				t.Errorf("List(%q) error %v, want HTTP 403", name, err)
			}
			if _, err := sb.Exists(ctx, name); httpStatus(err) != http.StatusForbidden {
				t.Errorf("Exists(%q) error %v, want HTTP 403", name, err)
			}
		}
	})
	t.Run("OutputBeyondSDKLimit", func(t *testing.T) {
		// 20 MB of '"' on each stream: 80 MB once JSON-escaped.
		res, err := sb.Run(ctx, `head -c 20000000 /dev/zero | tr '\0' '"'; head -c 20000000 /dev/zero | tr '\0' '"' >&2`)
		if err != nil {
			t.Fatalf("Run with 40 MB of output: %v", err)
		}
		for name, s := range map[string]string{"stdout": res.Stdout, "stderr": res.Stderr} {
			if !strings.Contains(s, "[sandbox-server: "+name+" truncated:") || len(s) < 3<<20 {
				t.Errorf("%s: %d bytes, tail %q; want a large head and a truncation marker", name, len(s), s[max(0, len(s)-120):])
			}
		}
	})
	t.Run("NonUTF8", func(t *testing.T) {
		res, err := sb.Run(ctx, `printf 'ok\377\376end'`)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if res.Stdout != "ok\uFFFD\uFFFDend" {
			t.Fatalf("stdout %q, want invalid bytes as U+FFFD", res.Stdout)
		}
	})
	t.Run("Signal", func(t *testing.T) {
		res, err := sb.Run(ctx, "kill -KILL $$")
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if res.ExitCode != 137 || !strings.Contains(res.Stderr, "killed by signal 9") {
			t.Fatalf("Run(kill -KILL $$) = %+v, want exit 137 and a note", res)
		}
	})

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for key := range rec.ids {
		if id, rest, _ := strings.Cut(key, "|"); !strings.HasPrefix(id, testWarmPool+"-warm-") || rest != testNamespace+"|8888" {
			t.Errorf("SDK sent X-Sandbox-ID|Namespace|Port = %q, want the claimed sandbox in %s on 8888", key, testNamespace)
		}
	}
	if len(rec.ids) == 0 {
		t.Errorf("no request reached the server through the SDK")
	}
}

// TestSDKRunTimeout: the SDK sends only the command, so the server's
// default deadline (SANDBOX_EXEC_TIMEOUT_SECONDS) applies.
func TestSDKRunTimeout(t *testing.T) {
	sb, _, _ := openSDKSandbox(t, func(c *Config) { c.ExecTimeout = time.Second })
	res, err := sb.Run(t.Context(), "echo before; sleep 30 & sleep 30")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 124 || res.Stdout != "before\n" || !strings.Contains(res.Stderr, "timed out after 1s") {
		t.Fatalf("Run past the deadline = %+v, want exit 124, the output so far and a note", res)
	}
}
