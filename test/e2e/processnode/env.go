package processnode

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// rerootedEnv lists variables whose absolute-path values name places inside
// the container image. On this machine they would point into the host's
// own tree, so each is moved under the pod's private root directory.
var rerootedEnv = []string{"HOME", "SANDBOX_HOME", "TMPDIR", "GOCACHE", "GOPATH", "GOMODCACHE", "XDG_CACHE_HOME"}

// podEnv resolves the environment of container c in pod as a kubelet would
// (literal values, fieldRef, configMap/secret refs, envFrom, $(VAR)
// expansion), then adapts it to a host process: PATH comes from the host
// (the image's binaries are not here), variables in rerootedEnv move under
// root, wildcard listen addresses (":9090") bind the pod IP, GOCACHE is
// root/gocache when seededGoCache is set and the pod names none, and
// SANDBOX_BASE_DIR is the pod's work directory. It returns
// "KEY=value" pairs sorted by key.
func podEnv(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c *corev1.Container, hostPath, root, workDir string, podIP string, seededGoCache bool) ([]string, error) {
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		data, err := envFromData(ctx, client, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			env[from.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = expandRefs(e.Value, env)
			continue
		}
		v, ok, err := envValueFrom(ctx, client, pod, e.ValueFrom, podIP)
		if err != nil {
			return nil, fmt.Errorf("env %s of container %s: %w", e.Name, c.Name, err)
		}
		if ok {
			env[e.Name] = v
		}
	}

	// A wildcard listen address (":9090") means the pod's own network
	// namespace in a pod; here it becomes the pod IP, or every pod would
	// fight over the same host port.
	for k, v := range env {
		if port, ok := wildcardPort(v); ok {
			env[k] = net.JoinHostPort(podIP, port)
		}
	}
	env["PATH"] = hostPath
	if _, ok := env["HOME"]; !ok {
		env["HOME"] = "/root"
	}
	for _, k := range rerootedEnv {
		if v, ok := env[k]; ok && filepath.IsAbs(v) {
			env[k] = filepath.Join(root, v)
		}
	}
	if _, ok := env["GOCACHE"]; !ok && seededGoCache {
		env["GOCACHE"] = filepath.Join(root, "gocache")
	}
	env["SANDBOX_BASE_DIR"] = workDir

	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// wildcardPort reports whether v is a listen address on every interface
// (":N", "0.0.0.0:N" or "[::]:N") and returns its port.
func wildcardPort(v string) (string, bool) {
	host, port, err := net.SplitHostPort(v)
	if err != nil || (host != "" && host != "0.0.0.0" && host != "::") {
		return "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return "", false
	}
	return port, true
}

// expandRefs replaces $(NAME) with NAME's earlier value; $$(NAME) stays a
// literal $(NAME) and unknown names are left as written, as the kubelet does.
func expandRefs(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func envFromData(ctx context.Context, client kubernetes.Interface, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if err != nil {
			if optional(from.ConfigMapRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("envFrom configmap %s: %w", from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := client.CoreV1().Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if err != nil {
			if optional(from.SecretRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("envFrom secret %s: %w", from.SecretRef.Name, err)
		}
		data := map[string]string{}
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return data, nil
	}
	return nil, nil
}

func envValueFrom(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, src *corev1.EnvVarSource, podIP string) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := fieldValue(pod, src.FieldRef.FieldPath, podIP)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %s: %w", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok && !optional(ref.Optional) {
			return "", false, fmt.Errorf("configmap %s has no key %q", ref.Name, ref.Key)
		}
		return v, ok, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %s: %w", ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok && !optional(ref.Optional) {
			return "", false, fmt.Errorf("secret %s has no key %q", ref.Name, ref.Key)
		}
		return string(v), ok, nil
	}
	// resourceFieldRef and fileKeyRef describe the container's cgroup and
	// volumes, which a host process does not have: leave the variable unset.
	return "", false, nil
}

func fieldValue(pod *corev1.Pod, path, podIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return "127.0.0.1", nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok {
			return m[strings.TrimSuffix(key, "']")], nil
		}
	}
	return "", fmt.Errorf("fieldRef %q is not supported by the process node", path)
}

func optional(b *bool) bool { return b != nil && *b }
