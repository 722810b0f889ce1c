package local_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// allowedModule is a small real module the allowlisted sandbox downloads;
// refusedPackage is one outside the allowlist.
const (
	allowedModule  = "golang.org/x/sync"
	allowedVersion = "v0.7.0"
	refusedPackage = "github.com/google/go-cmp/cmp"
)

// emptyModCache returns a fresh host module cache that the test can
// remove (the go command makes module directories read-only).
func emptyModCache(t *testing.T) string {
	dir := t.TempDir()
	t.Cleanup(func() {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
	})
	return dir
}

// requireModuleProxy skips the test when this host cannot download the
// allowed module through its own GOPROXY: modules on demand fetch on the
// host, so without that there is nothing to test.
func requireModuleProxy(t *testing.T) {
	t.Helper()
	if p := moduleProxyProblem(t); p != "" {
		t.Skip(p)
	}
}

// moduleProxyProblem says why this host cannot download the allowed
// module through its own GOPROXY, or "".
func moduleProxyProblem(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", allowedModule+"@"+allowedVersion)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOMODCACHE="+emptyModCache(t), "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		proxy, _ := exec.Command("go", "env", "GOPROXY").Output()
		return fmt.Sprintf("SKIP: this host cannot download %s@%s through its GOPROXY (%s): %v\n%s\n"+
			"modules on demand fetch on the host, so this test needs the host to reach a module proxy",
			allowedModule, allowedVersion, strings.TrimSpace(string(proxy)), err, out)
	}
	return ""
}

