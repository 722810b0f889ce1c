package cluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/test/e2e/processnode"
)

// Binaries names the executables a Cluster runs.
type Binaries struct {
	Etcd          string // Debian's etcd-server (scripts/install-deps.sh)
	KubeAPIServer string // built by test/e2e/build-tools.sh
	Kubectl       string // built by test/e2e/build-tools.sh
	Controller    string // agent-sandbox-controller, built by test/e2e/build-tools.sh
	Router        string // sandbox-router, built by test/e2e/build-tools.sh
	SandboxServer string // cmd/sandbox-server of this repo
}

// BinariesFromEnv finds the binaries the way test/e2e/run.sh hands them
// over: E2E_TOOLS_DIR holds the control-plane tools, E2E_SANDBOX_SERVER is
// the runtime server, and etcd is looked up on PATH (or E2E_ETCD). The
// error says which script provides what is missing.
func BinariesFromEnv(getenv func(string) string) (Binaries, error) {
	tools := getenv("E2E_TOOLS_DIR")
	b := Binaries{
		Etcd:          getenv("E2E_ETCD"),
		SandboxServer: getenv("E2E_SANDBOX_SERVER"),
	}
	if tools != "" {
		b.KubeAPIServer = filepath.Join(tools, "kube-apiserver")
		b.Kubectl = filepath.Join(tools, "kubectl")
		b.Controller = filepath.Join(tools, "agent-sandbox-controller")
		b.Router = filepath.Join(tools, "sandbox-router")
	}
	if b.Etcd == "" {
		if p, err := exec.LookPath("etcd"); err == nil {
			b.Etcd = p
		}
	}
	var errs []error
	if err := lookBinary("etcd", b.Etcd); err != nil {
		errs = append(errs, fmt.Errorf("%w (install it with scripts/install-deps.sh: Debian package etcd-server)", err))
	}
	if tools == "" {
		errs = append(errs, errors.New("E2E_TOOLS_DIR is not set: run the e2e tests through test/e2e/run.sh, which builds kube-apiserver, kubectl, agent-sandbox-controller and sandbox-router (test/e2e/build-tools.sh)"))
	} else {
		for what, p := range map[string]string{"kube-apiserver": b.KubeAPIServer, "kubectl": b.Kubectl, "agent-sandbox-controller": b.Controller, "sandbox-router": b.Router} {
			if err := lookBinary(what, p); err != nil {
				errs = append(errs, fmt.Errorf("%w (build it with test/e2e/build-tools.sh)", err))
			}
		}
	}
	if err := lookBinary("sandbox-server", b.SandboxServer); err != nil {
		errs = append(errs, fmt.Errorf("%w (set E2E_SANDBOX_SERVER to a build of ./cmd/sandbox-server; test/e2e/run.sh does)", err))
	}
	return b, errors.Join(errs...)
}

// Config configures Start.
type Config struct {
	Binaries Binaries
	// Dir receives logs (Dir/logs), certificates, the kubeconfig and pod
	// directories. It must exist.
	Dir string
	// CRDDir holds agent-sandbox's CRD manifests (k8s/crds of the module).
	CRDDir string
	// GoCacheSeed, when set, is copied into each pod's GOCACHE (see
	// EnsureGoCacheSeed).
	GoCacheSeed string
	// PIDFile, when set, collects the PIDs of started processes so a
	// wrapper can kill them if the test binary dies.
	PIDFile string
	Logger  *slog.Logger
}

// Step is one stage of bring-up and how long it took.
type Step struct {
	Name     string
	Duration time.Duration
}

// Cluster is a running control plane. Stop it with Stop.
type Cluster struct {
	Dir        string
	Kubeconfig string
	REST       *rest.Config
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface
	// RouterURL is the sandbox-router's HTTP address (http://127.0.0.1:port).
	RouterURL string
	Node      *processnode.Node
	// Steps records bring-up timing.
	Steps []Step

	cfg      Config
	comps    []*component
	stopNode context.CancelFunc
	nodeDone chan error
	etcdDir  string
}

