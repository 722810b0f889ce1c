package local_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// cpuWeightOf reads the CPU weight of sandbox id's cgroup (cgroup v1
// cpu.shares or v2 cpu.weight), its group's, and the weight of one task
// in that unit. It skips the test when the host has no cpu controller.
func cpuWeightOf(t *testing.T, b *local.Backend, id string) (sandbox, group, one int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.StateDir(), "sandboxes", id, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Cgroup struct {
			V2  bool   `json:"v2"`
			CPU string `json:"cpu"`
		} `json:"cgroup"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Cgroup.CPU == "" {
		t.Skip("no cpu controller: the backend sets no CPU limits here")
	}
	file, one := "cpu.shares", 1024
	if m.Cgroup.V2 {
		file, one = "cpu.weight", 100
	}
	read := func(dir string) int {
		t.Helper()
		v, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(v)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return read(m.Cgroup.CPU), read(filepath.Dir(m.Cgroup.CPU)), one
}

// TestCPUWeight: a sandbox allowed CPUs cores competes for CPU as that
// many tasks (cgroup v1 cpu.shares 1024 each, v2 cpu.weight 100 each), and
// the group of all sandboxes as the machine's CPUs' worth of tasks; with
// the kernel's default a whole sandbox weighed as one host process.
func TestCPUWeight(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs to tell a sandbox's weight from one task's")
	}
	opts := testOptions()
	opts.CPUs = 2
	b := newBackend(t, opts)
	s := openSession(t, b)
	sandbox, group, one := cpuWeightOf(t, b, s.ID())
	if sandbox != 2*one {
		t.Errorf("sandbox weight = %d, want %d (2 CPUs)", sandbox, 2*one)
	}
	if want := runtime.NumCPU() * one; group != want {
		t.Errorf("group of all sandboxes weight = %d, want %d (the machine's CPUs)", group, want)
	}
}

// TestCPUWeightWarmPool: a sandbox waiting in the warm pool weighs a
// sixteenth of one task, so starting it takes little CPU time from the
// session that just claimed another; claimed, it has its full weight.
func TestCPUWeightWarmPool(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs to tell a sandbox's weight from one task's")
	}
	opts := poolOptions(1)
	opts.CPUs = 2
	b := newBackend(t, opts)
	waitPool(t, b, 1)
	pooled, _ := b.List()
	waiting := map[string]int{}
	for _, id := range pooled {
		// Other processes' sandboxes share the state directory: skip
		// those still starting (no state file yet) or gone.
		if _, err := os.Stat(filepath.Join(b.StateDir(), "sandboxes", id, "sandbox.json")); err != nil {
			continue
		}
		if w, _, one := cpuWeightOf(t, b, id); w == one/16 {
			waiting[id] = w
		}
	}
	if len(waiting) == 0 {
		t.Fatalf("no sandbox of %v weighs a sixteenth of one task while in the warm pool", pooled)
	}
	s := openSession(t, b)
	if _, ok := waiting[s.ID()]; !ok {
		t.Fatalf("Open returned %s, not the sandbox waiting in the pool (%v)", s.ID(), waiting)
	}
	if w, _, one := cpuWeightOf(t, b, s.ID()); w != 2*one {
		t.Errorf("claimed sandbox weight = %d, want %d (2 CPUs)", w, 2*one)
	}
	mustOK(t, s, goruntime.Request{Files: helloFiles, Command: "go run main.go"})
}
