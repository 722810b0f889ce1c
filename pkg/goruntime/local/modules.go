package local

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/modproxy"
)

// Modules on demand (Options.AllowModules): the backend runs one module
// proxy (package modproxy) and serves it, for each sandbox, on a unix
// socket in the sandbox's run directory (bound at runDir). Inside, the
// runtime server relays moduleRelayAddr, on the sandbox's own loopback,
// to that socket, and GOPROXY lists the read-only host cache first and
// the relay after it.
const (
	moduleRelayAddr   = "127.0.0.1:7079"
	modProxySockName  = "modproxy.sock"
	modProxyReadLimit = 30 * time.Second // a request's headers
	modProxyConns     = 16               // connections one sandbox holds open at once
)

// moduleProxies is the backend's module proxy and the sockets it serves
// it on, one per sandbox this process opened or attached, until that
// sandbox is closed (through this process) or the process exits.
type moduleProxies struct {
	proxy  *modproxy.Proxy // nil: Options.AllowModules is empty
	logger *slog.Logger

	mu      sync.Mutex
	servers map[string]*http.Server // by sandbox ID
}

// setup creates the module proxy when o.AllowModules names patterns,
// fetching with the go command of goroot into modCache from the host's
// hostProxy and hostSumDB (host.findGo).
func (m *moduleProxies) setup(o Options, goroot, modCache, hostProxy, hostSumDB string) error {
	m.servers, m.logger = map[string]*http.Server{}, o.Logger
	if len(o.AllowModules) == 0 {
		return nil
	}
	work := stateDir(o.StateDir).modProxyWork()
	if err := os.MkdirAll(work, 0o700); err != nil {
		return fmt.Errorf("module proxy: %w", err)
	}
	env := []string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOMODCACHE", "GOPROXY", "GOSUMDB", "GOFLAGS", "GOTOOLCHAIN", "GOWORK", "GO111MODULE", "GOENV":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "GOMODCACHE="+modCache, "GOPROXY="+hostProxy, "GOSUMDB="+hostSumDB,
		"GOFLAGS=", "GOTOOLCHAIN=local", "GOWORK=off", "GO111MODULE=on")
	p, err := modproxy.New(modproxy.Config{
		Allow:    o.AllowModules,
		ModCache: modCache,
		Source:   modproxy.GoCommand{Go: filepath.Join(goroot, "bin", "go"), Env: env, Dir: work},
		Setting:  "%s (local.Options.AllowModules)",
		// 0: modproxy's default.
		MaxDownloadBytes: o.ModuleDownloadBytes,
		BudgetSetting:    "local.Options.ModuleDownloadBytes",
		Logger:           o.Logger.With(slog.String("component", "modproxy")),
	})
	if err != nil {
		return err
	}
	m.proxy = p
	return nil
}

// modProxySocket is where a sandbox's module proxy socket is on the host.
func (l layout) modProxySocket() string {
	if l.ownIDs {
		return l.view + filepath.Join(l.disk, disk.HostDir, modProxySockName)
	}
	return filepath.Join(l.hostRun(), modProxySockName)
}

// serve serves the module proxy on sandbox id's socket (l),
// giving the socket to its host uid (0: the caller's). Nothing happens
// without an allowlist or when this process serves it already. A stale
// socket file (from a process that served it before) is replaced.
func (m *moduleProxies) serve(id string, l layout, uid int) error {
	if m.proxy == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.servers[id] != nil {
		return nil
	}
	sock := l.modProxySocket()
	if fi, err := os.Lstat(sock); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		_ = os.Remove(sock)
	}
	ln, err := listenUnix(sock)
	if err != nil {
		return fmt.Errorf("module proxy socket for sandbox %s: %w", id, err)
	}
	// Lchown: the sandbox owns the directory and may have swapped the
	// name for a symlink already; the change must not follow it. A
	// sandbox with subordinate ids of its own connects as a stranger:
	// its socket is in a directory only this user can change, and open
	// to the sandbox through it.
	switch {
	case l.ownIDs:
		if err := os.Chmod(sock, 0o666); err != nil {
			ln.Close()
			return fmt.Errorf("module proxy socket for sandbox %s: %w", id, err)
		}
	case uid > 0:
		if err := os.Lchown(sock, uid, uid); err != nil {
			ln.Close()
			return fmt.Errorf("module proxy socket for sandbox %s: %w", id, err)
		}
	}
	// A sandbox that opens connections without end holds only its own
	// share of this process's goroutines and descriptors.
	ln = netutil.LimitListener(ln, modProxyConns)
	srv := &http.Server{
		Handler: m.proxy,
		// Requests name their sandbox, so that it holds at most its
		// own share of the proxy's fetch slots.
		ConnContext:       func(ctx context.Context, _ net.Conn) context.Context { return modproxy.WithClient(ctx, id) },
		ReadHeaderTimeout: modProxyReadLimit,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(m.logger.Handler(), slog.LevelWarn),
	}
	go func() { _ = srv.Serve(ln) }()
	m.servers[id] = srv
	return nil
}

// stop stops serving sandbox id's module proxy socket.
func (m *moduleProxies) stop(id string) {
	m.mu.Lock()
	srv := m.servers[id]
	delete(m.servers, id)
	m.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// moduleEnv is the sandbox's GOPROXY and GOSUMDB. Without a network:
// the host module cache, read-only, as a file:// proxy, then (with an
// allowlist) the relay. Checksums are not verified inside: the host's go
// command verified what is in its cache when it downloaded it.
func (h *host) moduleEnv() []string {
	cache := "file://" + modCacheRO + "/cache/download"
	switch {
	case h.opts.Network:
		return []string{"GOPROXY=" + cache + "," + h.hostProxy, "GOSUMDB=" + h.hostSumDB}
	case h.modules.proxy != nil:
		// The file:// proxy first: what the host has is served without a
		// round trip, and modules outside the allowlist still resolve
		// from it. The relay last: its 404 text (a refusal naming the
		// pattern to add) is what the go command prints for a module
		// found nowhere.
		return []string{"GOPROXY=" + cache + ",http://" + moduleRelayAddr, "GOSUMDB=off"}
	default:
		return []string{"GOPROXY=" + cache, "GOSUMDB=off"}
	}
}

// relayFlags sets the runtime server's relay to the module proxy; a
// sandbox of subordinate ids of its own (ownIDs) finds the socket in its
// host sockets directory.
func (m *moduleProxies) relayFlags(f *server.Flags, ownIDs bool) {
	if m.proxy == nil {
		return
	}
	f.ModuleRelayAddr, f.ModuleRelaySocket = moduleRelayAddr, runDir+"/"+modProxySockName
	if ownIDs {
		f.ModuleRelaySocket = hostSocketsDir + "/" + modProxySockName
	}
}
