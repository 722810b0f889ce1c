package processnode

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// prober runs one container's readiness probe against the pod's process the
// way a kubelet would: HTTP GET (2xx/3xx succeeds), TCP connect, or an exec
// command (run here as a host process with the pod's environment).
type prober struct {
	probe     *corev1.Probe
	container *corev1.Container
	podIP     string
	env       []string
	dir       string
	client    *http.Client
}

// timing returns the probe's schedule with the kubelet's defaults filled in.
func (p *prober) timing() (initialDelay, period time.Duration, success, failure int) {
	pr := p.probe
	period = 10 * time.Second
	if pr.PeriodSeconds > 0 {
		period = time.Duration(pr.PeriodSeconds) * time.Second
	}
	success, failure = 1, 3
	if pr.SuccessThreshold > 0 {
		success = int(pr.SuccessThreshold)
	}
	if pr.FailureThreshold > 0 {
		failure = int(pr.FailureThreshold)
	}
	return time.Duration(pr.InitialDelaySeconds) * time.Second, period, success, failure
}

// run performs one probe; nil means success.
func (p *prober) run(ctx context.Context) error {
	timeout := time.Second
	if p.probe.TimeoutSeconds > 0 {
		timeout = time.Duration(p.probe.TimeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := p.probe.ProbeHandler
	switch {
	case h.HTTPGet != nil:
		return p.httpGet(ctx, h.HTTPGet)
	case h.TCPSocket != nil:
		host := h.TCPSocket.Host
		if host == "" {
			host = p.podIP
		}
		port, err := resolvePort(h.TCPSocket.Port, p.container)
		if err != nil {
			return err
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("tcp probe: %w", err)
		}
		return conn.Close()
	case h.Exec != nil:
		if len(h.Exec.Command) == 0 {
			return fmt.Errorf("exec probe: empty command")
		}
		cmd := exec.CommandContext(ctx, h.Exec.Command[0], h.Exec.Command[1:]...)
		cmd.Env = p.env
		cmd.Dir = p.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("exec probe %v: %w: %s", h.Exec.Command, err, out)
		}
		return nil
	case h.GRPC != nil:
		// A TCP connect stands in: the health service itself is not spoken here.
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(p.podIP, strconv.Itoa(int(h.GRPC.Port))))
		if err != nil {
			return fmt.Errorf("grpc probe (tcp connect): %w", err)
		}
		return conn.Close()
	}
	return fmt.Errorf("probe has no handler")
}

func (p *prober) httpGet(ctx context.Context, g *corev1.HTTPGetAction) error {
	host := g.Host
	if host == "" {
		host = p.podIP
	}
	port, err := resolvePort(g.Port, p.container)
	if err != nil {
		return err
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
	if u.Path == "" {
		u.Path = "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("http probe %s: %w", u.String(), err)
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("http probe: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("http probe %s: status %d", u.String(), resp.StatusCode)
	}
	return nil
}

// resolvePort turns a probe's port (a number or a container port's name)
// into a number.
func resolvePort(port intstr.IntOrString, c *corev1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("probe port %q: container %s has no port of that name", port.StrVal, c.Name)
}
