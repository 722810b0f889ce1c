package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"time"
)

// The module relay lets a sandbox without a network reach the host's Go
// module proxy: it serves HTTP on a loopback address inside the sandbox's
// network namespace (the sandbox's GOPROXY names it) and forwards each
// request, unchanged, to the host proxy's unix socket bound into the
// sandbox. The host proxy decides what is served; the relay only carries.

// relayTimeout bounds one relayed request: the host proxy's own fetch
// bound (two minutes) plus a margin.
const relayTimeout = 3 * time.Minute

// checkRelayAddr checks that addr is a loopback IP and port: the relay
// must never be reachable from outside the sandbox.
func checkRelayAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want 127.0.0.1:port: %w", err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback IP address (want 127.0.0.1:port)", host)
	}
	return nil
}

// startModuleRelay listens on addr and relays to the unix socket at
// socket until ctx ends or the returned server is closed.
func startModuleRelay(ctx context.Context, addr, socket string, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("module relay: %w", err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "module-proxy"
			pr.Out.Host = "module-proxy"
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
			MaxIdleConns:    4,
			IdleConnTimeout: 30 * time.Second,
		},
		// A 404 is the go command's "not found": it goes on to the next
		// proxy in GOPROXY and with its search over an import path's
		// prefixes, and prints this text if nothing serves the module.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("module relay: host module proxy not reachable", "path", r.URL.Path, "err", err)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, "module relay: the host's module proxy is not reachable (%v);\nmodules come only from the module cache until it is\n", err)
		},
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "module relay: only GET and HEAD", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), relayTimeout)
		defer cancel()
		rp.ServeHTTP(w, r.WithContext(ctx))
	})
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Error("module relay: serve", "err", err)
		}
	}()
	go func() { <-ctx.Done(); _ = hs.Close() }()
	log.Info("module relay listening", "addr", ln.Addr().String(), "socket", socket)
	return hs, nil
}
