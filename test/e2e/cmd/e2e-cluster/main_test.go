package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/test/e2e/cluster"
)

func noEnv(string) (string, bool) { return "", false }

func TestRunRefusesMissingInputsNamingWhatSetsThem(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), nil, io.Discard, &stderr, noEnv)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"--dir is empty", "$E2E_WORK_DIR", "--images is empty", "--kubeconfig-out is empty", "test/e2e/cluster.sh"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestRunRefusesBadFlagsAndArguments(t *testing.T) {
	for _, args := range [][]string{{"--timeout=0s"}, {"--namespace="}, {"extra"}, {"--no-such-flag"}} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, io.Discard, &stderr, noEnv); code != 2 {
			t.Errorf("%q: exit %d, want 2; stderr:\n%s", args, code, stderr.String())
		}
	}
}

func TestRunHelpTeachesWhereItBelongs(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, io.Discard, &stderr, noEnv); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, want := range []string{"make cluster", "make cluster-down", "-host-netns-fd"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestFlagsDefaultFromTheE2EEnvironment(t *testing.T) {
	repo, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"E2E_WORK_DIR": "/w", "E2E_REPO": repo, "E2E_CRD_DIR": "/crds", "E2E_NODE_IP": "10.200.0.1", "E2E_IMAGES": "pause /p.tar ref 1 1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg := defaults()
	fs := flag.NewFlagSet("e2e-cluster", flag.ContinueOnError)
	registerFlags(fs, &cfg, lookup)
	if err := fs.Parse([]string{"--kubeconfig-out=/k", "--ready-file=/r"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if cfg.Dir != "/w" || cfg.Repo != repo || cfg.CRDDir != "/crds" || cfg.NodeIP != "10.200.0.1" || cfg.Images == "" || cfg.Namespace != "default" || cfg.HostNetFD != -1 {
		t.Errorf("config from the environment: %+v", cfg)
	}
	cfg.Repo = t.TempDir()
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "no manifests/base") {
		t.Errorf("a --repo without manifests/base: %v, want an error naming it", err)
	}
}

// TestForwarderCopiesBothWaysAndHalfCloses: what the client writes reaches
// the target, the target's answer comes back, and a client's close of its
// write side reaches the target as EOF (an HTTP/1 client, a port-forward
// stream) rather than hanging.
func TestForwarderCopiesBothWaysAndHalfCloses(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c) // until the client's half close
				_, _ = c.Write(append([]byte("got "), b...))
			}()
		}
	}()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{l: l}
	go f.Serve("https://"+target.Addr().String(), io.Discard)
	defer f.Close()

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read through the forward: %v", err)
	}
	if string(got) != "got hello" {
		t.Fatalf("through the forward: %q, want %q", got, "got hello")
	}

	f.Close()
	if c2, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
		c2.Close()
		t.Error("the forward still accepts after Close")
	}
}

// TestListenInNetnsListensThere enters this process's own network
// namespace through a descriptor, as e2e-cluster enters the host's, and
// checks the listener answers and the descriptor is closed after.
func TestListenInNetnsListensThere(t *testing.T) {
	ns, err := os.Open("/proc/self/ns/net")
	if err != nil {
		t.Skipf("no /proc/self/ns/net: %v", err)
	}
	fd := int(ns.Fd())
	l, err := listenInNetns(fd, "127.0.0.1:0")
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("setns needs CAP_SYS_ADMIN (root): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			_, _ = c.Write([]byte("ok"))
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	if string(b) != "ok" {
		t.Errorf("listener answered %q", b)
	}
	if err := syscall.Close(fd); !errors.Is(err, syscall.EBADF) {
		t.Errorf("descriptor %d still open after listenInNetns (close: %v)", fd, err)
	}
}

func TestListenInNetnsRefusesABadDescriptor(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "not-a-netns")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listenInNetns(int(f.Fd()), "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "host's network namespace") {
		t.Errorf("a regular file as the namespace: %v, want an error naming the namespace", err)
	}
}

// TestHostKubeconfigVerifiesTheServer: the kubeconfig for the host names the
// forward, verifies TLS against the API server's certificate under the
// node's IP instead of skipping it, keeps the token, and is private.
func TestHostKubeconfigVerifiesTheServer(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(in, []byte(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:1234
    insecure-skip-tls-verify: true
users:
- name: e2e-admin
  user:
    token: secret-token
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e-admin, namespace: default}
current-context: e2e
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := writeHostKubeconfig(&cluster.Cluster{Kubeconfig: in, ServingCA: ca}, out, "https://127.0.0.1:5555", "10.200.0.1"); err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cl := kc.Clusters["e2e"]
	if cl == nil || cl.Server != "https://127.0.0.1:5555" || cl.InsecureSkipTLSVerify || cl.TLSServerName != "10.200.0.1" || !bytes.Contains(cl.CertificateAuthorityData, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("cluster entry: %+v", cl)
	}
	if u := kc.AuthInfos["e2e-admin"]; u == nil || u.Token != "secret-token" {
		t.Errorf("user entry lost its token: %+v", u)
	}
	if st, err := os.Stat(out); err != nil {
		t.Error(err)
	} else if st.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode %v, want 0600", st.Mode().Perm())
	}
	if err := writeHostKubeconfig(&cluster.Cluster{Kubeconfig: in, ServingCA: filepath.Join(dir, "missing")}, out, "https://x", "y"); err == nil {
		t.Error("a missing certificate: no error")
	}
}
