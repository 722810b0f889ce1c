package agentsandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/client/processclient"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/contract"
)

// procAPI is one sandbox's way to the sandboxd API its pod serves (our
// runtime image always does: gRPC ProcessService on Options.ProcessGRPCPort,
// REST on Options.ProcessRESTPort). How it gets there follows
// Options.Connectivity, as the agent-sandbox SDK's own sandboxd transport
// does: a client-go port-forward to the pod through the API server
// (port-forward), or a direct dial of the pod IP (in-cluster-pod-ip) or of
// the Sandbox's headless Service (in-cluster-service).
//
// The connection is made on first use and remade after the port-forward
// dies; it is closed with the sandbox.
type procAPI struct {
	s *Sandbox

	mu      sync.Mutex
	conn    *grpc.ClientConn
	restURL string // http://host:port of the REST API
	runtime string // host:port of the runtime server
	files   *contract.Client
	stop    chan struct{} // closes the port-forward; nil when not forwarding
	dead    chan struct{} // closed when the port-forward ended by itself
	closed  bool
}

// errProcAPIClosed reports a call on a sandbox whose connection was closed.
var errProcAPIClosed = errors.New("process API connection closed")

// client returns a ProcessService connection and the REST base URL.
func (p *procAPI) client(ctx context.Context) (*grpc.ClientConn, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, "", errProcAPIClosed
	}
	if p.conn != nil && !p.forwardDied() {
		return p.conn, p.restURL, nil
	}
	p.teardown()
	grpcAddr, restAddr, runtimeAddr, err := p.connect(ctx)
	if err != nil {
		return nil, "", err
	}
	p.runtime = runtimeAddr
	conn, err := processclient.Dial(grpcAddr)
	if err != nil {
		p.teardown()
		return nil, "", err
	}
	p.conn, p.restURL = conn, "http://"+restAddr
	return p.conn, p.restURL, nil
}

func (p *procAPI) forwardDied() bool {
	if p.dead == nil {
		return false
	}
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}

// connect returns the gRPC and REST addresses to dial, opening a
// port-forward when Connectivity asks for one. Called with p.mu held.
func (p *procAPI) connect(ctx context.Context) (grpcAddr, restAddr, runtimeAddr string, err error) {
	o := p.s.b.opts
	gport, rport, sport := strconv.Itoa(o.ProcessGRPCPort), strconv.Itoa(o.ProcessRESTPort), strconv.Itoa(o.RuntimePort)
	switch o.Connectivity {
	case ConnectivityInClusterPodIP:
		ip := p.s.sb.PodIP()
		if ip == "" {
			return "", "", "", fmt.Errorf("sandbox %s has no pod IP yet (connectivity %s): %w", p.s.id, o.Connectivity, goruntime.ErrSandboxGone)
		}
		return net.JoinHostPort(ip, gport), net.JoinHostPort(ip, rport), net.JoinHostPort(ip, sport), nil
	case ConnectivityInClusterService:
		fqdn := p.s.sb.ServiceFQDN()
		if fqdn == "" {
			return "", "", "", fmt.Errorf("sandbox %s has no headless Service (connectivity %s needs spec.service: true on the template, or use %s): %w",
				p.s.id, o.Connectivity, ConnectivityInClusterPodIP, goruntime.ErrUnavailable)
		}
		return net.JoinHostPort(fqdn, gport), net.JoinHostPort(fqdn, rport), net.JoinHostPort(fqdn, sport), nil
	}
	return p.forward(ctx)
}

// filesClient returns a client of the runtime server's contract (for
// /unpack), dialling wherever the current connection leads.
func (p *procAPI) filesClient(ctx context.Context) (*contract.Client, error) {
	if _, _, err := p.client(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.files == nil {
		var d net.Dialer
		p.files = contract.New(func(ctx context.Context) (net.Conn, error) {
			p.mu.Lock()
			addr := p.runtime
			p.mu.Unlock()
			if addr == "" {
				return nil, errProcAPIClosed
			}
			return d.DialContext(ctx, "tcp", addr)
		}, 1<<20)
	}
	return p.files, nil
}

// forward opens a port-forward to the sandbox pod's process API ports on
// 127.0.0.1 (free local ports). Called with p.mu held.
func (p *procAPI) forward(ctx context.Context) (grpcAddr, restAddr, runtimeAddr string, err error) {
	o, k := p.s.b.opts, p.s.b.k8s
	pod := p.s.sb.PodName()
	if k.CoreClient == nil || k.RestConfig == nil {
		return "", "", "", fmt.Errorf("port-forward to sandbox pod %s: no Kubernetes REST config (set Options.Kubeconfig or RestConfig, or use an in-cluster Connectivity): %w", pod, goruntime.ErrUnavailable)
	}
	if pod == "" {
		return "", "", "", fmt.Errorf("port-forward to sandbox %s: pod name unknown: %w", p.s.id, goruntime.ErrSandboxGone)
	}
	url := k.CoreClient.RESTClient().Post().Resource("pods").Namespace(o.Namespace).Name(pod).SubResource("portforward").URL()
	rt, upgrader, err := spdy.RoundTripperFor(k.RestConfig)
	if err != nil {
		return "", "", "", fmt.Errorf("port-forward to pod %s/%s: %w", o.Namespace, pod, err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, url)
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut strings.Builder
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"},
		[]string{"0:" + strconv.Itoa(o.ProcessGRPCPort), "0:" + strconv.Itoa(o.ProcessRESTPort), "0:" + strconv.Itoa(o.RuntimePort)},
		stop, ready, io.Discard, &lockedWriter{w: &errOut})
	if err != nil {
		return "", "", "", fmt.Errorf("port-forward to pod %s/%s: %w", o.Namespace, pod, err)
	}
	dead := make(chan struct{})
	failed := make(chan error, 1)
	go func() {
		defer close(dead)
		failed <- fw.ForwardPorts()
	}()
	ctx, cancel := context.WithTimeout(ctx, portForwardTimeout)
	defer cancel()
	select {
	case <-ready:
	case err := <-failed:
		return "", "", "", fmt.Errorf("port-forward to pod %s/%s (needs create on pods/portforward; or set Options.Connectivity=in-cluster-pod-ip from inside the cluster): %w", o.Namespace, pod, err)
	case <-ctx.Done():
		close(stop)
		return "", "", "", fmt.Errorf("port-forward to pod %s/%s not ready within %s: %w", o.Namespace, pod, portForwardTimeout, ctx.Err())
	}
	ports, err := fw.GetPorts()
	if err != nil {
		close(stop)
		return "", "", "", fmt.Errorf("port-forward to pod %s/%s: %w", o.Namespace, pod, err)
	}
	for _, fp := range ports {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(fp.Local)))
		switch int(fp.Remote) {
		case o.ProcessGRPCPort:
			grpcAddr = addr
		case o.ProcessRESTPort:
			restAddr = addr
		case o.RuntimePort:
			runtimeAddr = addr
		}
	}
	p.stop, p.dead = stop, dead
	return grpcAddr, restAddr, runtimeAddr, nil
}

// teardown closes the connection and any port-forward. Called with p.mu held.
func (p *procAPI) teardown() {
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
	}
	if p.stop != nil {
		close(p.stop)
		p.stop, p.dead = nil, nil
	}
}

// close ends the connection for good.
func (p *procAPI) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.teardown()
}

// lockedWriter serialises writes from the port-forward's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