// Start brings the control plane up and returns once every part is ready:
// etcd healthy, kube-apiserver /readyz ok, agent-sandbox's CRDs applied and
// Established, the controller and router /readyz ok, and the process node
// registered. On error, everything started so far is stopped again.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Cluster{Dir: cfg.Dir, cfg: cfg}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) step(name string, start time.Time) {
	d := time.Since(start)
	c.Steps = append(c.Steps, Step{name, d})
	c.cfg.Logger.Info("cluster step ready", "step", name, "took", d.Round(time.Millisecond))
}

func (c *Cluster) start(ctx context.Context) error {
	b := c.cfg.Binaries
	logDir := filepath.Join(c.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	ports, err := freePorts(9)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	ctrlMetrics, ctrlProbe := ports[3], ports[4]
	routerHTTP, routerMetrics, routerProbe := ports[5], ports[6], ports[7]

	// etcd keeps its data in memory-backed storage when it can: fsync on
	// a shared disk would dominate the API's write latency.
	t := time.Now()
	base := "/dev/shm"
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		base = c.Dir
	}
	// Named after the work directory, so a wrapper can find and remove it
	// after a test binary that died (test/e2e/run.sh does).
	c.etcdDir = filepath.Join(base, "e2e-etcd-"+filepath.Base(c.Dir))
	if err := os.RemoveAll(c.etcdDir); err != nil {
		return fmt.Errorf("etcd data dir: %w", err)
	}
	if err := os.MkdirAll(c.etcdDir, 0o700); err != nil {
		return fmt.Errorf("etcd data dir: %w", err)
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	etcd, err := c.run("etcd", b.Etcd,
		"--name=e2e", "--data-dir="+c.etcdDir,
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL, "--log-level=warn", "--logger=zap")
	if err != nil {
		return err
	}
	if err := etcd.waitHTTP(ctx, etcdURL+"/health", "", 30*time.Second); err != nil {
		return err
	}
	c.step("etcd", t)

	t = time.Now()
	token, err := randomHex(16)
	if err != nil {
		return err
	}
	pki := filepath.Join(c.Dir, "pki")
	saKey := filepath.Join(pki, "sa.key")
	tokenFile := filepath.Join(pki, "tokens.csv")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}
	if err := writeRSAKey(saKey); err != nil {
		return err
	}
	if err := os.WriteFile(tokenFile, []byte(token+",e2e-admin,e2e-admin,system:masters\n"), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	apiURL := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	api, err := c.run("kube-apiserver", b.KubeAPIServer,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+filepath.Join(pki, "serving"),
		"--service-account-key-file="+saKey, "--service-account-signing-key-file="+saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--token-auth-file="+tokenFile, "--authorization-mode=AlwaysAllow",
		"--service-cluster-ip-range=10.96.0.0/16",
		// No controller-manager creates service accounts here.
		"--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false", "--profiling=false",
		"--v=1")
	if err != nil {
		return err
	}
	if err := api.waitHTTP(ctx, apiURL+"/readyz", token, 120*time.Second); err != nil {
		return err
	}
	c.step("kube-apiserver", t)

	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, apiURL, token); err != nil {
		return err
	}
	if c.REST, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	c.REST.QPS, c.REST.Burst = 200, 400
	if c.Client, err = kubernetes.NewForConfig(c.REST); err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(c.REST); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}

	// The controller watches agent-sandbox's kinds from its first moment,
	// so the CRDs go in first, by server-side apply, unchanged.
	t = time.Now()
	if out, err := c.Kubectl(ctx, "apply", "--server-side", "--field-manager=e2e", "-f", c.cfg.CRDDir); err != nil {
		return fmt.Errorf("apply agent-sandbox CRDs from %s: %w\n%s", c.cfg.CRDDir, err, out)
	}
	if out, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "-f", c.cfg.CRDDir); err != nil {
		return fmt.Errorf("wait for agent-sandbox CRDs: %w\n%s", err, out)
	}
	c.step("crds", t)

	t = time.Now()
	ctrl, err := c.run("agent-sandbox-controller", b.Controller,
		"--kubeconfig="+c.Kubeconfig, "--extensions",
		"--enable-webhook=false", "--manage-webhook-certs=false", "--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ctrlMetrics),
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(ctrlProbe))
	if err != nil {
		return err
	}
	if err := ctrl.waitHTTP(ctx, "http://127.0.0.1:"+strconv.Itoa(ctrlProbe)+"/readyz", "", 60*time.Second); err != nil {
		return err
	}
	c.step("agent-sandbox-controller", t)

	t = time.Now()
	router, err := c.run("sandbox-router", b.Router,
		"--kubeconfig="+c.Kubeconfig, "--cache-enabled", "--allow-loopback-pod-ip",
		"--http-bind-address=127.0.0.1:"+strconv.Itoa(routerHTTP),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(routerMetrics),
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(routerProbe))
	if err != nil {
		return err
	}
	if err := router.waitHTTP(ctx, "http://127.0.0.1:"+strconv.Itoa(routerProbe)+"/readyz", "", 60*time.Second); err != nil {
		return err
	}
	c.RouterURL = "http://127.0.0.1:" + strconv.Itoa(routerHTTP)
	c.step("sandbox-router", t)

	t = time.Now()
	nodeLog, err := os.OpenFile(filepath.Join(logDir, "process-node.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("process node log: %w", err)
	}
	node, err := processnode.New(processnode.Config{
		Client: c.Client, Dynamic: c.Dynamic,
		ServerBinary: b.SandboxServer,
		GoCacheSeed:  c.cfg.GoCacheSeed,
		PIDFile:      c.cfg.PIDFile,
		Dir:          filepath.Join(c.Dir, "node"),
		Logger:       slog.New(slog.NewTextHandler(nodeLog, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		_ = nodeLog.Close()
		return err
	}
	nodeCtx, stopNode := context.WithCancel(context.WithoutCancel(ctx))
	c.Node, c.stopNode, c.nodeDone = node, stopNode, make(chan error, 1)
	go func() {
		err := node.Run(nodeCtx)
		_ = nodeLog.Close()
		c.nodeDone <- err
	}()
	if err := c.waitNode(ctx, node.Name()); err != nil {
		return err
	}
	c.step("process-node", t)
	return nil
}

func (c *Cluster) waitNode(ctx context.Context, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-c.nodeDone:
			c.nodeDone <- err
			return fmt.Errorf("process node stopped during start: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil && len(n.Status.Conditions) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process node %s not registered after 30s", name)
		}
	}
}

func (c *Cluster) run(name, bin string, args ...string) (*component, error) {
	comp, err := startComponent(name, bin, args, filepath.Join(c.Dir, "logs"), c.cfg.PIDFile)
	if err != nil {
		return nil, err
	}
	c.comps = append(c.comps, comp)
	return comp, nil
}

// Stop stops the process node (and with it every pod process), then the
// components in reverse start order, and removes etcd's data.
func (c *Cluster) Stop() {
	if c.stopNode != nil {
		c.stopNode()
		if err := <-c.nodeDone; err != nil {
			c.cfg.Logger.Warn("process node", "err", err)
		}
		c.stopNode = nil
	}
	for i := len(c.comps) - 1; i >= 0; i-- {
		c.comps[i].stop(10 * time.Second)
	}
	c.comps = nil
	if c.etcdDir != "" {
		_ = os.RemoveAll(c.etcdDir)
		c.etcdDir = ""
	}
}

// Kubectl runs the pinned kubectl against the cluster and returns its
// combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.cfg.Binaries.Kubectl, append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write service account key: %w", err)
	}
	return nil
}

func writeKubeconfig(path, server, token string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: e2e-admin
  user:
    token: %s
contexts:
- name: e2e
  context:
    cluster: e2e
    user: e2e-admin
    namespace: default
current-context: e2e
`, server, token)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
