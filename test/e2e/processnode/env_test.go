package processnode

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestExpandRefs(t *testing.T) {
	env := map[string]string{"A": "1", "B": "two"}
	for in, want := range map[string]string{
		"plain":         "plain",
		"$(A)-$(B)":     "1-two",
		"$$(A)":         "$(A)",
		"$(MISSING)":    "$(MISSING)",
		"$(A":           "$(A",
		"cost $5":       "cost $5",
		"trailing $":    "trailing $",
		"x$(A)y$(A)z":   "x1y1z",
		"$(A)$$$(B)":    "1$two",
		"nested $((A))": "nested $((A))",
	} {
		if got := expandRefs(in, env); got != want {
			t.Errorf("expandRefs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPodEnv(t *testing.T) {
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"MODE": "fast", "LEVEL": "3"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns"}, Data: map[string][]byte{"TOKEN": []byte("s3cret")}},
	)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u-1", Labels: map[string]string{"app": "go"}},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
	}
	c := &corev1.Container{
		Name:    "runtime",
		EnvFrom: []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		Env: []corev1.EnvVar{
			{Name: "GREETING", Value: "hi $(CFG_MODE)"},
			{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "TOKEN"}}},
			{Name: "GOCACHE", Value: "/cache/go-build"},
			{Name: "PATH", Value: "/image/bin"},
			{Name: "SANDBOX_BASE_DIR", Value: "/app"},
			{Name: "RELATIVE", Value: "rel/dir"},
			{Name: "SANDBOXD_GRPC_ADDR", Value: ":9090"},
			{Name: "SANDBOXD_REST_ADDR", Value: "0.0.0.0:9091"},
			{Name: "UPSTREAM", Value: "example.com:443"},
		},
	}
	env, err := podEnv(context.Background(), client, pod, c, "/host/bin", "/pods/u-1", "/pods/u-1/app", "127.77.0.9", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"CFG_MODE=fast", "CFG_LEVEL=3", "GREETING=hi fast", "POD=p", "IP=127.77.0.9", "APP=go", "TOKEN=s3cret",
		"GOCACHE=/pods/u-1/cache/go-build", "PATH=/host/bin", "SANDBOX_BASE_DIR=/pods/u-1/app",
		"HOME=/pods/u-1/root", "RELATIVE=rel/dir",
		"SANDBOXD_GRPC_ADDR=127.77.0.9:9090", "SANDBOXD_REST_ADDR=127.77.0.9:9091", "UPSTREAM=example.com:443",
	} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %q: %v", want, env)
		}
	}
	seeded, err := podEnv(context.Background(), client, pod, &corev1.Container{}, "/host/bin", "/pods/u-1", "/pods/u-1/app", "127.77.0.9", true)
	if err != nil || !slices.Contains(seeded, "GOCACHE=/pods/u-1/gocache") {
		t.Errorf("seeded GOCACHE: env %v, err %v; want GOCACHE=/pods/u-1/gocache", seeded, err)
	}
	if !slices.IsSorted(env) {
		t.Errorf("env not sorted: %v", env)
	}

	// A missing, non-optional reference is an error naming it.
	c.Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "k"}}}}
	c.EnvFrom = nil
	if _, err := podEnv(context.Background(), client, pod, c, "/bin", "/r", "/r/app", "127.0.0.2", false); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing configmap: err = %v, want one naming it", err)
	}
	// An optional one is skipped.
	c.Env[0].ValueFrom.ConfigMapKeyRef.Optional = ptr(true)
	if env, err := podEnv(context.Background(), client, pod, c, "/bin", "/r", "/r/app", "127.0.0.2", false); err != nil || slices.ContainsFunc(env, func(s string) bool { return strings.HasPrefix(s, "X=") }) {
		t.Errorf("optional missing configmap: env %v, err %v; want X unset and no error", env, err)
	}
	// An unsupported fieldRef is refused.
	c.Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.hostname"}}}}
	if _, err := podEnv(context.Background(), client, pod, c, "/bin", "/r", "/r/app", "127.0.0.2", false); err == nil {
		t.Error("unsupported fieldRef: no error")
	}
}

func TestIPAllocator(t *testing.T) {
	if _, err := newIPAllocator(netip.MustParsePrefix("10.0.0.0/24")); err == nil {
		t.Error("non-loopback prefix accepted")
	}
	if _, err := newIPAllocator(netip.MustParsePrefix("127.0.0.0/31")); err == nil {
		t.Error("/31 accepted")
	}
	a, err := newIPAllocator(netip.MustParsePrefix("127.88.3.0/30"))
	if err != nil {
		t.Fatal(err)
	}
	// Occupy the port on .2 so the allocator must skip that address.
	l, err := net.Listen("tcp", "127.88.3.2:18888")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first, err := a.allocate(18888)
	if err != nil || first != netip.MustParseAddr("127.88.3.1") {
		t.Fatalf("first = %v, %v; want 127.88.3.1", first, err)
	}
	if _, err := a.allocate(18888); err == nil {
		t.Fatalf("allocated with .1 taken, .2's port busy and .3 the broadcast address")
	}
	a.release(first)
	again, err := a.allocate(18888)
	if err != nil || again != first {
		t.Fatalf("after release: %v, %v; want %v", again, err, first)
	}
}
