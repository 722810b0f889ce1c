// Command e2e-cluster brings up the e2e's one-node Kubernetes cluster
// (test/e2e/cluster) for use by hand and keeps it up until it gets SIGTERM
// or SIGINT: what `make cluster` runs (test/e2e/cluster.sh, which builds
// everything, takes the e2e lock and starts this inside the namespaces
// test/e2e/netns.sh sets up). On top of the bare cluster it applies
// manifests/router and manifests/base to one namespace, unchanged, waits
// for the router and a full warm pool, and makes the API server reachable
// from the host: a listener on the host's loopback (opened in the host's
// network namespace, handed over as a file descriptor) forwarded to the API
// server inside, and a kubeconfig that names it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/cliflags"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/test/e2e/cluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

// config is what run needs; registerFlags defaults each field from the
// environment test/e2e/run.sh and cluster.sh export (E2E_*), as the e2e
// test binary reads it.
type config struct {
	Dir        string // the cluster's work directory (logs, node state)
	Repo       string // the repository: manifests/ is applied from it
	CRDDir     string
	NodeIP     string
	Images     string // build-images.sh's lines
	Namespace  string
	HostNetFD  int    // an open /proc/<pid>/ns/net of the host (-1: none)
	Listen     string // address of the API server's forward, in the host's network namespace
	Kubeconfig string // where the kubeconfig for the host's side goes
	ReadyFile  string // written once everything is up
	Timeout    time.Duration
}

func defaults() config {
	return config{
		Namespace: agentsandbox.DefaultNamespace,
		HostNetFD: -1,
		Listen:    "127.0.0.1:0",
		Timeout:   10 * time.Minute,
	}
}

func registerFlags(fs *flag.FlagSet, c *config, lookupEnv func(string) (string, bool)) {
	env := func(k, def string) string {
		if v, ok := lookupEnv(k); ok {
			return v
		}
		return def
	}
	fs.StringVar(&c.Dir, "dir", env("E2E_WORK_DIR", c.Dir), "the cluster's work directory: logs, certificates, containerd's and the kubelet's state (must exist; $E2E_WORK_DIR)")
	fs.StringVar(&c.Repo, "repo", env("E2E_REPO", c.Repo), "the repository whose manifests/router and manifests/base are applied ($E2E_REPO)")
	fs.StringVar(&c.CRDDir, "crds", env("E2E_CRD_DIR", c.CRDDir), "agent-sandbox's CRD manifests, k8s/crds of the module ($E2E_CRD_DIR)")
	fs.StringVar(&c.NodeIP, "node-ip", env("E2E_NODE_IP", c.NodeIP), "the kubelet's address, not loopback (netns.sh puts it on a veth; $E2E_NODE_IP)")
	fs.StringVar(&c.Images, "images", env("E2E_IMAGES", c.Images), "the image tars to import, build-images.sh's output lines ($E2E_IMAGES)")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "namespace the router and the warm pool go to (the backend's default)")
	fs.IntVar(&c.HostNetFD, "host-netns-fd", c.HostNetFD, "an open file descriptor of the host's network namespace (/proc/self/ns/net opened before unshare): the API server's forward listens there; -1: no forward, the kubeconfig works inside the namespaces only")
	fs.StringVar(&c.Listen, "listen", c.Listen, "address of the API server's forward in the host's network namespace (port 0: any free port)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig-out", c.Kubeconfig, "write the kubeconfig for the host's side here (the forward's address, the API server's certificate, an admin token; mode 0600)")
	fs.StringVar(&c.ReadyFile, "ready-file", c.ReadyFile, "write this file (the kubeconfig's path) once the router and the warm pool are ready")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "give up when bring-up takes longer")
}

