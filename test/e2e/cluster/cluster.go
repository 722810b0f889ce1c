// Package cluster brings up a real one-node Kubernetes cluster on this
// machine without Docker or a registry, for the end-to-end tests: etcd,
// kube-apiserver, kube-controller-manager (garbage collector, node
// lifecycle, deployments), kube-scheduler, containerd with runc and gVisor's
// runsc, a kubelet, and the agent-sandbox controller (with extensions), all
// as child processes. Images come from docker-archive tars (see
// test/e2e/build-images.sh) imported into containerd.
//
// It expects to run inside its own network and mount namespaces
// (test/e2e/run.sh puts it there): the control plane listens on 127.0.0.1,
// the kubelet on Config.NodeIP, and pods get addresses from PodCIDR on a
// CNI bridge.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config configures Start.
type Config struct {
	Binaries Binaries
	// Dir receives logs (Dir/logs), certificates, the kubeconfig and pod
	// directories. It must exist.
	Dir string
	// CRDDir holds agent-sandbox's CRD manifests (k8s/crds of the module).
	CRDDir string
	// NodeIP is the kubelet's address: not loopback, reachable from the
	// API server (netns.sh puts it on a veth in the run's netns).
	NodeIP string
	// Images are imported into containerd before the kubelet starts; one
	// must be named "pause" (the pod sandbox image).
	Images []Image
	// PIDFile, when set, collects the PIDs of started processes so a
	// wrapper can kill them if the test binary dies.
	PIDFile string
	Logger  *slog.Logger
	// ControllerArgs are extra flags for agent-sandbox-controller (e.g.
	// --sandbox-warm-pool-replenish-delay=2s).
	ControllerArgs []string
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
	// InClusterAPI is the API server's address as pods reach it
	// (NodeIP:port), and ServingCA the file that verifies its serving
	// certificate there: what a pod's in-cluster config needs (no
	// kube-proxy here makes the kubernetes Service's cluster IP route).
	InClusterAPI string
	ServingCA    string
	REST         *rest.Config
	Client       kubernetes.Interface
	Dynamic      dynamic.Interface
	// NodeInfo is what the kubelet reported about itself once Ready.
	NodeInfo corev1.NodeSystemInfo
	// Steps records bring-up timing.
	Steps []Step

	cfg     Config
	comps   []*component
	node    *node
	etcdDir string
}

// Start brings the cluster up and returns once every part is ready: etcd
// healthy, kube-apiserver /readyz ok, agent-sandbox's CRDs applied and
// Established, kube-controller-manager and kube-scheduler healthy,
// containerd serving with the images imported, the Node Ready without
// taints, the RuntimeClass gvisor created, and the agent-sandbox controller
// /readyz ok. On error, everything started so far is stopped again.
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
	kcmPort, schedPort := ports[5], ports[6]

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
		// Every address of the run's network namespace, so pods reach it
		// at the node's IP (the self-signed serving certificate names the
		// advertise address).
		"--bind-address=0.0.0.0", "--advertise-address="+c.cfg.NodeIP, "--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+filepath.Join(pki, "serving"),
		"--service-account-key-file="+saKey, "--service-account-signing-key-file="+saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		// RBAC, so a pod's service account holds only its Role (the
		// components and the tests use e2e-admin, in system:masters).
		"--token-auth-file="+tokenFile, "--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		// The node's name resolves nowhere (no DNS in the run's netns):
		// port-forward, exec and logs dial the kubelet at its InternalIP.
		"--kubelet-preferred-address-types=InternalIP",
		// Pods need no service account objects (none mounts a token).
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

	c.InClusterAPI = net.JoinHostPort(c.cfg.NodeIP, strconv.Itoa(apiPort))
	c.ServingCA = filepath.Join(pki, "serving", "apiserver.crt")
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

	// kube-controller-manager: the garbage collector (claim -> sandbox ->
	// pod cascades), node lifecycle (lifts the not-ready taint), and
	// deployments for the router.
	t = time.Now()
	kcm, err := c.run("kube-controller-manager", b.KubeControllerManager,
		"--kubeconfig="+c.Kubeconfig,
		"--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(kcmPort),
		"--leader-elect=false", "--use-service-account-credentials=false",
		"--service-account-private-key-file="+saKey,
		"--v=1")
	if err != nil {
		return err
	}
	if err := kcm.waitHTTP(ctx, "https://127.0.0.1:"+strconv.Itoa(kcmPort)+"/healthz", token, 60*time.Second); err != nil {
		return err
	}
	c.step("kube-controller-manager", t)

	t = time.Now()
	sched, err := c.run("kube-scheduler", b.KubeScheduler,
		"--kubeconfig="+c.Kubeconfig,
		"--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedPort),
		"--leader-elect=false", "--v=1")
	if err != nil {
		return err
	}
	if err := sched.waitHTTP(ctx, "https://127.0.0.1:"+strconv.Itoa(schedPort)+"/healthz", token, 60*time.Second); err != nil {
		return err
	}
	c.step("kube-scheduler", t)

	if err := c.startNode(ctx); err != nil {
		return err
	}

	// gVisor's handler, as GKE and the gVisor docs name it.
	t = time.Now()
	if _, err := c.Client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gvisor"},
		Handler:    "runsc",
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create RuntimeClass gvisor: %w", err)
	}

	ctrl, err := c.run("agent-sandbox-controller", b.Controller, append([]string{
		"--kubeconfig=" + c.Kubeconfig, "--extensions", "--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ctrlMetrics),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ctrlProbe)}, c.cfg.ControllerArgs...)...)
	if err != nil {
		return err
	}
	if err := ctrl.waitHTTP(ctx, "http://127.0.0.1:"+strconv.Itoa(ctrlProbe)+"/readyz", "", 60*time.Second); err != nil {
		return err
	}
	c.step("agent-sandbox-controller", t)
	return nil
}

func (c *Cluster) run(name, bin string, args ...string) (*component, error) {
	return c.runEnv(name, bin, nil, args...)
}

func (c *Cluster) runEnv(name, bin string, env []string, args ...string) (*component, error) {
	comp, err := startComponent(name, bin, args, env, filepath.Join(c.Dir, "logs"), c.cfg.PIDFile)
	if err != nil {
		return nil, err
	}
	c.comps = append(c.comps, comp)
	return comp, nil
}

// Stop deletes every pod still on the node (so the kubelet tears their
// containers down), then stops the components in reverse start order and
// removes etcd's data. What the components leave outside the work
// directory (mounts, cgroups, network) is run.sh's to clean up: they live in
// its namespaces and under CgroupRoot.
func (c *Cluster) Stop() {
	if c.node != nil && c.Client != nil {
		// First what would recreate pods: the agent-sandbox controller
		// (sandboxes), the controller manager (the router's ReplicaSet).
		for _, comp := range c.comps {
			if comp.name == "agent-sandbox-controller" || comp.name == "kube-controller-manager" {
				comp.stop(10 * time.Second)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c.drainPods(ctx)
		cancel()
		c.node = nil
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

// drainPods deletes every pod at once, with a one-second grace, and waits
// until the kubelet has reported them gone (or ctx ends).
func (c *Cluster) drainPods(ctx context.Context) {
	grace := int64(1)
	nss, err := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, ns := range nss.Items {
		_ = c.Client.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
	}
	for ctx.Err() == nil {
		pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
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
