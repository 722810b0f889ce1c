package server

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkExecuteTrue is the /execute round trip of `true` against the
// built binary over loopback (keep-alive), with p50 and p99 reported.
func BenchmarkExecuteTrue(b *testing.B) {
	p := startBinary(b, os.Environ())
	client := &http.Client{}
	body := []byte(`{"command":"true"}`)
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		resp, err := client.Post(p.url+"/execute", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

const benchFileSize = 64 << 20

// BenchmarkUpload64MiB streams a 64 MiB multipart upload to the binary.
func BenchmarkUpload64MiB(b *testing.B) {
	p := startBinary(b, os.Environ())
	content := make([]byte, benchFileSize)
	_, _ = randReader(1).Read(content)
	var head, tail bytes.Buffer
	mw := multipart.NewWriter(&head)
	if _, err := mw.CreateFormFile("file", "bench.bin"); err != nil {
		b.Fatal(err)
	}
	boundary := mw.Boundary()
	fmt.Fprintf(&tail, "\r\n--%s--\r\n", boundary)
	ct := mw.FormDataContentType()
	b.SetBytes(benchFileSize)
	cpu := serverCPU(b, p)
	for b.Loop() {
		body := io.MultiReader(bytes.NewReader(head.Bytes()), bytes.NewReader(content), bytes.NewReader(tail.Bytes()))
		resp, err := http.Post(p.url+"/upload", ct, body)
		if err != nil {
			b.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("upload: %d %s", resp.StatusCode, msg)
		}
	}
	cpu.report(b)
}

// BenchmarkUnpackSmallFiles posts one tar archive of 5,000 files of 10
// bytes each (20 directories) to the binary's /unpack, as the library
// ships a call's files. Baseline: `tar -xf` of the same archive into a
// fresh directory, run side by side.
func BenchmarkUnpackSmallFiles(b *testing.B) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := range 5000 {
		name := fmt.Sprintf("d%d/f%d.go", i%20, i)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: 10}); err != nil {
			b.Fatal(err)
		}
		if _, err := tw.Write([]byte("package x\n")); err != nil {
			b.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	archive := buf.Bytes()
	b.Run("unpack", func(b *testing.B) {
		p := startBinary(b, os.Environ())
		for b.Loop() {
			resp, err := http.Post(p.url+"/unpack", "application/x-tar", bytes.NewReader(archive))
			if err != nil {
				b.Fatal(err)
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("unpack: %d %s", resp.StatusCode, msg)
			}
		}
	})
	b.Run("tar-baseline", func(b *testing.B) {
		if _, err := exec.LookPath("tar"); err != nil {
			b.Skip("no tar on $PATH")
		}
		src := filepath.Join(b.TempDir(), "a.tar")
		if err := os.WriteFile(src, archive, 0o644); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			dir := b.TempDir()
			if out, err := exec.Command("tar", "-xf", src, "-C", dir, "--no-same-owner", "-m").CombinedOutput(); err != nil {
				b.Fatalf("tar: %v: %s", err, out)
			}
		}
	})
}

// BenchmarkDownload64MiB reads a 64 MiB file back from the binary.
func BenchmarkDownload64MiB(b *testing.B) {
	p := startBinary(b, os.Environ())
	content := make([]byte, benchFileSize)
	_, _ = randReader(2).Read(content)
	if err := os.WriteFile(p.base+"/bench.bin", content, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchFileSize)
	cpu := serverCPU(b, p)
	for b.Loop() {
		resp, err := http.Get(p.url + "/download/bench.bin")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != benchFileSize {
			b.Fatalf("download: %d bytes, %v", n, err)
		}
	}
	cpu.report(b)
}

// cpuMeter reads the server process's CPU time (user+system), so a
// benchmark can report the server's own throughput per CPU second, which
// does not depend on how busy the rest of the machine is.
type cpuMeter struct {
	pid   int
	start time.Duration
}

func serverCPU(b *testing.B, p *proc) *cpuMeter {
	m := &cpuMeter{pid: p.cmd.Process.Pid}
	m.start = m.read(b)
	return m
}

func (m *cpuMeter) read(b *testing.B) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the parenthesised command: utime and stime are the
	// 12th and 13th, in clock ticks (100 per second on Linux).
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func (m *cpuMeter) report(b *testing.B) {
	used := m.read(b) - m.start
	if used <= 0 || b.N == 0 {
		return
	}
	b.ReportMetric(float64(benchFileSize)*float64(b.N)/used.Seconds()/1e6, "server-MB/cpu-s")
}

// BenchmarkIdleRSS reports the built binary's resident set (VmRSS) once it
// is listening and has answered one health check.
func BenchmarkIdleRSS(b *testing.B) {
	p := startBinary(b, os.Environ())
	resp, err := http.Get(p.url + "/")
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	time.Sleep(500 * time.Millisecond)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	var kib float64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ = strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		}
	}
	for b.Loop() {
	}
	b.ReportMetric(kib/1024, "idle-RSS-MiB")
}
