package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/hostleaks"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The mcp-load section: the built mcp-server over Streamable HTTP under
// Config.MCPSessions MCP sessions at once (issue 27), each with a sandbox
// of its own, each making calls: run_go_code of new code, then
// list_files. Every call must succeed; then the sessions end, the server
// is stopped by SIGTERM, and the host must hold nothing of its sandboxes
// (hostleaks: processes, cgroups, mounts, loop devices, uid leases,
// directories, spare disks), or the section fails. The server's state
// directory must not be shared with another running backend.

// DefaultMCPSessions is how many MCP sessions the mcp-load section runs
// at once.
const DefaultMCPSessions = 200

// mcpLoadLeakWait bounds how long the host may take to free everything
// after the server exited.
const mcpLoadLeakWait = 20 * time.Second

// mcpLoadSection measures the mcp-load section.
func (r *runner) mcpLoadSection(ctx context.Context) error {
	n := r.cfg.MCPSessions
	stateDir := r.cfg.StateDir
	if stateDir == "" {
		d, err := local.DefaultStateDir()
		if err != nil {
			return err
		}
		stateDir = d
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	mport, err := freePort()
	if err != nil {
		return err
	}
	logDir, err := os.MkdirTemp("", "bench-mcp-load-")
	if err != nil {
		return err
	}
	keepLog := false // a failed run keeps the server's log for its error to name
	defer func() {
		if !keepLog {
			os.RemoveAll(logDir)
		}
	}()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	begun := time.Now()
	srv, err := startServer(ctx, "mcp-server", logDir, "http://127.0.0.1:"+strconv.Itoa(mport)+"/healthz", nil, r.bins["mcp-server"],
		"--http="+addr, "--metrics-addr=127.0.0.1:"+strconv.Itoa(mport), "--state-dir="+stateDir, "--log-level=warn",
		"--max-sandboxes="+strconv.Itoa(n), "--max-connections="+strconv.Itoa(3*n+16))
	if err != nil {
		return err
	}
	defer srv.stop() // after a clean stop, a no-op

	r.logf("mcp-load: %d MCP sessions at once over HTTP (load %.1f)", n, loadAvg())
	start := time.Now()
	var (
		mu       sync.Mutex
		runs     durations // run_go_code
		lists    durations // list_files
		failures []string
		recs     []hostleaks.Sandbox
	)
	sessions := make([]*mcp.ClientSession, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cs, d, err := loadSession(ctx, "http://"+addr+"/mcp", i)
			mu.Lock()
			defer mu.Unlock()
			sessions[i] = cs
			if len(d) > 0 {
				runs = append(runs, d[0])
			}
			if len(d) > 1 {
				lists = append(lists, d[1])
			}
			if err != nil {
				failures = append(failures, fmt.Sprintf("session %d: %v", i, err))
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	// Every session's sandbox is live now: record them (and the pool's)
	// for the leak check; not what an earlier process left (a killed
	// server's half-made sandbox waits for a later prune).
	if entries, err := os.ReadDir(stateDir + "/sandboxes"); err == nil {
		for _, e := range entries {
			if info, err := e.Info(); err != nil || info.ModTime().Before(begun) {
				continue
			}
			if rec, err := hostleaks.Record(stateDir + "/sandboxes/" + e.Name()); err == nil {
				recs = append(recs, rec)
			}
		}
	}
	live := len(recs)
	for _, cs := range sessions {
		if cs != nil {
			_ = cs.Close()
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d of %d sessions failed (server log %s): %s", len(failures), n, tailFile(srv.log, 800), strings.Join(failures[:min(len(failures), 5)], "; "))
	}

	// A clean stop: the server closes every sandbox and the pool, and as
	// the state directory's last user removes its spare disks.
	_ = syscall.Kill(srv.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-srv.done:
	case <-time.After(time.Minute):
		return fmt.Errorf("mcp-server did not exit within a minute of SIGTERM: %s", tailFile(srv.log, 800))
	}
	var left []string
	for deadline := time.Now().Add(mcpLoadLeakWait); ; time.Sleep(100 * time.Millisecond) {
		if left = hostleaks.Find(stateDir, recs, false); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		keepLog = true
		return fmt.Errorf("after mcp-server exited, the host still holds %d things of its sandboxes: %s (server log %s)", len(left), strings.Join(left[:min(len(left), 10)], "; "), srv.log)
	}
	r.add(Row{Section: "mcp-load", Figure: fmt.Sprintf("%d MCP sessions at once over HTTP, each run_go_code (new code) + list_files: all ok, wall time", n),
		Ours: seconds(took), Ratio: math.NaN()})
	r.add(Row{Section: "mcp-load", Figure: "run_go_code (`go run .` of new code) under that load, p50 / p99", Ours: ms(runs.p50()) + " / " + ms(runs.pct(99)), Ratio: math.NaN()})
	r.add(Row{Section: "mcp-load", Figure: "list_files under that load, p50 / p99", Ours: ms(lists.p50()) + " / " + ms(lists.pct(99)), Ratio: math.NaN()})
	r.note("mcp-load: %d sandboxes were live at the peak (the sessions' and the warm pool's); after SIGTERM the host held nothing of them", live)
	return nil
}

// loadSession opens MCP session i on endpoint and makes its calls,
// returning the session (for the caller to close) and each call's time,
// in order: run_go_code, list_files.
func loadSession(ctx context.Context, endpoint string, i int) (*mcp.ClientSession, []time.Duration, error) {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench-load", Version: "0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	files := map[string]string{}
	for p, c := range smallModule(9000 + i) {
		files[p] = c
	}
	var took []time.Duration
	for _, call := range []mcp.CallToolParams{
		// 200 builds at once share the CPUs: minutes, not the default timeout.
		{Name: "run_go_code", Arguments: map[string]any{"files": files, "command": "go run .", "timeout_seconds": 600}},
		{Name: "list_files", Arguments: map[string]any{}},
	} {
		start := time.Now()
		res, err := cs.CallTool(ctx, &call)
		took = append(took, time.Since(start))
		if err != nil {
			return cs, took, fmt.Errorf("%s: %w", call.Name, err)
		}
		if res.IsError {
			data, _ := json.Marshal(res.Content)
			return cs, took, fmt.Errorf("%s: an error result %s", call.Name, data)
		}
	}
	return cs, took, nil
}
