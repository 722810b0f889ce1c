package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procgroup"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Go toolchains other than the one at GoRoot: golang.org/toolchain
// modules in the host module cache (ModCache), extracted and marked
// executable by ToolchainStore.Provision. The module cache is bound read-only
// into every sandbox at /go/pkg/mod, so a command asking for one runs
// /go/pkg/mod/golang.org/toolchain@v0.0.1-<version>.<os>-<arch>/bin/go
// directly: nothing is downloaded or unpacked in the sandbox.

var _ goruntime.ToolchainSandbox = (*Sandbox)(nil)

// toolchainModule is the module version of a toolchain for this platform.
func toolchainModule(version string) string {
	return "v0.0.1-" + version + "." + runtime.GOOS + "-" + runtime.GOARCH
}

func toolchainDir(modCache, version string) string {
	return filepath.Join(modCache, "golang.org", "toolchain@"+toolchainModule(version))
}

// Toolchains returns the Go version at GoRoot and the provisioned others.
func (s *Sandbox) Toolchains(ctx context.Context) (string, []string, error) {
	return s.b.Toolchains()
}

// ToolchainEnv puts version's go first on PATH (GOTOOLCHAIN=local: it
// runs as it is).
func (s *Sandbox) ToolchainEnv(version string) map[string]string {
	bin := modCacheRO + "/golang.org/toolchain@" + toolchainModule(version) + "/bin"
	return map[string]string{
		"PATH":        bin + ":/usr/local/bin:/usr/bin:/bin",
		"GOTOOLCHAIN": "local",
	}
}

// ToolchainStore lists and provisions the toolchains of the host's Go and
// module cache. It runs no sandbox, so it needs none of the sandboxes'
// protections: cmd/toolchains works where the backend could not start
// (as a user without cgroups, say). A Backend's Toolchains and
// ProvisionToolchain use the same one.
type ToolchainStore struct {
	goroot, modCache, hostProxy, hostSumDB string
}

// NewToolchainStore finds the host's Go and module cache as New does
// (opts.GoRoot, opts.ModCache, else the go command's).
func NewToolchainStore(opts Options) (*ToolchainStore, error) {
	b := &Backend{opts: opts.withDefaults()}
	b.host.opts = &b.opts
	if err := b.host.findGo(); err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	return b.toolchainStore(), nil
}

func (b *Backend) toolchainStore() *ToolchainStore {
	return &ToolchainStore{goroot: b.host.goroot, modCache: b.host.modCache, hostProxy: b.host.hostProxy, hostSumDB: b.host.hostSumDB}
}

// Toolchains returns the Go version at GoRoot ("go1.26.8") and the
// versions provisioned in the module cache, sorted.
func (b *Backend) Toolchains() (string, []string, error) { return b.toolchainStore().List() }

// ProvisionToolchain provisions Go version into the backend's host module
// cache (ToolchainStore.Provision).
func (b *Backend) ProvisionToolchain(ctx context.Context, version string, progress io.Writer) error {
	return b.toolchainStore().Provision(ctx, version, progress)
}

// List returns the Go version at GoRoot ("go1.26.8") and the versions
// provisioned in the module cache, sorted.
func (b *ToolchainStore) List() (string, []string, error) {
	current, err := goVersion(b.goroot)
	if err != nil {
		return "", nil, err
	}
	suffix := "." + runtime.GOOS + "-" + runtime.GOARCH
	matches, err := filepath.Glob(filepath.Join(b.modCache, "golang.org", "toolchain@v0.0.1-go*"+suffix))
	if err != nil {
		return "", nil, err
	}
	var others []string
	for _, m := range matches {
		v := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m), "toolchain@v0.0.1-"), suffix)
		fi, err := os.Stat(filepath.Join(m, "bin", "go"))
		if err != nil || fi.Mode()&0o111 == 0 || v == current {
			continue // not provisioned completely (see ProvisionToolchain)
		}
		others = append(others, v)
	}
	slices.SortFunc(others, compareGoVersions)
	return current, others, nil
}

func goVersion(goroot string) (string, error) {
	data, err := os.ReadFile(filepath.Join(goroot, "VERSION"))
	if err != nil {
		return "", fmt.Errorf("read Go version: %w", err)
	}
	v, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimSpace(v), nil
}

// Provision downloads Go version (e.g. "1.25.9") as the
// golang.org/toolchain module into the host module cache and
// unpacks it there, through the host's GOPROXY (needs network once).
// Sandboxes then run it offline (Request.GoVersion). It runs the host's
// go with GOTOOLCHAIN=<version> (which fetches, verifies against the
// checksum database, unpacks and marks the binaries executable) and
// writes the go command's progress to progress.
func (b *ToolchainStore) Provision(ctx context.Context, version string, progress io.Writer) error {
	v, err := goruntime.NormalizeGoVersion(version)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "toolchain-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, filepath.Join(b.goroot, "bin", "go"), "version")
	cmd.Dir = dir // no go.mod: only GOTOOLCHAIN decides
	cmd.Env = append(os.Environ(),
		"GOTOOLCHAIN="+v, "GOMODCACHE="+b.modCache, "GOPROXY="+b.hostProxy, "GOFLAGS=", "GOWORK=off")
	if b.hostSumDB != "" {
		cmd.Env = append(cmd.Env, "GOSUMDB="+b.hostSumDB)
	}
	cmd.Stdout, cmd.Stderr = progress, progress
	// A download can take minutes: it must not outlive a killed caller.
	if err := procgroup.Run(cmd); err != nil {
		return fmt.Errorf("provision Go %s into %s (GOPROXY=%s): %w", v, b.modCache, b.hostProxy, err)
	}
	if _, err := os.Stat(filepath.Join(toolchainDir(b.modCache, v), "bin", "go")); err != nil {
		return fmt.Errorf("provision Go %s: %w", v, err)
	}
	return nil
}

// compareGoVersions orders "go1.9" < "go1.25.9" < "go1.26rc1" < "go1.26.0".
func compareGoVersions(a, b string) int {
	pa, pb := versionParts(a), versionParts(b)
	return slices.Compare(pa, pb)
}

func versionParts(v string) []int {
	v = strings.TrimPrefix(v, "go")
	var parts []int
	pre := 1 << 20 // a release sorts after its pre-releases
	for _, tag := range []string{"rc", "beta"} {
		if i := strings.Index(v, tag); i >= 0 {
			n := 0
			fmt.Sscanf(v[i+len(tag):], "%d", &n)
			if tag == "beta" {
				pre = n
			} else {
				pre = 1000 + n
			}
			v = v[:i]
		}
	}
	for _, f := range strings.Split(v, ".") {
		n := 0
		fmt.Sscanf(f, "%d", &n)
		parts = append(parts, n)
	}
	for len(parts) < 3 {
		parts = append(parts, -1)
	}
	return append(parts, pre)
}