func (c config) validate() error {
	var errs []error
	for _, f := range []struct{ name, env, v string }{
		{"--dir", "E2E_WORK_DIR", c.Dir}, {"--repo", "E2E_REPO", c.Repo}, {"--crds", "E2E_CRD_DIR", c.CRDDir},
		{"--node-ip", "E2E_NODE_IP", c.NodeIP}, {"--images", "E2E_IMAGES", c.Images},
		{"--kubeconfig-out", "", c.Kubeconfig}, {"--ready-file", "", c.ReadyFile},
	} {
		if f.v == "" {
			how := "set it"
			if f.env != "" {
				how = "set it or $" + f.env
			}
			errs = append(errs, fmt.Errorf("%s is empty: %s (test/e2e/cluster.sh, which make cluster runs, sets them all)", f.name, how))
		}
	}
	if c.Repo != "" {
		if _, err := os.Stat(filepath.Join(c.Repo, "manifests", "base", "kustomization.yaml")); err != nil {
			errs = append(errs, fmt.Errorf("--repo=%s: no manifests/base: %w", c.Repo, err))
		}
	}
	if c.Namespace == "" {
		errs = append(errs, errors.New("--namespace is empty"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout=%v: must be positive", c.Timeout))
	}
	return errors.Join(errs...)
}

const usage = `usage: e2e-cluster [flags]

Brings up the e2e's one-node Kubernetes cluster (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, containerd with runc and gVisor,
a kubelet, the agent-sandbox controller), applies manifests/router and
manifests/base to --namespace, and keeps it all running until SIGTERM or
SIGINT, then stops it. Not meant to be run by hand: make cluster runs it
(test/e2e/cluster.sh) inside the namespaces it needs, and
make cluster-down ends it (docs/e2e.md, "make cluster").

Exits 0 after a clean stop, 1 when bring-up failed (the message says what
and where the logs are), 2 for bad flags.

flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("e2e-cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	cfg := defaults()
	registerFlags(fs, &cfg, lookupEnv)
	if code, ok := cliflags.ParseFlagsOnly(fs, args); !ok {
		return code
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "e2e-cluster: %v\n", err)
		return cliflags.ExitUsage
	}
	getenv := func(k string) string { v, _ := lookupEnv(k); return v }
	bins, err := cluster.BinariesFromEnv(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "e2e-cluster: missing binaries:\n%v\n", err)
		return cliflags.ExitUsage
	}
	imgs, err := cluster.ParseImages(cfg.Images)
	if err != nil || len(imgs) == 0 {
		fmt.Fprintf(stderr, "e2e-cluster: --images (build-images.sh's output): %d images, %v\n", len(imgs), err)
		return cliflags.ExitUsage
	}
	if err := up(ctx, cfg, bins, imgs, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "e2e-cluster: %v\n(logs in %s)\n", err, filepath.Join(cfg.Dir, "logs"))
		return 1
	}
	return 0
}

// up brings the cluster up, serves until ctx ends, then stops it.
func up(ctx context.Context, cfg config, bins cluster.Binaries, imgs []cluster.Image, stdout, stderr io.Writer) error {
	say := func(format string, args ...any) { fmt.Fprintf(stdout, "cluster: "+format+"\n", args...) }
	// The host's side first: a descriptor this process holds is one every
	// component it starts would inherit.
	var fwd *forwarder
	if cfg.HostNetFD >= 0 {
		l, err := listenInNetns(cfg.HostNetFD, cfg.Listen)
		if err != nil {
			return err
		}
		fwd = &forwarder{l: l}
		defer fwd.Close()
	}

	bringUp, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start := time.Now()
	say("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd (importing %d images), the kubelet and the agent-sandbox controller", len(imgs))
	log := slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := cluster.Start(bringUp, cluster.Config{
		Binaries: bins,
		Dir:      cfg.Dir,
		CRDDir:   cfg.CRDDir,
		NodeIP:   cfg.NodeIP,
		Images:   imgs,
		PIDFile:  filepath.Join(cfg.Dir, "pids"),
		Logger:   log,
	})
	if err != nil {
		return fmt.Errorf("cluster did not come up: %w", err)
	}
	defer func() {
		say("stopping: deleting the pods, then the components")
		c.Stop()
		say("stopped")
	}()
	var steps []string
	for _, s := range c.Steps {
		steps = append(steps, fmt.Sprintf("%s %s", s.Name, s.Duration.Round(10*time.Millisecond)))
	}
	say("control plane and node up in %s (%s)", time.Since(start).Round(100*time.Millisecond), strings.Join(steps, ", "))

	t := time.Now()
	say("applying manifests/router and manifests/base to namespace %s (server-side, unchanged)", cfg.Namespace)
	if err := c.EnsureNamespace(bringUp, cfg.Namespace); err != nil {
		return err
	}
	for _, k := range []string{"router", "base"} {
		if err := c.ApplyKustomization(bringUp, cfg.Namespace, filepath.Join(cfg.Repo, "manifests", k), false); err != nil {
			return err
		}
	}
	say("waiting for the sandbox-router pod and a full warm pool %s (each pod's init container copies the seed build cache first)", agentsandbox.DefaultWarmPool)
	routerIP, err := c.WaitRouter(bringUp, cfg.Namespace)
	if err != nil {
		return err
	}
	n, err := c.WaitWarmPool(bringUp, cfg.Namespace, agentsandbox.DefaultWarmPool, 0)
	if err != nil {
		return err
	}
	say("router at %s:8080 (pod IP, inside the cluster's network), warm pool %d/%d ready, in %s", routerIP, n, n, time.Since(t).Round(100*time.Millisecond))

	kubeconfig := c.Kubeconfig
	if fwd != nil {
		go fwd.Serve(c.REST.Host, stderr)
		if err := writeHostKubeconfig(c, cfg.Kubeconfig, "https://"+fwd.l.Addr().String(), cfg.NodeIP); err != nil {
			return err
		}
		kubeconfig = cfg.Kubeconfig
		say("API server forwarded to the host at https://%s", fwd.l.Addr())
	}
	if err := os.WriteFile(cfg.ReadyFile, []byte(kubeconfig+"\n"), 0o644); err != nil {
		return fmt.Errorf("write ready file: %w", err)
	}
	say("up in %s; kubeconfig %s", time.Since(start).Round(100*time.Millisecond), kubeconfig)
	<-ctx.Done()
	return nil
}
