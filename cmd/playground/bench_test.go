package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/mcpserver"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/playground"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The program both front ends run: go.dev/play's hello world, as a
// module (no go.mod to make).
const (
	benchMain  = "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"Hello, 世界\")\n}\n"
	benchGoMod = "module hello\n\ngo 1.24\n"
)

// BenchmarkFirstByte: Run → the first byte of hello world's output in
// the playground (the page's API, streamed) against the whole answer of
// the same program through MCP run_go_code, side by side on one local
// backend, each in its own warm sandbox. playground/mcp is the ratio
// (the target: ≤ 1.1).
func BenchmarkFirstByte(b *testing.B) {
	requireBwrap(b)
	ctx := context.Background()
	backend, err := local.New(local.Options{Relax: localtest.Here()})
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Close(ctx)

	cfg := playground.Defaults()
	cfg.Backend = backend
	cfg.ShareDir = b.TempDir()
	pg, err := playground.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close(ctx)
	ts := httptest.NewServer(pg.Handler())
	defer ts.Close()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	if res, err := client.Get(ts.URL + "/"); err != nil {
		b.Fatal(err)
	} else {
		res.Body.Close()
	}
	body, _ := json.Marshal(map[string]string{"files": "-- go.mod --\n" + benchGoMod + "-- main.go --\n" + benchMain})
	viaPlayground := func() {
		req, _ := http.NewRequest("POST", ts.URL+"/api/run", strings.NewReader(string(body)))
		req.Header.Set("Origin", ts.URL)
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), `{"kind":"stdout"`) {
				if !strings.Contains(sc.Text(), "Hello") {
					b.Fatalf("first output %s", sc.Text())
				}
				return // the first byte is here; the rest is not timed
			}
			if strings.HasPrefix(sc.Text(), `{"kind":"done"`) || strings.HasPrefix(sc.Text(), `{"kind":"error"`) {
				b.Fatalf("the run ended without output: %s", sc.Text())
			}
		}
		b.Fatalf("the answer ended without output: %v", sc.Err())
	}

	ms, err := mcpserver.New(mcpserver.Config{Backend: backend})
	if err != nil {
		b.Fatal(err)
	}
	defer ms.Close(ctx)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := ms.MCP().Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"files": map[string]string{"go.mod": benchGoMod, "main.go": benchMain}, "command": "go run ."}
	viaMCP := func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_go_code", Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("run_go_code: %v %+v", err, res)
		}
	}

	// Each opens its sandbox and fills its build cache before timing.
	viaPlayground()
	viaMCP()
	var pgTime, mcpTime time.Duration
	for b.Loop() {
		t0 := time.Now()
		viaPlayground()
		t1 := time.Now()
		viaMCP()
		pgTime += t1.Sub(t0)
		mcpTime += time.Since(t1)
	}
	b.ReportMetric(float64(pgTime.Microseconds())/1000/float64(b.N), "playground-first-byte-ms/op")
	b.ReportMetric(float64(mcpTime.Microseconds())/1000/float64(b.N), "mcp-ms/op")
	b.ReportMetric(float64(pgTime)/float64(mcpTime), "playground/mcp")
}

// BenchmarkPageReady: loading the page until it is ready to run (its
// files shown, the Go versions listed by the session's sandbox), as a
// returning visitor (the session and its open sandbox kept), against
// loading one of the page's own assets alone (ready/asset is the ratio).
// A first visit adds the sandbox's open (the local backend's warm pool).
func BenchmarkPageReady(b *testing.B) {
	requireBwrap(b)
	ctx := newBrowser(b)
	url := startPlayground(b)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		b.Fatal(err)
	}
	ready := func() {
		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			b.Fatal(err)
		}
		// A loop of evaluations, not Poll: Poll can ask the page that
		// the navigation replaced.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.body !== null && document.body.dataset.ready === "1"`))
			if err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("page not ready after 2 minutes (last error: %v)", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	assets := func() {
		if err := chromedp.Do(ctx, chromedp.Navigate(url+"static/style.css")); err != nil {
			b.Fatal(err)
		}
	}
	ready()
	var readyTime, assetTime time.Duration
	for b.Loop() {
		t0 := time.Now()
		ready()
		t1 := time.Now()
		assets()
		readyTime += t1.Sub(t0)
		assetTime += time.Since(t1)
	}
	b.ReportMetric(float64(readyTime.Microseconds())/1000/float64(b.N), "ready-ms/op")
	b.ReportMetric(float64(assetTime.Microseconds())/1000/float64(b.N), "asset-ms/op")
	b.ReportMetric(float64(readyTime)/float64(assetTime), "ready/asset")
}
