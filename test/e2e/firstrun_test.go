//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

// testSeedCacheFirstGoRun checks that the seed-cache init container filled
// the pod's /cache with the image's prebuilt standard library (fmt is not
// stale), then times the first and second `go run` of a hello world in the
// freshly claimed pod, and where a first build's time goes (buildParts).
//
// The runs are timed once the node is quiet (waitNodeQuiet): the claim's
// replacement pod, which the pool starts at once, is Ready and no pod is
// starting or stopping. On the two-CPU e2e node a replacement's start (the
// seed copy, and under gVisor the sandbox's boot) otherwise runs beside the
// measured `go run`, and the figure is the refill's more than the runtime's
// (a gVisor pod's start costs more than a runc pod's, so the two runtimes
// would not be compared on equal terms).
func testSeedCacheFirstGoRun(t *testing.T, rt *runtimeTarget) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb := openSandbox(ctx, t, rt, modes[1])
	start := time.Now()
	waitNodeQuiet(ctx, t, rt)
	t.Logf("%s: node quiet (pool refilled, no pod starting or stopping) %v after the claim", rt.name, time.Since(start).Round(time.Millisecond))
	sess := goruntime.NewSession(sb, goruntime.Options{})
	stale := mustExec(ctx, t, sb, "go list -f '{{.ImportPath}} stale={{.Stale}}' fmt os strconv")
	if stale.ExitCode != 0 || strings.Contains(stale.Stdout, "stale=true") || !strings.Contains(stale.Stdout, "fmt stale=false") {
		t.Errorf("the pod's build cache does not hold the standard library (seed-cache init container):\n%s%s", stale.Stdout, stale.Stderr)
	}
	first, second := timeGoRun(ctx, t, sess)
	recordFirstGoRun(t, rt.name, first, second)
	reportBuildParts(ctx, t, rt.name, sb)
	reportSyscallCosts(ctx, t, rt.name, sb)
	checkImageTest2json(ctx, t, rt.name, sess)
	if tel := mustExec(ctx, t, sb, "go env GOTELEMETRY"); strings.TrimSpace(tel.Stdout) != "off" {
		t.Errorf("%s: go env GOTELEMETRY = %q (%s); want off (the template's SANDBOX_GO_TELEMETRY)", rt.name, tel.Stdout, tel.Stderr)
	}
}

// checkImageTest2json runs the pod's first go test and checks that its
// per-test results came without a test2json of the session's own: the
// image's build ($GORUNTIME_TEST2JSON, root's on the read-only root file
// system) is there, out of the commands' reach, and none was built under
// HOME (pkg/goruntime's test2jsonBin).
func checkImageTest2json(ctx context.Context, t *testing.T, name string, sess *goruntime.Session) {
	t.Helper()
	files := append(slices.Clone(helloFiles), goruntime.File{Path: "hello_test.go", Data: []byte("package main\n\nimport \"testing\"\n\nfunc TestHello(t *testing.T) {}\n")})
	res, err := sess.Execute(ctx, goruntime.Request{Files: files, Command: "go test -v ./..."})
	if err != nil {
		t.Fatalf("%s: first go test: %v", name, err)
	}
	if res.ExitCode != 0 || len(res.Tests) != 1 || res.Tests[0].Name != "TestHello" || res.Tests[0].Status != goruntime.TestPass {
		t.Fatalf("%s: first go test: exit %d, per-test results %+v, stdout %q, stderr %q", name, res.ExitCode, res.Tests, res.Stdout, res.Stderr)
	}
	probe, err := sess.Execute(ctx, goruntime.Request{Command: `test -x "$GORUNTIME_TEST2JSON" && test ! -w "$GORUNTIME_TEST2JSON" && test ! -e "$HOME/.cache/go-runtime-sandbox/test2json" && echo image`})
	if err != nil {
		t.Fatalf("%s: look for test2json: %v", name, err)
	}
	if strings.TrimSpace(probe.Stdout) != "image" {
		t.Errorf("%s: the first go test's results did not come from the image's test2json: $GORUNTIME_TEST2JSON missing, writable, or a test2json built under HOME (exit %d, %q)", name, probe.ExitCode, probe.Stderr)
	}
}

