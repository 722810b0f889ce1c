package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where a report was measured.
type Machine struct {
	CPU      string // model name from /proc/cpuinfo
	CPUs     int    // runtime.NumCPU()
	MemoryGB float64
	Kernel   string // /proc/sys/kernel/osrelease
	Cgroup   string // "v1" or "v2"
	Go       string // `go version` of the go on PATH
	Python   string // python3 --version, or "" when absent
	Bwrap    string // bwrap --version, or ""
	// LoadStart and LoadEnd are the 1-minute load averages when the run
	// began and ended: a loaded machine makes every figure noisier.
	LoadStart, LoadEnd float64
}

// describeMachine reads what Machine holds from /proc and the tools.
func describeMachine(ctx context.Context) Machine {
	m := Machine{CPUs: runtime.NumCPU(), LoadStart: loadAvg()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				m.MemoryGB = kb / (1 << 20)
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	m.Cgroup = "v1"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		m.Cgroup = "v2"
	}
	m.Go = firstLine(ctx, "go", "version")
	python := "/usr/bin/python3" // the one the python baseline runs (pythonRuntime)
	if !isExec(python) {
		python = "python3"
	}
	m.Python = firstLine(ctx, python, "--version")
	m.Bwrap = firstLine(ctx, "bwrap", "--version")
	return m
}

func firstLine(ctx context.Context, name string, args ...string) string {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return ""
	}
	line, _, _ := bytes.Cut(bytes.TrimSpace(out), []byte("\n"))
	return string(line)
}

// loadAvg is the 1-minute load average, or -1 when unknown.
func loadAvg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

func (m Machine) print(w io.Writer) {
	cpu := m.CPU
	if cpu == "" {
		cpu = "unknown CPU"
	}
	fmt.Fprintf(w, "machine: %s, %d CPUs, %.0f GiB, Linux %s (cgroup %s)\n", cpu, m.CPUs, m.MemoryGB, m.Kernel, m.Cgroup)
	fmt.Fprintf(w, "tools:   %s; %s; %s\n", orNone(m.Go, "no go"), orNone(m.Python, "no python3"), orNone(m.Bwrap, "no bwrap"))
	fmt.Fprintf(w, "load:    %.1f at start, %.1f at end (1-minute load average)\n", m.LoadStart, m.LoadEnd)
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
