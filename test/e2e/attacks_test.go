//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/sandboxattack"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// podAttackResults holds "N/M held (runtime)" per runtime for the summary
// line, in the order the runtimes ran.
var podAttackResults struct {
	mu    sync.Mutex
	names []string
	held  map[string]string
}

// reportPodAttacks records rt's result and rewrites the summary line.
func reportPodAttacks(t *testing.T, rt *runtimeTarget, held, total int) {
	podAttackResults.mu.Lock()
	if podAttackResults.held == nil {
		podAttackResults.held = map[string]string{}
	}
	if _, ok := podAttackResults.held[rt.name]; !ok {
		podAttackResults.names = append(podAttackResults.names, rt.name)
	}
	podAttackResults.held[rt.name] = fmt.Sprintf("%d/%d held (%s)", held, total, rt.name)
	var parts []string
	for _, n := range podAttackResults.names {
		parts = append(parts, podAttackResults.held[n])
	}
	podAttackResults.mu.Unlock()
	report(t, "pod-attacks", "pod attacks: %s", strings.Join(parts, ", "))
}

// podAttacks are the commands of the pod battery: the local backend's
// (pkg/goruntime/local, battery_test.go and pid1_test.go) aimed at the
// runtime server, which is the pod's PID 1, and run as the server's uid,
// and the i386 calls of internal/server's TestBinaryInitRefusesI386.
// /tmp/attack is the attack program (sandboxattack.Files).
func podAttacks() []string {
	cmds := []string{
		"kill -9 -1",
		"kill -TERM -1",
		// pkill -u 1000 and pkill -9 -u 1000 (every process of the pod
		// runs as 1000; the image has no procps)
		`for p in /proc/[0-9]*; do kill "${p#/proc/}"; done`,
		`for p in /proc/[0-9]*; do kill -9 "${p#/proc/}"; done`,
		"kill -STOP 1; kill -STOP -1",
		"kill -QUIT 1",
		"kill -ABRT 1",
		"/tmp/attack sigqueue 1 11",
		"/tmp/attack pidfd 1 11",
		"/tmp/attack setsig 1 11; sleep 0.3",
		"/tmp/attack setsig 1 9; sleep 0.3",
		"/tmp/attack joinpgid 1 && kill -9 0",
		"/tmp/attack cloneparent 1 9; sleep 0.3",
		"/tmp/attack orphan 1 34; sleep 0.6",
		"/tmp/attack ptrace 1",
		"/tmp/attack mem 1",
		"/tmp/attack environ 1",
		"/tmp/attack i386sigqueue 1 11",
		"/tmp/attack i386kill 1 9",
	}
	for sig := 1; sig <= 64; sig++ {
		cmds = append(cmds, fmt.Sprintf("kill -%d 1", sig))
	}
	return cmds
}

// podRefusals is what an attack that must be refused outright, not
// merely survived, may print under rt (nil: surviving it is enough).
// The i386 calls (int $0x80) get EPERM under runc from the server's
// filter, which answers every call of another architecture so
// (internal/seccomp, foreignArchAction). gVisor implements no 32-bit
// calls: its systrap platform (the node's, cluster/node.go) adds
// 0x86000000 to the number of a call whose seccomp architecture is not
// x86-64, so that it names no call of its table
// (pkg/sentry/platform/systrap/sysmsg/sighandler_amd64.c), and the
// answer is ENOSYS (the server's filter's, whose x32 rule that number
// meets, or the sentry's). EPERM is accepted there too: a refusal
// either way.
func podRefusals(rt *runtimeTarget, cmd string) []string {
	switch {
	case strings.HasPrefix(cmd, "/tmp/attack ptrace"), strings.HasPrefix(cmd, "/tmp/attack mem"), strings.HasPrefix(cmd, "/tmp/attack environ"):
		return []string{"REFUSED "}
	case strings.HasPrefix(cmd, "/tmp/attack i386") && rt == gvisorTarget:
		return []string{"REFUSED operation not permitted", "REFUSED function not implemented"}
	case strings.HasPrefix(cmd, "/tmp/attack i386"):
		return []string{"REFUSED operation not permitted"}
	}
	return nil
}

// serverStart is PID 1's start time (/proc/1/stat field 22): a restarted
// container has a new one.
const serverStart = "cut -d' ' -f22 /proc/1/stat"