// waitNodeQuiet waits until rt's namespace holds its full warm pool plus
// the one claimed pod, every pod of the cluster is Ready (or done), and
// none is being deleted.
func waitNodeQuiet(ctx context.Context, t *testing.T, rt *runtimeTarget) {
	t.Helper()
	want := waitPoolReady(ctx, t, rt.ns, agentsandbox.DefaultWarmPool, 0) + 1
	var last string
	for {
		pods, err := shared.c.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err == nil {
			var mine int
			var busy []string
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Namespace == rt.ns && p.Labels["app"] != "sandbox-router" {
					mine++
				}
				if p.DeletionTimestamp != nil || (!podReady(p) && p.Status.Phase != corev1.PodSucceeded) {
					busy = append(busy, p.Namespace+"/"+p.Name)
				}
			}
			if len(busy) == 0 && int32(mine) >= want {
				return
			}
			last = fmt.Sprintf("%d of %d sandbox pods in %s; starting or stopping: %v", mine, want, rt.ns, busy)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node not quiet: %s", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// helloFiles is the program the first-go-run numbers are taken with.
var helloFiles = []goruntime.File{
	{Path: "go.mod", Data: []byte("module hello\n\ngo 1.26\n")},
	{Path: "main.go", Data: []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n")},
}

// timeGoRun runs the hello world twice and returns the server-measured
// duration of each.
func timeGoRun(ctx context.Context, t *testing.T, sess *goruntime.Session) (first, second time.Duration) {
	t.Helper()
	for i, d := range []*time.Duration{&first, &second} {
		res, err := sess.Execute(ctx, goruntime.Request{Files: helloFiles, Command: "go run ."})
		if err != nil {
			t.Fatalf("go run #%d: %v", i+1, err)
		}
		if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "hello" {
			t.Fatalf("go run #%d: exit %d, stdout %q, stderr %q", i+1, res.ExitCode, res.Stdout, res.Stderr)
		}
		*d = res.Duration
	}
	return first, second
}

// buildPartsScript builds a program not built before in the sandbox (new
// code, the standard library from the build cache), timing each step by
// the sandbox's clock, and prints the go command's action graph (compile
// and link, each with its start and end) after a "---" line.
const buildPartsScript = `set -e
d=$(mktemp -d)
cd "$d"
printf 'module parts\n\ngo 1.26\n' >go.mod
printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("parts") }\n' >main.go
t0=$(date +%s%N); go env GOROOT >/dev/null
t1=$(date +%s%N); go list -deps . >/dev/null
t2=$(date +%s%N); go build -debug-actiongraph="$d/graph.json" -o "$d/parts" .
t3=$(date +%s%N); "$d/parts" >/dev/null
t4=$(date +%s%N)
echo "env $((t1 - t0))"
echo "list $((t2 - t1))"
echo "build $((t3 - t2))"
echo "run $((t4 - t3))"
echo "cachefiles $(find "$(go env GOCACHE)" -type f | wc -l)"
echo ---
cat "$d/graph.json"
rm -rf "$d"
`

// buildAction is the part of the go command's -debug-actiongraph output
// buildParts reads.
type buildAction struct {
	Mode, Package       string
	TimeStart, TimeDone time.Time
}

// reportBuildParts runs buildPartsScript in sb and reports where a first
// build's time goes, for comparing the places: the go command's start
// (go env), loading the package graph (go list -deps: the standard
// library's sources are read), and the build: the compile of the new
// package, the link, and the rest (loading again, hashing the
// dependencies' sources for their cache keys, cache lookups).
func reportBuildParts(ctx context.Context, t *testing.T, place string, sb goruntime.Sandbox) {
	t.Helper()
	res, err := sb.Exec(ctx, goruntime.ExecRequest{Command: "bash -c '" + strings.ReplaceAll(buildPartsScript, "'", `'\''`) + "'", Timeout: 2 * time.Minute})
	if err != nil {
		t.Errorf("build parts (%s): %v", place, err)
		return
	}
	if res.ExitCode != 0 {
		t.Errorf("build parts (%s): exit %d, stderr %q", place, res.ExitCode, res.Stderr)
		return
	}
	head, graph, ok := strings.Cut(res.Stdout, "---\n")
	if !ok {
		t.Errorf("build parts (%s): no action graph in %q", place, res.Stdout)
		return
	}
	steps, err := keyValues(head)
	if err != nil {
		t.Errorf("build parts (%s): %v", place, err)
		return
	}
	var actions []buildAction
	if err := json.Unmarshal([]byte(graph), &actions); err != nil {
		t.Errorf("build parts (%s): action graph: %v", place, err)
		return
	}
	var compile, link time.Duration
	for _, a := range actions {
		if a.TimeStart.IsZero() || a.TimeDone.IsZero() {
			continue
		}
		switch {
		case a.Mode == "build" && a.Package == "parts":
			compile += a.TimeDone.Sub(a.TimeStart)
		case a.Mode == "link":
			link += a.TimeDone.Sub(a.TimeStart)
		}
	}
	ms := func(ns int64) int64 { return ns / 1e6 }
	build := time.Duration(steps["build"])
	report(t, "first-build-parts-"+place, "first build parts (%s, new code, ms): go env %d, go list -deps %d, go build %d (compile %d, link %d, the rest %d), run %d; build cache %d files",
		place, ms(steps["env"]), ms(steps["list"]), build.Milliseconds(), compile.Milliseconds(), link.Milliseconds(),
		(build - compile - link).Milliseconds(), ms(steps["run"]), steps["cachefiles"])
}

// keyValues parses a script's "name number" lines.
func keyValues(out string) (map[string]int64, error) {
	m := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %q", sc.Text())
		}
		m[k] = n
	}
	return m, nil
}
