package processnode

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// writeStatus writes the pod's status from the runtime container's state:
// phase, pod and host IPs, the PodScheduled, Initialized,
// PodReadyToStartContainers, ContainersReady and Ready conditions, and one
// container status per container. Containers other than the runtime
// container have no process here; they are reported as running and ready
// so that they do not hold the pod back.
func (n *Node) writeStatus(ctx context.Context, pod *corev1.Pod, proc PodProcess, st containerState) error {
	runtimeName := runtimeContainer(pod).Name
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := n.cfg.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if cur.UID != pod.UID || cur.DeletionTimestamp != nil {
			return nil
		}
		s := &cur.Status
		now := metav1.Now()
		if s.StartTime == nil {
			s.StartTime = &now
		}
		s.HostIP = "127.0.0.1"
		s.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
		if proc.Addr.IsValid() {
			ip := proc.Addr.Addr().String()
			s.PodIP = ip
			s.PodIPs = []corev1.PodIP{{IP: ip}}
		}
		s.Phase = corev1.PodPending
		switch {
		case st.running:
			s.Phase = corev1.PodRunning
		case st.terminated != nil && st.terminated.ExitCode == 0:
			s.Phase = corev1.PodSucceeded
		case st.terminated != nil:
			s.Phase = corev1.PodFailed
		case !st.startedAt.IsZero():
			// Restarting after a crash: the pod stays Running.
			s.Phase = corev1.PodRunning
		}
		ready := st.running && st.ready
		setCondition(s, corev1.PodScheduled, true, now)
		setCondition(s, corev1.PodInitialized, true, now)
		setCondition(s, corev1.PodReadyToStartContainers, true, now)
		setCondition(s, corev1.ContainersReady, ready, now)
		setCondition(s, corev1.PodReady, ready && gatesPass(cur), now)

		statuses := make([]corev1.ContainerStatus, 0, len(cur.Spec.Containers))
		for _, c := range cur.Spec.Containers {
			cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "processnode://" + c.Image}
			if c.Name != runtimeName {
				cs.Ready, cs.Started = true, ptr(true)
				cs.State.Running = &corev1.ContainerStateRunning{StartedAt: *s.StartTime}
				statuses = append(statuses, cs)
				continue
			}
			cs.Ready, cs.RestartCount, cs.Started = ready, st.restarts, ptr(st.running)
			cs.ContainerID = fmt.Sprintf("processnode://%d", proc.PID)
			switch {
			case st.running:
				cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(st.startedAt)}
			case st.terminated != nil:
				cs.State.Terminated = st.terminated
			case st.waiting != nil:
				cs.State.Waiting = st.waiting
			default:
				cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
			}
			statuses = append(statuses, cs)
		}
		s.ContainerStatuses = statuses
		_, err = n.cfg.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// gatesPass reports whether every readiness gate's condition is True.
func gatesPass(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		ok := false
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func setCondition(s *corev1.PodStatus, t corev1.PodConditionType, ok bool, now metav1.Time) {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			if s.Conditions[i].Status != status {
				s.Conditions[i].Status = status
				s.Conditions[i].LastTransitionTime = now
			}
			return
		}
	}
	s.Conditions = append(s.Conditions, corev1.PodCondition{Type: t, Status: status, LastTransitionTime: now})
}

func ptr[T any](v T) *T { return &v }
