package agentsandbox

// A warm pool's pods for the tests that need more than one (snapshots,
// forks): each pod is the runtime server with the sandboxd process API in
// its process, as the runtime image runs it (cmd/sandbox-podserver), with
// a base directory, GOPATH and caches of its own, listening on a loopback
// address of its own (127.0.0.N) at the ports every pod of a template
// shares.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/processapi"
)

// pod is one fake pod's directories.
type pod struct {
	ip                             string
	app, gopath, modcache, gocache string
}

// podPool hands out pods to claims, each once.
type podPool struct {
	runtime, grpc, rest int // the ports every pod listens on

	mu   sync.Mutex
	pods []*pod
	next int
}

// take returns the next pod's IP, "" when none is left.
func (p *podPool) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= len(p.pods) {
		return ""
	}
	p.next++
	return p.pods[p.next-1].ip
}

// byIP returns the pod at ip.
func (p *podPool) byIP(t *testing.T, ip string) *pod {
	t.Helper()
	for _, pd := range p.pods {
		if pd.ip == ip {
			return pd
		}
	}
	t.Fatalf("no pod at %s", ip)
	return nil
}

// newPodPool starts n pods; the cluster's controller gives each new
// claim the next one.
func newPodPool(t *testing.T, c *cluster, n int) *podPool {
	t.Helper()
	p := &podPool{}
	// The first pod picks free ports; the others listen on the same ones
	// at their own addresses.
	for i := range n {
		ip := fmt.Sprintf("127.0.0.%d", 10+i)
		if i == 0 {
			p.runtime, p.grpc, p.rest = freePort(t, ip), freePort(t, ip), freePort(t, ip)
		}
		p.pods = append(p.pods, startPod(t, ip, p.runtime, p.grpc, p.rest))
	}
	c.mu.Lock()
	c.pool = p
	c.mu.Unlock()
	return p
}

func freePort(t *testing.T, ip string) int {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func startPod(t *testing.T, ip string, runtime, grpc, rest int) *pod {
	t.Helper()
	dir := t.TempDir()
	pd := &pod{ip: ip, app: filepath.Join(dir, "app"), gopath: filepath.Join(dir, "gopath"),
		modcache: filepath.Join(dir, "mod"), gocache: filepath.Join(dir, "go-build")}
	// The seed an init container copies in before the server starts.
	if err := os.MkdirAll(filepath.Join(pd.gocache, "00"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pd.gocache, "00", "seed-d"), []byte("seed"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a tick of the file system's clock past the seed
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	cfg := server.Config{
		BaseDir:        pd.app,
		ExecTimeout:    time.Minute,
		MaxOutputBytes: 1 << 20,
		MaxUploadBytes: 16 << 20,
		Environ:        append(os.Environ(), "GOPATH="+pd.gopath, "GOMODCACHE="+pd.modcache, "GOCACHE="+pd.gocache, "HOME="+dir),
		FallbackHome:   dir,
		Log:            quietLogger(),
		ProcessAPI:     processapi.Serve,
	}
	hostport := func(p int) string { return net.JoinHostPort(ip, strconv.Itoa(p)) }
	go func() {
		done <- server.Serve(ctx, cfg, server.Listeners{Addr: hostport(runtime), GRPCAddr: hostport(grpc), RESTAddr: hostport(rest), ShutdownTimeout: 5 * time.Second})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + hostport(runtime) + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return pd
			}
		}
		select {
		case code := <-done:
			t.Fatalf("pod %s: the server exited (%d)", ip, code)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s never answered: %v", ip, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newPodBackend is a backend whose sandboxes are the pool's pods, reached
// at their IPs (in-cluster-pod-ip, no router: file calls go to the pod
// too), keeping snapshots in dir.
func newPodBackend(t *testing.T, c *cluster, p *podPool, dir string, mod func(*Options)) *Backend {
	t.Helper()
	return newBackend(t, c, nil, func(o *Options) {
		o.Connectivity = ConnectivityInClusterPodIP
		o.ProcessGRPCPort, o.ProcessRESTPort, o.RuntimePort = p.grpc, p.rest, p.runtime
		o.SnapshotDir = dir
		if mod != nil {
			mod(o)
		}
	})
}