// testPodAttacks checks a command's descriptors in a claimed pod
// (checkPodDescriptors) and that the init guard spares pids other than 1
// (checkGuardSparesOtherPids), then runs the pod battery: after each attack
// the runtime server (PID 1) still answers, it is the same process (start
// time), and /app still holds the file written before; at the end the
// runtime container has not restarted. The memory attacks and the i386
// calls must be refused outright, not merely survived (podRefusals).
func testPodAttacks(t *testing.T, rt *runtimeTarget) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sb := openSandbox(ctx, t, rt, modes[1])
	sess := goruntime.NewSession(sb, goruntime.Options{})
	files := []goruntime.File{{Path: "keep.txt", Data: []byte("kept")}}
	for name, data := range sandboxattack.Files() {
		files = append(files, goruntime.File{Path: "attack/" + name, Data: []byte(data)})
	}
	arm, err := sess.Execute(ctx, goruntime.Request{
		Files:   files,
		Command: "cd attack && go build -o /tmp/attack . && " + serverStart,
		Timeout: 5 * time.Minute,
	})
	if err != nil || arm.ExitCode != 0 {
		t.Fatalf("build the attack program in the pod: %v %+v", err, arm)
	}
	start := strings.TrimSpace(arm.Stdout)
	checkPodDescriptors(ctx, t, sb)
	checkGuardSparesOtherPids(ctx, t, sb)
	cmds := podAttacks()
	held := 0
	for _, cmd := range cmds {
		callCtx, cancelCall := context.WithTimeout(ctx, 40*time.Second)
		res, err := sb.Exec(callCtx, goruntime.ExecRequest{Command: cmd, Timeout: 20 * time.Second})
		cancelCall()
		if err != nil {
			t.Logf("%q: the call failed: %v", cmd, err)
		}
		if want := podRefusals(rt, cmd); want != nil && (res == nil || !slices.ContainsFunc(want, func(w string) bool { return strings.HasPrefix(res.Stdout, w) })) {
			t.Errorf("%q: %+v, want stdout starting with one of %q", cmd, res, want)
			continue
		}
		checkCtx, cancelCheck := context.WithTimeout(ctx, 40*time.Second)
		check, err := sb.Exec(checkCtx, goruntime.ExecRequest{Command: serverStart + " && cat keep.txt", Timeout: 20 * time.Second})
		cancelCheck()
		if err != nil {
			t.Errorf("after %q: the next call failed: %v", cmd, err)
			continue
		}
		if want := start + "\nkept"; strings.TrimSpace(check.Stdout) != want {
			t.Errorf("after %q: PID 1 start time and keep.txt %q, want %q (the server was replaced)", cmd, check.Stdout, want)
			start = strings.SplitN(check.Stdout, "\n", 2)[0]
			continue
		}
		held++
	}
	pod, err := shared.c.Client.CoreV1().Pods(rt.ns).Get(ctx, sb.PodName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", sb.PodName(), err)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.RestartCount != 0 {
			t.Errorf("container %s of pod %s restarted %d times during the attacks", cs.Name, pod.Name, cs.RestartCount)
			held = 0
		}
	}
	reportPodAttacks(t, rt, held, len(cmds))
}

// checkGuardSparesOtherPids: the pod's init guard (--init-guard) refuses
// signals aimed at PID 1 only. Pids equal to the numbers of the calls it
// names were refused too when go-seccomp-bpf assembled the filter:
// kill(200, …) with EPERM (tkill is call 200), kill(424, …) with ENOSYS
// (pidfd_send_signal), so the corpus case signal_kill, landing on pid
// 200, went on past its own SIGKILL (docs/e2e.md, "signal_kill in a runc
// pod"). Each pid here is free, or the command's own shell.
func checkGuardSparesOtherPids(ctx context.Context, t *testing.T, sb goruntime.Sandbox) {
	t.Helper()
	for _, cmd := range []string{"kill -9 200", "kill -15 424", "kill -1 109", "kill -11 129"} {
		res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: cmd, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatalf("%q in the pod: %v", cmd, err)
		}
		if out := res.Stdout + res.Stderr; strings.Contains(out, "not permitted") || strings.Contains(out, "not implemented") {
			t.Errorf("%q in the pod: %q, want the kernel's answer (no such process), not the init guard's refusal", cmd, out)
		}
	}
}

