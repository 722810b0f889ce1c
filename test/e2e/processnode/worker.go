package processnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodProcess describes the host process that stands for a pod's runtime
// container.
type PodProcess struct {
	Namespace, Name string
	UID             types.UID
	// Addr is the pod IP and port the runtime server listens on.
	Addr netip.AddrPort
	// PID is the server's process (and process group) ID; 0 while it is not
	// running.
	PID int
	// Dir is the pod's private root; SANDBOX_BASE_DIR is Dir/app.
	Dir string
	// LogFile collects the server's stdout and stderr.
	LogFile string
}

// containerState is what the worker last observed of the runtime container.
type containerState struct {
	running    bool
	ready      bool
	startedAt  time.Time
	restarts   int32
	terminated *corev1.ContainerStateTerminated
	waiting    *corev1.ContainerStateWaiting
}

// podWorker owns one pod's process from start to stop. All status writes
// for the pod go through it.
type podWorker struct {
	node   *Node
	log    *slog.Logger
	uid    types.UID
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	proc  PodProcess
	state containerState
}

// runtimeContainer picks the container that becomes the host process: the
// first one that declares port 8888 (the runtime contract's port), else the
// first container.
func runtimeContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			if p.ContainerPort == 8888 {
				return &pod.Spec.Containers[i]
			}
		}
	}
	return &pod.Spec.Containers[0]
}

func containerPort(c *corev1.Container) int {
	for _, p := range c.Ports {
		if p.ContainerPort == 8888 {
			return 8888
		}
	}
	if len(c.Ports) > 0 {
		return int(c.Ports[0].ContainerPort)
	}
	return 8888
}

func (w *podWorker) snapshot() PodProcess {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.proc
}

// run starts the pod's process, keeps its status current and restarts it
// per the pod's restartPolicy, until ctx is cancelled; then it stops the
// process and removes the pod's directory.
func (w *podWorker) run(ctx context.Context, pod *corev1.Pod) {
	defer close(w.done)
	n := w.node
	c := runtimeContainer(pod)
	port := containerPort(c)
	ip, err := n.ips.allocate(port)
	if err != nil {
		w.fail(pod, "NoPodIP", err)
		<-ctx.Done()
		return
	}
	defer n.ips.release(ip)

	dir := filepath.Join(n.cfg.Dir, "pods", string(pod.UID))
	workDir := filepath.Join(dir, "app")
	logFile := filepath.Join(n.cfg.Dir, "logs", fmt.Sprintf("%s_%s_%s.log", pod.Namespace, pod.Name, pod.UID))
	w.mu.Lock()
	w.proc = PodProcess{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Addr: netip.AddrPortFrom(ip, uint16(port)), Dir: dir, LogFile: logFile}
	w.mu.Unlock()
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			w.log.Warn("remove pod dir", "dir", dir, "err", err)
		}
	}()
	for _, d := range []string{workDir, filepath.Dir(logFile)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			w.fail(pod, "CreateContainerError", fmt.Errorf("create %s: %w", d, err))
			<-ctx.Done()
			return
		}
	}
	env, err := podEnv(ctx, n.cfg.Client, pod, c, os.Getenv("PATH"), dir, workDir, ip.String(), n.cfg.GoCacheSeed != "")
	if err != nil {
		w.fail(pod, "CreateContainerConfigError", err)
		<-ctx.Done()
		return
	}
	if n.cfg.GoCacheSeed != "" {
		for _, kv := range env {
			if v, ok := cutKey(kv, "GOCACHE"); ok {
				if err := os.CopyFS(v, os.DirFS(n.cfg.GoCacheSeed)); err != nil {
					w.fail(pod, "CreateContainerError", fmt.Errorf("seed GOCACHE %s from %s: %w", v, n.cfg.GoCacheSeed, err))
					<-ctx.Done()
					return
				}
			}
		}
	}
	for _, k := range rerootedEnv {
		for _, kv := range env {
			if v, ok := cutKey(kv, k); ok && filepath.IsAbs(v) {
				_ = os.MkdirAll(v, 0o755)
			}
		}
	}

	backoff := time.Second
	for {
		cmd, exited, err := w.start(c, ip, port, env, workDir, logFile)
		if err != nil {
			w.log.Error("start runtime server", "err", err)
			w.setState(ctx, pod, func(s *containerState) {
				s.running, s.ready = false, false
				s.waiting = &corev1.ContainerStateWaiting{Reason: "StartError", Message: err.Error()}
			})
		} else {
			w.log.Info("runtime server started", "pid", cmd.Process.Pid, "addr", net.JoinHostPort(ip.String(), strconv.Itoa(port)))
			w.setState(ctx, pod, func(s *containerState) {
				s.running, s.ready, s.startedAt, s.waiting, s.terminated = true, c.ReadinessProbe == nil, time.Now(), nil, nil
			})
			probeCtx, stopProbe := context.WithCancel(ctx)
			if c.ReadinessProbe != nil {
				go w.probeLoop(probeCtx, pod, c, ip.String(), env, workDir)
			}
			select {
			case <-ctx.Done():
				stopProbe()
				w.stop(pod, cmd, exited)
				return
			case werr := <-exited:
				stopProbe()
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				code := int32(0)
				var ee *exec.ExitError
				if errors.As(werr, &ee) {
					code = int32(ee.ExitCode())
				}
				w.log.Warn("runtime server exited", "exit_code", code, "err", werr)
				term := &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", FinishedAt: metav1.Now()}
				if code == 0 {
					term.Reason = "Completed"
				}
				policy := pod.Spec.RestartPolicy
				if policy == corev1.RestartPolicyNever || (policy == corev1.RestartPolicyOnFailure && code == 0) {
					w.setState(ctx, pod, func(s *containerState) {
						s.running, s.ready, s.terminated = false, false, term
					})
					<-ctx.Done()
					return
				}
				w.setState(ctx, pod, func(s *containerState) {
					s.running, s.ready, s.restarts = false, false, s.restarts+1
					s.waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: fmt.Sprintf("exit code %d", code)}
				})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func cutKey(kv, key string) (string, bool) {
	if len(kv) > len(key) && kv[:len(key)] == key && kv[len(key)] == '=' {
		return kv[len(key)+1:], true
	}
	return "", false
}

// start launches the runtime server in its own process group. The image
// and the container's command are not used: the node runs its own
// sandbox-server build with --addr set to the pod's address.
func (w *podWorker) start(c *corev1.Container, ip netip.Addr, port int, env []string, workDir, logFile string) (*exec.Cmd, <-chan error, error) {
	logf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open log %s: %w", logFile, err)
	}
	cmd := exec.Command(w.node.cfg.ServerBinary, "--addr", net.JoinHostPort(ip.String(), strconv.Itoa(port)))
	cmd.Env = env
	cmd.Dir = workDir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, nil, fmt.Errorf("start %s for container %s: %w", w.node.cfg.ServerBinary, c.Name, err)
	}
	w.mu.Lock()
	w.proc.PID = cmd.Process.Pid
	w.mu.Unlock()
	if f := w.node.cfg.PIDFile; f != "" {
		if pf, err := os.OpenFile(f, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			_, _ = fmt.Fprintf(pf, "%d\n", cmd.Process.Pid)
			_ = pf.Close()
		}
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		w.mu.Lock()
		w.proc.PID = 0
		w.mu.Unlock()
		exited <- err
	}()
	return cmd, exited, nil
}

