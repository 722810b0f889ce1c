package cluster

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
)

// Binaries names the executables a Cluster runs.
type Binaries struct {
	Etcd string // Debian's etcd-server (scripts/install-deps.sh)

	// From k8s.io/kubernetes and agent-sandbox, built by test/e2e/build-tools.sh.
	KubeAPIServer         string
	KubeControllerManager string
	KubeScheduler         string
	Kubelet               string
	Kubectl               string
	Controller            string // agent-sandbox-controller

	// From test/e2e/build-node.sh: containerd, ctr and the runc and runsc
	// shims, and runsc itself, all in NodeDir.
	NodeDir    string
	Containerd string
	Ctr        string
	Runsc      string

	Runc      string // Debian's runc (scripts/install-deps.sh)
	CNIBinDir string // Debian's containernetworking-plugins: bridge, host-local, loopback, portmap
}

// DefaultCNIBinDir is where Debian's containernetworking-plugins installs.
const DefaultCNIBinDir = "/usr/lib/cni"

// BinariesFromEnv finds the binaries the way test/e2e/run.sh hands them
// over: E2E_TOOLS_DIR holds the Kubernetes and agent-sandbox tools,
// E2E_NODE_DIR the container runtime; etcd and runc are looked up on PATH
// (or E2E_ETCD, E2E_RUNC) and the CNI plugins in E2E_CNI_BIN_DIR (default
// DefaultCNIBinDir). The error says which script provides what is missing.
func BinariesFromEnv(getenv func(string) string) (Binaries, error) {
	b := Binaries{
		Etcd:      getenv("E2E_ETCD"),
		Runc:      getenv("E2E_RUNC"),
		CNIBinDir: getenv("E2E_CNI_BIN_DIR"),
		NodeDir:   getenv("E2E_NODE_DIR"),
	}
	if b.Etcd == "" {
		b.Etcd, _ = exec.LookPath("etcd")
	}
	if b.Runc == "" {
		b.Runc, _ = exec.LookPath("runc")
	}
	if b.CNIBinDir == "" {
		b.CNIBinDir = DefaultCNIBinDir
	}
	var errs []error
	for what, p := range map[string]string{"etcd (Debian package etcd-server)": b.Etcd, "runc (Debian package runc)": b.Runc, "CNI bridge plugin (Debian package containernetworking-plugins)": filepath.Join(b.CNIBinDir, "bridge")} {
		if err := lookBinary(what, p); err != nil {
			errs = append(errs, fmt.Errorf("%w (install it with scripts/install-deps.sh)", err))
		}
	}

	tools := getenv("E2E_TOOLS_DIR")
	if tools == "" {
		errs = append(errs, errors.New("E2E_TOOLS_DIR is not set: run the e2e tests through test/e2e/run.sh, which builds the Kubernetes and agent-sandbox binaries (test/e2e/build-tools.sh)"))
	} else {
		b.KubeAPIServer = filepath.Join(tools, "kube-apiserver")
		b.KubeControllerManager = filepath.Join(tools, "kube-controller-manager")
		b.KubeScheduler = filepath.Join(tools, "kube-scheduler")
		b.Kubelet = filepath.Join(tools, "kubelet")
		b.Kubectl = filepath.Join(tools, "kubectl")
		b.Controller = filepath.Join(tools, "agent-sandbox-controller")
		for _, p := range []string{b.KubeAPIServer, b.KubeControllerManager, b.KubeScheduler, b.Kubelet, b.Kubectl, b.Controller} {
			if err := lookBinary(filepath.Base(p), p); err != nil {
				errs = append(errs, fmt.Errorf("%w (build it with test/e2e/build-tools.sh)", err))
			}
		}
	}
	if b.NodeDir == "" {
		errs = append(errs, errors.New("E2E_NODE_DIR is not set: run the e2e tests through test/e2e/run.sh, which builds containerd and gVisor (test/e2e/build-node.sh)"))
	} else {
		b.Containerd = filepath.Join(b.NodeDir, "containerd")
		b.Ctr = filepath.Join(b.NodeDir, "ctr")
		b.Runsc = filepath.Join(b.NodeDir, "runsc")
		for _, name := range []string{"containerd", "ctr", "containerd-shim-runc-v2", "runsc", "containerd-shim-runsc-v1"} {
			if err := lookBinary(name, filepath.Join(b.NodeDir, name)); err != nil {
				errs = append(errs, fmt.Errorf("%w (build it with test/e2e/build-node.sh)", err))
			}
		}
	}
	return b, errors.Join(errs...)
}