// checkPodDescriptors runs localtest.ListCommand in the pod through the
// runtime contract and, where the sandbox streams, the process API: a
// command gets its standard streams and no other descriptor of the pod's
// runtime server (internal/cloexec).
func checkPodDescriptors(ctx context.Context, t *testing.T, sb goruntime.Sandbox) {
	t.Helper()
	req := goruntime.ExecRequest{Command: localtest.ListCommand, Timeout: 20 * time.Second}
	res, err := sb.Exec(ctx, req)
	if err != nil {
		t.Fatalf("list a command's descriptors in the pod: %v", err)
	}
	for _, b := range (localtest.Inherited{}).CheckCommand(res.Stdout + res.Stderr) {
		t.Errorf("a command in the pod (runtime contract): %s", b)
	}
	ss, ok := sb.(goruntime.StreamingSandbox)
	if !ok {
		return
	}
	if res, err = ss.ExecStream(ctx, req, func(goruntime.Chunk) {}); err != nil {
		t.Fatalf("list a streamed command's descriptors in the pod: %v", err)
	}
	for _, b := range (localtest.Inherited{}).CheckCommand(res.Stdout + res.Stderr) {
		t.Errorf("a command in the pod (process API): %s", b)
	}
}

// testPodDeletionWithinGrace deletes a claimed pod the way kubelet stops
// any pod (the pod's own terminationGracePeriodSeconds, no override) while
// a command runs in it. The server ignores SIGTERM (--init), so the image's
// stop signal (SIGKILL) must end it: the runtime container must have ended
// (its terminated state's finishedAt, from a watch of the pod) less than
// the grace period after the deletion, when kubelet would send SIGKILL
// anyway. How long the pod object took to go is reported beside it:
// under gVisor, on a loaded node, the runtime's teardown after the
// container ended takes seconds of its own.
func testPodDeletionWithinGrace(t *testing.T, rt *runtimeTarget) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := openSandbox(ctx, t, rt, modes[1])
	pods := shared.c.Client.CoreV1().Pods(rt.ns)
	pod, err := pods.Get(ctx, sb.PodName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", sb.PodName(), err)
	}
	grace := time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	if grace < 5*time.Second {
		t.Fatalf("pod %s: terminationGracePeriodSeconds %v, too short to tell a stop signal from kubelet's final SIGKILL", pod.Name, grace)
	}
	if res := mustExec(ctx, t, sb, "(sleep 600 >/dev/null 2>&1 &); kill -TERM 1 2>&1; echo ran"); !strings.Contains(res.Stdout, "ran") {
		t.Fatalf("start a command in the pod: %+v", res)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatalf("watch pod %s: %v", pod.Name, err)
	}
	defer w.Stop()
	began := time.Now()
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s: %v", pod.Name, err)
	}
	var ended time.Time
	var exit int32
	gone := func() bool {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && p.UID != pod.UID
	}
	deadline := time.After(grace + 45*time.Second)
watch:
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				break watch
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod && p.UID == pod.UID {
				for _, cs := range p.Status.ContainerStatuses {
					if cs.Name == "runtime" && cs.State.Terminated != nil && ended.IsZero() {
						ended, exit = cs.State.Terminated.FinishedAt.Time, cs.State.Terminated.ExitCode
					}
				}
			}
			if ev.Type == watch.Deleted {
				break watch
			}
		case <-deadline:
			t.Fatalf("pod %s still there %v after its deletion (grace %v): %s", pod.Name, time.Since(began).Round(time.Millisecond), grace, podSummary(rt.ns))
		}
	}
	for !gone() {
		time.Sleep(100 * time.Millisecond)
	}
	goneAfter := time.Since(began)
	if ended.IsZero() {
		t.Fatalf("pod %s went in %v without a terminated state of its runtime container on the watch", pod.Name, goneAfter.Round(time.Millisecond))
	}
	// finishedAt has whole seconds: compare with the deletion's second.
	endedAfter := ended.Sub(began.Truncate(time.Second))
	report(t, "pod-deletion-"+rt.name, "pod deletion (%s): server ended in %d s (exit %d), pod gone in %.1f s (grace %d s)",
		rt.name, int(endedAfter.Seconds()), exit, goneAfter.Seconds(), int(grace.Seconds()))
	if endedAfter >= grace {
		t.Errorf("pod %s: its server ended %v after the deletion, not less than the grace period %v: kubelet's stop signal did not end it", pod.Name, endedAfter, grace)
	}
}
