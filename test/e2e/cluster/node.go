package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeName is the name the kubelet registers its Node under.
const NodeName = "e2e-node"

// CgroupRoot is the cgroup (in every v1 hierarchy) the kubelet puts all
// pods under. It must exist before the kubelet starts; test/e2e/run.sh
// creates it and removes it again, which a fixed name makes possible even
// after a run that was killed.
const CgroupRoot = "/go-runtime-sandbox-e2e"

// PodCIDR is the range the CNI bridge hands pod IPs out of.
const PodCIDR = "10.88.0.0/24"

// Image is a container image tar (docker-archive) the node imports.
type Image struct {
	Name string // short role: pause, router, runtime
	Tar  string
	Ref  string // fully qualified reference, e.g. docker.io/library/go-runtime-sandbox:dev
	// BuildSeconds is how long building it took (when it was built, maybe
	// in an earlier run), SizeMB its size as the builder reports it.
	BuildSeconds int
	SizeMB       int
}

// ParseImages reads the lines test/e2e/build-images.sh prints:
// NAME TAR REF BUILD_SECONDS SIZE_MB.
func ParseImages(text string) ([]Image, error) {
	var imgs []Image
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 5 {
			return nil, fmt.Errorf("image line %q: want NAME TAR REF BUILD_SECONDS SIZE_MB", strings.TrimSpace(line))
		}
		secs, err1 := strconv.Atoi(f[3])
		mb, err2 := strconv.Atoi(f[4])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("image line %q: build seconds and size must be integers", strings.TrimSpace(line))
		}
		imgs = append(imgs, Image{Name: f[0], Tar: f[1], Ref: f[2], BuildSeconds: secs, SizeMB: mb})
	}
	return imgs, nil
}

// node is the containerd + kubelet half of a cluster.
type node struct {
	dir    string // <cluster dir>/node
	sock   string // containerd's CRI socket
	nodeIP string
}

// containerdConfig renders containerd's config (version 3): every path under
// dir, CRI with runc (default) and runsc handlers, the CNI config in dir,
// the locally built pause image pinned as the sandbox image, and
// restrict_oom_score_adj, without which runc fails on hosts that do not
// let root lower oom_score_adj ("can't get final child's PID from pipe").
func (n *node) containerdConfig(b Binaries, pause string) string {
	d := filepath.Join(n.dir, "containerd")
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  address = %[5]q
  level = "info"

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = %[6]q
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %[7]q
  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    enable_selinux = false
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %[8]q
          SystemdCgroup = false
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]
        runtime_type = "io.containerd.runsc.v1"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc.options]
          TypeUrl = "io.containerd.runsc.v1.options"
          ConfigPath = %[9]q
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%[10]q]
      conf_dir = %[11]q
`, filepath.Join(d, "root"), filepath.Join(d, "state"), n.sock, n.sock+".ttrpc",
		filepath.Join(d, "debug.sock"), filepath.Join(d, "opt"), pause, b.Runc,
		filepath.Join(d, "runsc.toml"), b.CNIBinDir, filepath.Join(n.dir, "cni", "net.d"))
}

// runscConfig is gVisor's shim config: systrap (no KVM needed), runsc's
// state and logs under dir.
func (n *node) runscConfig(b Binaries, logDir string) string {
	return fmt.Sprintf(`binary_name = %q
root = %q
[runsc_config]
  platform = "systrap"
  debug-log = %q
`, b.Runsc, filepath.Join(n.dir, "runsc"), filepath.Join(logDir, "runsc")+"/")
}

// cniConfig is one bridge network: pods get an address from PodCIDR on the
// cni0 bridge, the host side is its gateway. The bridge plugin enforces no
// NetworkPolicy.
func (n *node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, PodCIDR, filepath.Join(n.dir, "cni", "ipam"))
}

// kubeletConfig renders the KubeletConfiguration: cgroupfs under
// CgroupRoot (this VM is cgroup v1, which kubelet 1.37 runs only with
// failCgroupV1 off), anonymous auth with AlwaysAllow (the API server is
// the only client), every directory under dir, and eviction and image GC
// thresholds low enough that a busy shared disk never evicts test pods.
func (n *node) kubeletConfig(port, healthz int) string {
	d := filepath.Join(n.dir, "kubelet")
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
cgroupDriver: cgroupfs
cgroupRoot: %[4]s
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%[5]s
imageServiceEndpoint: unix://%[5]s
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
podLogsDir: %[6]s
volumePluginDir: %[7]s
resolvConf: %[8]s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
maxPods: 110
`, n.nodeIP, port, healthz, CgroupRoot, n.sock,
		filepath.Join(d, "pod-logs"), filepath.Join(d, "volume-plugins"), filepath.Join(d, "resolv.conf"))
}

