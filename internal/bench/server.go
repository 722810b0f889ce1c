package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	runtimeserver "github.com/go-runtime-sandbox/go-runtime-sandbox/internal/server"
)

// transferBytes is the size of the upload and download figures.
const transferBytes = 32 << 20

// targets are the runtime servers the server section compares.
type targets struct {
	ours, python, sandboxd, bareGo                  *server
	oursURL, oursREST, pyURL, sandboxdREST, bareURL string
	oursGRPC, sandboxdGRPC                          processv1.ProcessServiceClient
	conns                                           []*grpc.ClientConn
}

func (t *targets) close() {
	for _, c := range t.conns {
		_ = c.Close()
	}
	for _, s := range []*server{t.ours, t.python, t.sandboxd, t.bareGo} {
		if s != nil {
			s.stop()
		}
	}
}

// startTargets starts our sandbox-server (legacy contract, gRPC and REST
// on loopback), upstream's Python runtime and upstream's sandboxd, each
// with its own base directory under dir. A baseline that cannot run is
// left nil and explained in notes.
func (r *runner) startTargets(ctx context.Context, dir string) (*targets, error) {
	t := &targets{}
	ports := make([]int, 7)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	base := func(name string) string {
		d := filepath.Join(dir, name+"-base")
		_ = os.MkdirAll(d, 0o755)
		return d
	}
	var err error
	t.oursURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	t.oursREST = fmt.Sprintf("http://127.0.0.1:%d", ports[2])
	sf := runtimeserver.Defaults()
	sf.Addr = "127.0.0.1:" + strconv.Itoa(ports[0])
	sf.GRPCAddr = "127.0.0.1:" + strconv.Itoa(ports[1])
	sf.RESTAddr = "127.0.0.1:" + strconv.Itoa(ports[2])
	sf.BaseDir, sf.Home = base("ours"), filepath.Join(dir, "ours-home")
	// As the local backend runs it in every sandbox (bwrap.go): the
	// server's own Go runtime on one processor, its commands on the
	// machine's.
	sf.CommandGOMAXPROCS = int64(runtime.NumCPU())
	serverEnv := []string{"GOMAXPROCS=1"}
	t.ours, err = startServer(ctx, "sandbox-server", dir, t.oursURL+"/", serverEnv, r.bins["sandbox-server"], sf.Args()...)
	if err != nil {
		return nil, err
	}
	if t.bareGo, t.bareURL, err = startBareExec(ctx, dir, ports[6], serverEnv); err != nil {
		t.close()
		return nil, err
	}
	if t.oursGRPC, err = t.dial(ports[1]); err != nil {
		t.close()
		return nil, err
	}

	if slices.Contains(r.cfg.Baselines, BaselinePython) {
		r.startPython(ctx, t, ports[3], base("python"), dir)
	}
	if slices.Contains(r.cfg.Baselines, BaselineSandboxd) {
		if err := r.startSandboxd(ctx, t, ports[4], ports[5], base("sandboxd"), dir); err != nil {
			t.close()
			return nil, err
		}
	}
	return t, nil
}

