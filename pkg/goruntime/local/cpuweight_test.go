package local_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

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
	data, err := os.ReadFile(filepath.Join(b.StateDir(), "sandboxes", s.ID(), "sandbox.json"))
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
	if got := read(m.Cgroup.CPU); got != 2*one {
		t.Errorf("sandbox %s = %d, want %d (2 CPUs)", file, got, 2*one)
	}
	if got, want := read(filepath.Dir(m.Cgroup.CPU)), runtime.NumCPU()*one; got != want {
		t.Errorf("group of all sandboxes %s = %d, want %d (the machine's CPUs)", file, got, want)
	}
}