// startNode brings up containerd, imports the images, then the kubelet, and
// waits until the Node is Ready.
func (c *Cluster) startNode(ctx context.Context) error {
	b := c.cfg.Binaries
	n := &node{dir: filepath.Join(c.Dir, "node"), nodeIP: c.cfg.NodeIP}
	n.sock = filepath.Join(n.dir, "containerd", "containerd.sock")
	if net.ParseIP(n.nodeIP) == nil || net.ParseIP(n.nodeIP).IsLoopback() {
		return fmt.Errorf("node IP %q: the kubelet needs a non-loopback address (test/e2e/run.sh creates one inside the e2e network namespace)", n.nodeIP)
	}
	var pause string
	for _, img := range c.cfg.Images {
		if img.Name == "pause" {
			pause = img.Ref
		}
	}
	if pause == "" {
		return fmt.Errorf("no pause image among %d images (test/e2e/build-images.sh builds it)", len(c.cfg.Images))
	}
	logDir := filepath.Join(c.Dir, "logs")
	for _, d := range []string{"containerd", "cni/net.d", "cni/ipam", "runsc", "kubelet/pod-logs", "kubelet/volume-plugins", "kubelet/root", "kubelet/pki"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return fmt.Errorf("node dirs: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(logDir, "runsc"), 0o755); err != nil {
		return fmt.Errorf("node dirs: %w", err)
	}
	files := map[string]string{
		"containerd/config.toml":    n.containerdConfig(b, pause),
		"containerd/runsc.toml":     n.runscConfig(b, logDir),
		"cni/net.d/10-e2e.conflist": n.cniConfig(),
		"kubelet/resolv.conf":       "nameserver " + n.nodeIP + "\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}

	t := time.Now()
	// Shims and runsc are looked up on PATH, next to containerd.
	env := []string{"PATH=" + b.NodeDir + ":" + filepath.Dir(b.Runc) + ":" + os.Getenv("PATH")}
	ctrd, err := c.runEnv("containerd", b.Containerd, env, "--config="+filepath.Join(n.dir, "containerd", "config.toml"))
	if err != nil {
		return err
	}
	if err := waitFor(ctx, ctrd, 30*time.Second, "containerd socket "+n.sock, func() error {
		_, err := c.ctr(ctx, n, "version")
		return err
	}); err != nil {
		return err
	}
	c.step("containerd", t)

	t = time.Now()
	for _, img := range c.cfg.Images {
		if out, err := c.ctr(ctx, n, "-n", "k8s.io", "images", "import", img.Tar); err != nil {
			return fmt.Errorf("import %s image %s: %w\n%s", img.Name, img.Tar, err, out)
		}
	}
	c.step("image import", t)

	t = time.Now()
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(n.dir, "kubelet", "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(n.kubeletConfig(ports[0], ports[1])), 0o644); err != nil {
		return fmt.Errorf("write kubelet config: %w", err)
	}
	kubelet, err := c.runEnv("kubelet", b.Kubelet, env,
		"--config="+cfgPath, "--kubeconfig="+c.Kubeconfig,
		"--root-dir="+filepath.Join(n.dir, "kubelet", "root"),
		"--cert-dir="+filepath.Join(n.dir, "kubelet", "pki"),
		"--hostname-override="+NodeName, "--node-ip="+n.nodeIP, "--v=2")
	if err != nil {
		return err
	}
	if err := waitFor(ctx, kubelet, 90*time.Second, "node "+NodeName+" Ready and untainted", func() error {
		nd, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range nd.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
				return fmt.Errorf("condition Ready=%s: %s", cond.Status, cond.Message)
			}
		}
		for _, taint := range nd.Spec.Taints {
			return fmt.Errorf("still tainted %s:%s", taint.Key, taint.Effect)
		}
		if len(nd.Status.Conditions) == 0 {
			return fmt.Errorf("no status yet")
		}
		c.NodeInfo = nd.Status.NodeInfo
		return nil
	}); err != nil {
		return err
	}
	c.step("kubelet", t)
	c.node = n
	return nil
}

// ctr runs containerd's ctr against the node's containerd.
func (c *Cluster) ctr(ctx context.Context, n *node, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.cfg.Binaries.Ctr, append([]string{"--address=" + n.sock}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// waitFor polls check every 200 ms until it returns nil, comp exits, ctx
// ends or timeout passes; the error names what was awaited and the last
// reason check gave.
func waitFor(ctx context.Context, comp *component, timeout time.Duration, what string, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		last := check()
		if last == nil {
			return nil
		}
		select {
		case <-comp.exited:
			return comp.failure(fmt.Errorf("waiting for %s: %w", what, last))
		case <-ctx.Done():
			return comp.failure(fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return comp.failure(fmt.Errorf("%s not reached after %s: %w", what, timeout, last))
		}
	}
}