// stop sends SIGTERM to the process group, waits up to the pod's grace
// period (capped by Config.MaxGracePeriod), then sends SIGKILL.
func (w *podWorker) stop(pod *corev1.Pod, cmd *exec.Cmd, exited <-chan error) {
	grace := 30 * time.Second
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	grace = min(grace, w.node.cfg.MaxGracePeriod)
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		w.log.Warn("runtime server ignored SIGTERM; killing", "grace", grace)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	// Children the server left behind share its group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	w.log.Info("runtime server stopped", "pid", pgid)
}

// probeLoop runs the readiness probe on its schedule and flips the
// container's readiness after the success or failure threshold.
func (w *podWorker) probeLoop(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP string, env []string, dir string) {
	p := &prober{probe: c.ReadinessProbe, container: c, podIP: podIP, env: env, dir: dir,
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	initial, period, successT, failureT := p.timing()
	timer := time.NewTimer(initial)
	defer timer.Stop()
	ready := false
	successes, failures := 0, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if err := p.run(ctx); err != nil {
			successes, failures = 0, failures+1
			if ready && failures >= failureT {
				ready = false
				w.log.Info("readiness probe failing", "err", err)
				w.setState(ctx, pod, func(s *containerState) { s.ready = false })
			}
		} else {
			successes, failures = successes+1, 0
			if !ready && successes >= successT {
				ready = true
				w.setState(ctx, pod, func(s *containerState) { s.ready = true })
			}
		}
		timer.Reset(period)
	}
}

// fail reports a container that could not be created; it stays Pending
// with a waiting reason, as a kubelet leaves it.
func (w *podWorker) fail(pod *corev1.Pod, reason string, err error) {
	w.log.Error("pod cannot start", "reason", reason, "err", err)
	w.setState(context.Background(), pod, func(s *containerState) {
		s.waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()}
	})
}

// setState applies change to the container state and writes the pod's
// status. Failures are logged: the next change writes the whole status again.
func (w *podWorker) setState(ctx context.Context, pod *corev1.Pod, change func(*containerState)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	change(&w.state)
	if ctx.Err() != nil {
		return
	}
	if err := w.node.writeStatus(ctx, pod, w.proc, w.state); err != nil {
		w.log.Warn("write pod status", "err", err)
	}
}
