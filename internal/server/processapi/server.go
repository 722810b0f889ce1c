package processapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	"sigs.k8s.io/agent-sandbox/packages/sandboxd/pkg/server"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server/sockets"
)

// Server is a running sandboxd API: the gRPC ProcessService and/or the REST
// API, whichever Config enabled.
type Server struct {
	cfg      Config
	procs    *processService
	rest     *server.RESTServer
	grpcSrv  *grpc.Server
	httpSrv  *http.Server
	grpcAddr string
	restAddr string

	serving   sync.WaitGroup
	errMu     sync.Mutex
	serveErr  error
	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
}

// Serve starts the process API in this process, as a
// server.ProcessAPIFunc (a re-executed program's, the pod server's).
func Serve(ctx context.Context, cfg Config) (io.Closer, error) {
	srv, err := Start(ctx, cfg)
	if err != nil {
		return nil, err // not a nil *Server in a non-nil Closer
	}
	return srv, nil
}

// Start listens on the configured addresses and serves until ctx ends or
// Close is called (either one shuts down gracefully, see
// Config.ShutdownTimeout). It returns once both listeners are open, so a
// client may connect at once. Errors: a bad Config, or a listener that
// could not be opened (address in use, unwritable socket directory).
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := validate(cfg); err != nil {
		return nil, err
	}
	cfg = withDefaults(cfg)
	root, err := filepath.Abs(cfg.RootDir)
	if err != nil {
		return nil, fmt.Errorf("sandboxd: root directory %q: %w", cfg.RootDir, err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("sandboxd: root directory: %w", err)
	}
	cfg.RootDir = root

	s := &Server{cfg: cfg, done: make(chan struct{})}
	var grpcLis, restLis net.Listener
	grpcLis, restLis = cfg.GRPCListener, cfg.RESTListener
	if grpcLis == nil && cfg.GRPCAddr != "" {
		if grpcLis, err = sockets.Listen(cfg.GRPCAddr); err != nil {
			return nil, fmt.Errorf("sandboxd grpc: %w", err)
		}
	}
	if grpcLis != nil {
		s.grpcAddr = sockets.String(grpcLis)
	}
	if restLis == nil && cfg.RESTAddr != "" {
		if restLis, err = sockets.Listen(cfg.RESTAddr); err != nil {
			if grpcLis != nil {
				_ = grpcLis.Close()
			}
			return nil, fmt.Errorf("sandboxd rest: %w", err)
		}
	}
	if restLis != nil {
		s.restAddr = sockets.String(restLis)
	}

	s.procs = newProcessService(root, cfg.StreamChunkSize, cfg.Env, cfg.Children, cfg.Observer, logr.FromSlogHandler(cfg.Logger.Handler()))
	if grpcLis != nil {
		s.grpcSrv = grpc.NewServer()
		processv1.RegisterProcessServiceServer(s.grpcSrv, s.procs)
		reflection.Register(s.grpcSrv) // as upstream's daemon: grpcurl and friends work
		s.serve("grpc", func() error {
			if err := s.grpcSrv.Serve(grpcLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				return err
			}
			return nil
		})
	}
	if restLis != nil {
		s.rest = server.NewRESTServer(root, cfg.MetadataEnvPrefix, logr.FromSlogHandler(cfg.Logger.Handler()))
		s.httpSrv = &http.Server{
			Handler:           s.rest.Handler(),
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       idleTimeout,
		}
		s.serve("rest", func() error {
			if err := s.httpSrv.Serve(restLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.done:
		}
	}()
	cfg.Logger.Info("sandboxd listening", "grpc", s.grpcAddr, "rest", s.restAddr, "root", root)
	return s, nil
}

func (s *Server) serve(name string, fn func() error) {
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		if err := fn(); err != nil {
			s.cfg.Logger.Error("sandboxd serve failed", "api", name, "err", err)
			s.errMu.Lock()
			if s.serveErr == nil {
				s.serveErr = fmt.Errorf("sandboxd %s: %w", name, err)
			}
			s.errMu.Unlock()
		}
	}()
}

// GRPCAddr is where ProcessService listens ("127.0.0.1:PORT" or
// "unix:/path"), empty when gRPC is off.
func (s *Server) GRPCAddr() string { return s.grpcAddr }

// RESTAddr is where the REST API listens, empty when REST is off.
func (s *Server) RESTAddr() string { return s.restAddr }

// Done is closed once Close (or ctx's end) has finished shutting down.
func (s *Server) Done() <-chan struct{} { return s.done }

// Close shuts down: /v1/health turns 503, running commands get SIGTERM and
// then SIGKILL (their Start streams end with their exit), in-flight requests
// finish, and the listeners close; whatever is still open when
// Config.ShutdownTimeout passes is cut. It returns the first serve error,
// if any. Calling it again returns the same.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		defer close(s.done)
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		if s.rest != nil {
			s.rest.SetReady(false)
		}
		grace, cancelGrace := context.WithTimeout(ctx, processGrace)
		s.procs.stopAll(ctx, grace)
		cancelGrace()

		var wg sync.WaitGroup
		if s.httpSrv != nil {
			wg.Go(func() {
				if err := s.httpSrv.Shutdown(ctx); err != nil {
					_ = s.httpSrv.Close()
				}
			})
		}
		if s.grpcSrv != nil {
			wg.Go(func() {
				stopped := make(chan struct{})
				go func() {
					s.grpcSrv.GracefulStop()
					close(stopped)
				}()
				select {
				case <-stopped:
				case <-ctx.Done():
					s.grpcSrv.Stop()
					<-stopped
				}
			})
		}
		wg.Wait()
		s.serving.Wait()
		s.errMu.Lock()
		s.closeErr = s.serveErr
		s.errMu.Unlock()
	})
	return s.closeErr
}