// startPython starts upstream's Python runtime on port, or notes why not.
func (r *runner) startPython(ctx context.Context, t *targets, port int, base, dir string) {
	python, py, err := pythonRuntime(ctx)
	if err != nil {
		r.note("python runtime skipped: %v", err)
		return
	}
	t.pyURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	// uvicorn as upstream's Dockerfile runs it, but at log level info (one
	// access line per request, as ours logs one line per request) rather
	// than the Dockerfile's trace.
	t.python, err = startServer(ctx, "python-runtime", dir, t.pyURL+"/", []string{"SANDBOX_BASE_DIR=" + base},
		python, "-m", "uvicorn", "main:app", "--app-dir", py, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--log-level", "info")
	if err != nil {
		r.note("python runtime skipped: %v", err)
	}
}

// startSandboxd starts upstream's sandboxd (built once into the cache
// directory), or notes why not. The error is a failure to dial it.
func (r *runner) startSandboxd(ctx context.Context, t *targets, grpcPort, restPort int, base, dir string) error {
	bin, err := sandboxdBinary(ctx, r.cfg.CacheDir, r.logf)
	if err != nil {
		r.note("upstream sandboxd skipped: %v", err)
		return nil
	}
	t.sandboxdREST = fmt.Sprintf("http://127.0.0.1:%d", restPort)
	t.sandboxd, err = startServer(ctx, "sandboxd", dir, t.sandboxdREST+"/v1/health", nil, bin,
		"--listen-host", "127.0.0.1", "--grpc-port", strconv.Itoa(grpcPort), "--rest-port", strconv.Itoa(restPort), "--root-dir", base)
	if err != nil {
		r.note("upstream sandboxd skipped: %v", err)
		return nil
	}
	t.sandboxdGRPC, err = t.dial(grpcPort)
	return err
}

func (t *targets) dial(port int) (processv1.ProcessServiceClient, error) {
	conn, err := grpc.NewClient("passthrough:///127.0.0.1:"+strconv.Itoa(port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	t.conns = append(t.conns, conn)
	return processv1.NewProcessServiceClient(conn), nil
}

// serverSection measures the runtime servers.
func (r *runner) serverSection(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "bench-server-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	t, err := r.startTargets(ctx, dir)
	if err != nil {
		return err
	}
	defer t.close()

	// Idle memory first, before any large transfer grows a heap.
	time.Sleep(500 * time.Millisecond)
	mem := map[string]memory{}
	for _, s := range []*server{t.ours, t.python, t.sandboxd} {
		if s == nil {
			continue
		}
		v, err := s.memoryMiB()
		if err != nil {
			return fmt.Errorf("read the memory of %s: %w", s.name, err)
		}
		mem[s.name] = v
	}

	client := &http.Client{}
	n := r.cfg.Rounds * 10
	steps := []func() (time.Duration, error){
		func() (time.Duration, error) { return timed(bareExec) },
		func() (time.Duration, error) {
			return timed(func() error { return legacyExecute(ctx, client, t.oursURL) })
		},
		func() (time.Duration, error) {
			return timed(func() error { return legacyExecute(ctx, client, t.bareURL) })
		},
	}
	if t.python != nil {
		steps = append(steps, func() (time.Duration, error) {
			return timed(func() error { return legacyExecute(ctx, client, t.pyURL) })
		})
	}
	grpcIdx := len(steps)
	steps = append(steps, func() (time.Duration, error) { return timed(func() error { return grpcExecute(ctx, t.oursGRPC) }) })
	if t.sandboxdGRPC != nil {
		steps = append(steps, func() (time.Duration, error) { return timed(func() error { return grpcExecute(ctx, t.sandboxdGRPC) }) })
	}
	samples, err := interleaved(n, steps...)
	if err != nil {
		return err
	}
	// The process API runs in a companion the server starts on its first
	// connection: what a sandbox that streams commands pays, both summed.
	inUse, err := t.ours.memoryMiB()
	if err != nil {
		return fmt.Errorf("read the memory of sandbox-server and its companion: %w", err)
	}
	bare, ours, bareGo := samples[0].p50(), samples[1].p50(), samples[2].p50()
	r.add(Row{Section: "server", Figure: "/execute `true` round trip, p50", Ours: ms(ours),
		Baseline: "bare exec.Command(sh -c true).Run(): " + ms(bare), Ratio: ratio(ours, bare), Target: "<= 1.3"})
	r.add(Row{Section: "server", Figure: "/execute `true` round trip, p50", Ours: ms(ours),
		Baseline: "bare Go HTTP exec server: " + ms(bareGo), Ratio: ratio(ours, bareGo)})
	r.add(Row{Section: "server", Figure: "/execute `true`: a bare Go HTTP exec server's round trip, p50", Ours: ms(bareGo),
		Baseline: "bare exec.Command(sh -c true).Run(): " + ms(bare), Ratio: ratio(bareGo, bare)})
	if t.python != nil {
		py := samples[3].p50()
		r.add(Row{Section: "server", Figure: "/execute `true` round trip, p50", Ours: ms(ours),
			Baseline: "upstream python runtime: " + ms(py), Ratio: ratio(ours, py), Target: ">= 3x", Speedup: true})
		// What each server adds to the fork and exec both pay (which is
		// most of a round trip on a slow-forking VM): per round, its time
		// minus the bare exec's beside it.
		addOurs, addPy := added(samples[1], samples[0]).p50(), added(samples[3], samples[0]).p50()
		rat := math.NaN() // noise made one of them <= 0: no meaningful ratio
		if addOurs > 0 && addPy > 0 {
			rat = ratio(addOurs, addPy)
		}
		r.add(Row{Section: "server", Figure: "/execute `true`: time added to bare exec, p50 per round", Ours: ms(addOurs),
			Baseline: "upstream python runtime: " + ms(addPy), Ratio: rat, Speedup: true})
	}
	if t.sandboxdGRPC != nil {
		og, ug := samples[grpcIdx].p50(), samples[grpcIdx+1].p50()
		r.add(Row{Section: "server", Figure: "gRPC Execute `sh -c true`, p50", Ours: ms(og),
			Baseline: "upstream sandboxd: " + ms(ug), Ratio: ratio(og, ug), Speedup: og < ug})
	}

	if err := r.transfers(ctx, t, client); err != nil {
		return err
	}

	srv := mem["sandbox-server"]
	r.add(Row{Section: "server", Figure: "idle RSS", Ours: fmt.Sprintf("%.1f MiB", srv.RSS), Baseline: "target 10 MiB",
		Ratio: srv.RSS / 10, Target: "<= 1"})
	r.add(Row{Section: "server", Figure: "RSS after gRPC calls (server + sandbox-processapi)", Ours: fmt.Sprintf("%.1f MiB", inUse.RSS),
		Baseline: fmt.Sprintf("idle server alone: %.1f MiB", srv.RSS), Ratio: inUse.RSS / srv.RSS})
	labels := map[string]string{"python-runtime": "upstream python runtime", "sandboxd": "upstream sandboxd"}
	for _, name := range []string{"python-runtime", "sandboxd"} {
		if v, ok := mem[name]; ok {
			r.add(Row{Section: "server", Figure: "idle RSS", Ours: fmt.Sprintf("%.1f MiB", srv.RSS),
				Baseline: fmt.Sprintf("%s: %.1f MiB", labels[name], v.RSS), Ratio: srv.RSS / v.RSS})
		}
	}
	// What one more sandbox's server costs: its private pages (the
	// binary's file-backed pages are shared through the page cache).
	for _, name := range []string{"python-runtime", "sandboxd"} {
		if v, ok := mem[name]; ok {
			r.add(Row{Section: "server", Figure: "idle private memory (RssAnon)", Ours: fmt.Sprintf("%.1f MiB", srv.Anon),
				Baseline: fmt.Sprintf("%s: %.1f MiB", labels[name], v.Anon), Ratio: srv.Anon / v.Anon})
		}
	}
	return nil
}

// transfers measures 32 MiB uploads and downloads: the legacy contract
// against the Python runtime, the sandboxd REST API against upstream's.
func (r *runner) transfers(ctx context.Context, t *targets, client *http.Client) error {
	content := make([]byte, transferBytes)
	_, _ = rand.Read(content)
	n := max(r.cfg.Rounds, 3)
	type pair struct {
		what, label string
		ours, base  func() error
	}
	var pairs []pair
	if t.python != nil {
		pairs = append(pairs,
			pair{"upload 32 MiB (/upload)", "upstream python runtime",
				func() error { return multipartUpload(ctx, client, t.oursURL, content) },
				func() error { return multipartUpload(ctx, client, t.pyURL, content) }},
			pair{"download 32 MiB (/download)", "upstream python runtime",
				func() error { return download(ctx, client, t.oursURL+"/download/bench.bin") },
				func() error { return download(ctx, client, t.pyURL+"/download/bench.bin") }})
	}
	if t.sandboxd != nil {
		pairs = append(pairs,
			pair{"upload 32 MiB (PUT /v1/files)", "upstream sandboxd",
				func() error { return restPut(ctx, client, t.oursREST+"/v1/files/bench.bin", content) },
				func() error { return restPut(ctx, client, t.sandboxdREST+"/v1/files/bench.bin", content) }},
			pair{"download 32 MiB (GET /v1/files)", "upstream sandboxd",
				func() error { return download(ctx, client, t.oursREST+"/v1/files/bench.bin") },
				func() error { return download(ctx, client, t.sandboxdREST+"/v1/files/bench.bin") }})
	}
	if len(pairs) == 0 {
		// No baseline: still report ours, against nothing.
		pairs = append(pairs, pair{"upload 32 MiB (/upload)", "",
			func() error { return multipartUpload(ctx, client, t.oursURL, content) }, nil})
	}
	for _, p := range pairs {
		steps := []func() (time.Duration, error){func() (time.Duration, error) { return timed(p.ours) }}
		if p.base != nil {
			steps = append(steps, func() (time.Duration, error) { return timed(p.base) })
		}
		s, err := interleaved(n, steps...)
		if err != nil {
			return fmt.Errorf("%s: %w", p.what, err)
		}
		row := Row{Section: "server", Figure: p.what + ", p50", Ours: throughput(s[0].p50()), Ratio: math.NaN()}
		if p.base != nil {
			row.Baseline = p.label + ": " + throughput(s[1].p50())
			row.Ratio = ratio(s[0].p50(), s[1].p50())
			row.Speedup = row.Ratio < 1
		}
		r.add(row)
	}
	return nil
}

func throughput(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MB/s (%s)", float64(transferBytes)/d.Seconds()/1e6, ms(d))
}

func timed(fn func() error) (time.Duration, error) {
	start := time.Now()
	err := fn()
	return time.Since(start), err
}

func bareExec() error { return exec.Command("/bin/sh", "-c", "true").Run() }

func legacyExecute(ctx context.Context, c *http.Client, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/execute", bytes.NewReader([]byte(`{"command":"true"}`)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		ExitCode int `json:"exit_code"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.ExitCode != 0 {
		return fmt.Errorf("POST %s/execute: status %s, exit %d, %v", base, resp.Status, out.ExitCode, err)
	}
	return nil
}

func grpcExecute(ctx context.Context, c processv1.ProcessServiceClient) error {
	resp, err := c.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"/bin/sh", "-c", "true"}}})
	if err != nil {
		return fmt.Errorf("gRPC Execute: %w", err)
	}
	if resp.GetExitCode() != 0 {
		return fmt.Errorf("gRPC Execute: exit %d: %s", resp.GetExitCode(), resp.GetStderr())
	}
	return nil
}

func multipartUpload(ctx context.Context, c *http.Client, base string, content []byte) error {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if _, err := mw.CreateFormFile("file", "bench.bin"); err != nil {
		return err
	}
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	body := io.MultiReader(bytes.NewReader(head.Bytes()), bytes.NewReader(content), bytes.NewReader([]byte(tail)))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/upload", body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.ContentLength = int64(head.Len() + len(content) + len(tail))
	return expectOK(c.Do(req))
}

func restPut(ctx context.Context, c *http.Client, url string, content []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(content))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	return expectOK(c.Do(req))
}

func download(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || n != transferBytes {
		return fmt.Errorf("GET %s: status %s, %d bytes, %v", url, resp.Status, n, err)
	}
	return nil
}

func expectOK(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", resp.Request.Method, resp.Request.URL, resp.Status, body)
	}
	return nil
}
