package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/test/e2e/cluster"
)

// listenInNetns opens a TCP listener on addr in the network namespace that
// the descriptor fd refers to, and closes fd. A socket belongs to the
// namespace it was made in for its whole life, so the listener takes
// connections from there while this process (and every connection it
// dials) stays in its own. The thread that enters the namespace is never
// handed back: its goroutine ends locked to it, and the Go runtime then
// ends the thread.
func listenInNetns(fd int, addr string) (net.Listener, error) {
	ns := os.NewFile(uintptr(fd), "host network namespace")
	if ns == nil {
		return nil, fmt.Errorf("--host-netns-fd=%d: not a descriptor", fd)
	}
	defer ns.Close()
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("enter the host's network namespace (--host-netns-fd=%d): %w", fd, err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			err = fmt.Errorf("listen on %s in the host's network namespace: %w", addr, err)
		}
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// forwarder copies each connection its listener accepts to and from a
// connection to one target address, byte for byte (TLS passes through).
type forwarder struct {
	l    net.Listener
	once sync.Once
}

// Serve accepts until the listener is closed. target is a URL or
// host:port; failures to dial it are logged to errs and the client's
// connection closed.
func (f *forwarder) Serve(target string, errs io.Writer) {
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		target = u.Host
	}
	for {
		in, err := f.l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				fmt.Fprintf(errs, "e2e-cluster: forward: accept: %v\n", err)
			}
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", target)
			if err != nil {
				fmt.Fprintf(errs, "e2e-cluster: forward to %s: %v\n", target, err)
				return
			}
			defer out.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(out, in)
				closeWrite(out)
				close(done)
			}()
			_, _ = io.Copy(in, out)
			closeWrite(in)
			<-done
		}()
	}
}

// Close stops accepting; connections being forwarded go on until either
// side closes.
func (f *forwarder) Close() {
	f.once.Do(func() { _ = f.l.Close() })
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// writeHostKubeconfig writes, to path (mode 0600), the cluster's kubeconfig
// with its server set to server (the forward on the host) and TLS verified
// against the API server's own serving certificate, under the name that
// certificate was made for (the node's IP, its advertise address), instead
// of skipped.
func writeHostKubeconfig(c *cluster.Cluster, path, server, certName string) error {
	kc, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("read the cluster's kubeconfig: %w", err)
	}
	ca, err := os.ReadFile(c.ServingCA)
	if err != nil {
		return fmt.Errorf("read the API server's certificate: %w", err)
	}
	for _, cl := range kc.Clusters {
		cl.Server = server
		cl.InsecureSkipTLSVerify = false
		cl.CertificateAuthorityData = ca
		cl.TLSServerName = certName
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return nil
}
