//go:build e2e

package e2e

// The MCP client side of TestMCPServerService: reaching the Service's
// endpoints, bearer tokens, counting calls, and waiting on the cluster.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

// serviceDialer does for the test what kube-proxy does for a Service: each
// new connection goes to one of the Service's ready endpoints (from its
// EndpointSlices), round robin. Keep-alives are off, so each call picks.
type serviceDialer struct {
	ns string

	mu     sync.Mutex
	next   int
	dialed []string
}

func (s *serviceDialer) endpoints(ctx context.Context) ([]string, error) {
	list, err := shared.c.Client.DiscoveryV1().EndpointSlices(s.ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=mcp-server"})
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, sl := range list.Items {
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				ips = append(ips, ep.Addresses...)
			}
		}
	}
	return ips, nil
}

func (s *serviceDialer) pick(ctx context.Context) (string, error) {
	ips, err := s.endpoints(ctx)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ips) == 0 {
		return "", fmt.Errorf("service mcp-server in %s has no ready endpoints", s.ns)
	}
	ip := ips[s.next%len(ips)]
	s.next++
	s.dialed = append(s.dialed, ip)
	return ip, nil
}

func (s *serviceDialer) dialCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dialed)
}

func (s *serviceDialer) dialedSince(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.dialed[n:]...)
}

// connect opens an MCP client whose connections go where dial says.
func connectMCP(ctx context.Context, t *testing.T, token string, dial func(context.Context) (string, error)) *mcp.ClientSession {
	t.Helper()
	var d net.Dialer
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		ip, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		return d.DialContext(ctx, network, net.JoinHostPort(ip, "8931"))
	}}
	hc := &http.Client{Transport: bearer{token, tr}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "v0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://mcp-server." + runcTarget.ns + ".svc:8931/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect to mcp-server: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func (s *serviceDialer) client(ctx context.Context, t *testing.T, token string) *mcp.ClientSession {
	return connectMCP(ctx, t, token, s.pick)
}

// pinned returns a client held to one endpoint the Service chose, and its IP.
func (s *serviceDialer) pinned(ctx context.Context, t *testing.T, token string) (*mcp.ClientSession, string) {
	t.Helper()
	ip, err := s.pick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return connectMCP(ctx, t, token, func(context.Context) (string, error) { return ip, nil }), ip
}

type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// callCount counts the calls whose answer the test expected, and those
// that gave it.
type callCount struct{ n, ok int }

// tool calls a tool that must succeed and returns its structured content.
func (c *callCount) tool(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	c.n++
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v; logs: %s", name, err, mcpLogs(runcTarget.ns))
	}
	if res.IsError {
		t.Fatalf("%s %v: %s", name, args, resultText(res))
	}
	data, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	c.ok++
	return out
}

// toolError calls a tool that must answer with a tool error and returns its text.
func (c *callCount) toolError(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	c.n++
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return ""
	}
	if !res.IsError {
		t.Errorf("%s %v succeeded, want an error: %s", name, args, resultText(res))
		return ""
	}
	c.ok++
	return resultText(res)
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

var compilesRE = regexp.MustCompile(`compiles=(\d+)`)

func compiles(t *testing.T, run map[string]any) int {
	t.Helper()
	m := compilesRE.FindStringSubmatch(fmt.Sprint(run["stdout"]))
	if m == nil {
		t.Fatalf("no compiles= line in %v", run)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// waitFile polls read_file until name exists in the sandbox.
func waitFile(ctx context.Context, t *testing.T, cs *mcp.ClientSession, id, name string) {
	t.Helper()
	for {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"sandbox_id": id, "path": name}})
		if err == nil && !res.IsError {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never appeared in sandbox %s", name, id)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func podOfIP(ctx context.Context, t *testing.T, ns, ip string) string {
	t.Helper()
	pods, err := shared.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: mcpServerLabel})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == ip {
			return p.Name
		}
	}
	t.Fatalf("no mcp-server pod has IP %s: %s", ip, podSummary(ns))
	return ""
}

func waitEndpointGone(ctx context.Context, t *testing.T, ns, ip string) {
	t.Helper()
	s := &serviceDialer{ns: ns}
	for {
		ips, err := s.endpoints(ctx)
		if err == nil && !slices.Contains(ips, ip) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("endpoint %s still ready in service mcp-server: %v", ip, ips)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// waitClaimGone waits until no claim carries handle id's label.
func waitClaimGone(ctx context.Context, t *testing.T, ns, id string) {
	t.Helper()
	ext := extClient(t)
	for {
		list, err := ext.ExtensionsV1beta1().SandboxClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: agentsandbox.HandleLabel + "=" + id})
		if err == nil && len(list.Items) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("claim of handle %s still there: %v", id, err)
		case <-time.After(time.Second):
		}
	}
}

func randHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