// TestModulesOnDemand: with AllowModules, a sandbox without a network
// downloads an allowlisted module through the host's module proxy (into
// the host module cache), cannot reach the network itself, and a module
// outside the allowlist is refused with an error naming the pattern to
// add. A module already in the host cache still resolves offline.
func TestModulesOnDemand(t *testing.T) {
	requireModuleProxy(t)
	modCache := emptyModCache(t)
	opts := testOptions()
	opts.ModCache = modCache
	opts.AllowModules = []string{allowedModule}
	b := newBackend(t, opts)
	s := openSession(t, b)

	res := run(t, s, goruntime.Request{
		Files: files(
			"go.mod", "module example.com/m\n\ngo 1.22\n\nrequire "+allowedModule+" "+allowedVersion+"\n",
			"main.go", "package main\n\nimport (\n\t\"fmt\"\n\n\t\"golang.org/x/sync/errgroup\"\n)\n\n"+
				"func main() {\n\tvar g errgroup.Group\n\tg.Go(func() error { return nil })\n\tfmt.Println(\"errgroup:\", g.Wait())\n}\n",
		),
		Command: "go run .",
	})
	if res.ExitCode != 0 || res.Stdout != "errgroup: <nil>\n" {
		t.Fatalf("allowlisted module: exit %d, outcome %s\nstdout: %s\nstderr: %s", res.ExitCode, res.Outcome, res.Stdout, res.Stderr)
	}
	zip := filepath.Join(modCache, "cache", "download", allowedModule, "@v", allowedVersion+".zip")
	if _, err := os.Stat(zip); err != nil {
		t.Errorf("the host module cache has no %s: the module did not come through the host proxy: %v", zip, err)
	}
	// go.sum was written from what the proxy served.
	if r := mustOK(t, s, goruntime.Request{Command: "grep -c '^" + allowedModule + " " + allowedVersion + "' go.sum"}); strings.TrimSpace(r.Stdout) != "2" {
		t.Errorf("go.sum lines for %s: %q", allowedModule, r.Stdout)
	}

	// The sandbox itself has no network: the public proxy is unreachable.
	res = run(t, s, goruntime.Request{Command: "GOPROXY=https://proxy.golang.org GOMODCACHE=/tmp/mc go mod download " + allowedModule + "@v0.6.0"})
	if res.ExitCode == 0 {
		t.Errorf("the sandbox reached https://proxy.golang.org itself: %s", res.Stdout)
	}

	// From inside, the relay and the host proxy refuse what is not a
	// module proxy request for an allowed module.
	res = run(t, s, goruntime.Request{
		Files:   files("probe/main.go", probeProgram),
		Command: "go run ./probe",
	})
	wantProbe := "404 /github.com/google/go-cmp/@v/list\n" +
		"400 /golang.org/x/sync/@v/..%2f..%2f..%2f..%2fetc%2fpasswd.info\n" +
		"400 /golang.org/x/sync/@v/../../../../etc/passwd\n" +
		"400 /golang.org/x/../../etc/@v/list\n" +
		"400 /golang.org/x/sync/@v/v0.7.zip\n" +
		"405 POST /golang.org/x/sync/@v/list\n"
	if res.Stdout != wantProbe {
		t.Errorf("probes from inside the sandbox:\n%s\nwant:\n%s\nstderr: %s", res.Stdout, wantProbe, res.Stderr)
	}

	// A module outside the allowlist: the error names the pattern to add.
	res = run(t, s, goruntime.Request{
		Files: files(
			"go.mod", "module example.com/m\n\ngo 1.22\n",
			"main.go", "package main\n\nimport (\n\t\"fmt\"\n\n\t\""+refusedPackage+"\"\n)\n\nfunc main() { fmt.Println(cmp.Equal(1, 1)) }\n",
		),
		Command: "go run .",
	})
	if res.ExitCode == 0 {
		t.Fatalf("module outside the allowlist was served: %s", res.Stdout)
	}
	for _, want := range []string{"not in this sandbox's module allowlist", "add a pattern: github.com/google/go-cmp (local.Options.AllowModules)", "(allowed: " + allowedModule + ")"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("refusal does not say %q:\n%s", want, res.Stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(modCache, "cache", "download", "github.com", "google")); err == nil {
		t.Errorf("the refused module reached the host module cache")
	}
	t.Logf("refusal as the sandbox's go command prints it:\n%s", res.Stderr)

	// Once the host cache has it (put there on the host), the same module
	// resolves offline from the read-only cache, as without an allowlist:
	// refusals are "not found" to the go command, so its search over the
	// import path's prefixes goes on to the cache.
	hostDownload(t, modCache, "github.com/google/go-cmp@v0.7.0")
	res = run(t, s, goruntime.Request{Command: "go run ."})
	if res.ExitCode != 0 || res.Stdout != "true\n" {
		t.Errorf("module in the host cache, outside the allowlist: exit %d\nstdout: %s\nstderr: %s", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// hostDownload puts mod@version into the host module cache modCache with
// the host's go command and network.
func hostDownload(t *testing.T, modCache, modVersion string) {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", modVersion)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOMODCACHE="+modCache, "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("host go mod download %s: %v\n%s", modVersion, err, out)
	}
}

// probeProgram sends requests to the module relay from inside a sandbox
// and prints each answer's status.
const probeProgram = `package main

import (
	"fmt"
	"net"
	"net/http"
	"bufio"
)

func main() {
	for _, p := range []string{
		"/github.com/google/go-cmp/@v/list",
		"/golang.org/x/sync/@v/..%2f..%2f..%2f..%2fetc%2fpasswd.info",
		"/golang.org/x/sync/@v/../../../../etc/passwd",
		"/golang.org/x/../../etc/@v/list",
		"/golang.org/x/sync/@v/v0.7.zip",
	} {
		// Raw HTTP, so that the path goes out exactly as written.
		c, err := net.Dial("tcp", "127.0.0.1:7079")
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", p)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			panic(err)
		}
		fmt.Println(resp.StatusCode, p)
		c.Close()
	}
	resp, err := http.Post("http://127.0.0.1:7079/golang.org/x/sync/@v/list", "text/plain", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.StatusCode, "POST /golang.org/x/sync/@v/list")
}
`

// TestModulesOnDemandAfterAttach: a sandbox left running by a process
// that exited (its module proxy socket with nobody behind it) gets the
// proxy again from the process that attaches it.
func TestModulesOnDemandAfterAttach(t *testing.T) {
	requireModuleProxy(t)
	modCache := emptyModCache(t)
	id := helper(t, "disconnect", "LOCAL_TEST_ALLOW_MODULES="+allowedModule, "LOCAL_TEST_MODCACHE="+modCache)
	opts := testOptions()
	opts.ModCache = modCache
	opts.AllowModules = []string{allowedModule}
	b := newBackend(t, opts)
	s, err := goruntime.Attach(context.Background(), b, id, goruntime.Options{})
	if err != nil {
		t.Fatalf("attach %s: %v", id, err)
	}
	defer s.Close(context.Background())
	res := run(t, s, goruntime.Request{Command: "go mod download -json " + allowedModule + "@" + allowedVersion})
	if res.ExitCode != 0 {
		t.Fatalf("download after attach: exit %d\nstdout: %s\nstderr: %s", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// TestModulesOnDemandOptions: the allowlist is checked by New, and is
// refused together with Network.
func TestModulesOnDemandOptions(t *testing.T) {
	for _, o := range []local.Options{
		{AllowModules: []string{"github.com/foo/["}},
		{AllowModules: []string{""}},
		{AllowModules: []string{"a.com,b.com"}},
		{AllowModules: []string{"golang.org/x/text"}, Network: true},
	} {
		opts := testOptions()
		opts.AllowModules, opts.Network = o.AllowModules, o.Network
		if _, err := local.New(opts); err == nil || !strings.Contains(err.Error(), "Options.AllowModules") {
			t.Errorf("New(AllowModules %q, Network %v) = %v; want an error naming Options.AllowModules", o.AllowModules, o.Network, err)
		}
	}
}
