package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sections a run can measure.
const (
	SectionServer = "server" // runtime server vs bare exec, Python runtime, sandboxd
	SectionLocal  = "local"  // local backend: open, first/warm runs, 8 at once
	SectionMCP    = "mcp"    // MCP call vs library call vs bare host
	// SectionHotpath splits where a warm sandbox's go run and go test
	// spend time beyond the bare host's (hotpath.go).
	SectionHotpath = "hotpath"
	// SectionCPUShare is a CPU-bound program in a sandbox against the
	// same program of the caller's on a busy machine (cpushare.go).
	SectionCPUShare = "cpu-share"
	// SectionRootless is the local backend run by a user other than root
	// against the same as root (rootless.go). Not a default section: it
	// needs root, gives a uid a cgroup of its own for the run and takes
	// a few minutes.
	SectionRootless = "rootless"
	// SectionScale keeps hundreds of local sandboxes live at once
	// (scale.go). Not a default section: it takes 10+ minutes and needs
	// the memory for 1,000 sandboxes.
	SectionScale = "scale"
	// SectionBatch runs a batch of small programs through a few sandboxes
	// against the bare host (issue 27); minutes, not in the default run.
	SectionBatch = "batch"
	// SectionMCPLoad runs hundreds of MCP sessions at once against the
	// built mcp-server over HTTP and checks nothing is left after
	// (mcpload.go); minutes, not in the default run.
	SectionMCPLoad = "mcp-load"
	// SectionSnapshots times the local backend's snapshots, forks and
	// rollback (snapshots.go); a minute or more, not in the default run.
	SectionSnapshots = "snapshots"
	// SectionFirstCall (firstcall.go) is a new user's first calls through
	// mcp-server on an empty state directory, as root and, when root, as
	// another user; minutes (the seed builds), not in the default run.
	SectionFirstCall = "first-call"
)

// AllSections is every section, in the order a run measures them.
var AllSections = []string{SectionServer, SectionLocal, SectionMCP, SectionHotpath, SectionCPUShare, SectionRootless, SectionScale, SectionBatch, SectionMCPLoad, SectionSnapshots, SectionFirstCall}

// DefaultSections are the sections a run measures unless told otherwise.
var DefaultSections = []string{SectionServer, SectionLocal, SectionMCP, SectionHotpath, SectionCPUShare}

// DefaultRootlessUID is the uid the rootless section runs its backend as:
// a uid with no account that nothing else uses (the tests run backends as
// 65533 and 65534).
const DefaultRootlessUID = 65532

// Upstream baselines of the server section.
const (
	BaselinePython   = "python"   // agent-sandbox's examples/python-runtime-sandbox (FastAPI)
	BaselineSandboxd = "sandboxd" // agent-sandbox's packages/sandboxd daemon, built from the module
)

// AllBaselines is every upstream baseline.
var AllBaselines = []string{BaselinePython, BaselineSandboxd}

// Config configures a run.
type Config struct {
	// Sections to measure; default all.
	Sections []string
	// Baselines are the upstream servers the server section compares
	// with; default all. The bare exec baseline is always measured.
	Baselines []string
	// Rounds is the number of samples per figure for the slow figures
	// (go runs, opens); fast ones take 10x as many. Default 10.
	Rounds int
	// CacheDir holds what the run builds once per machine (upstream's
	// sandboxd). Default /var/cache/go-runtime-sandbox/bench when
	// writable, else the user cache directory.
	CacheDir string
	// StateDir is the local backend's state directory; default its own.
	StateDir string
	// RootlessUID is the user (uid and gid) the rootless section runs its
	// backend as. Default DefaultRootlessUID.
	RootlessUID int
	// RootlessDir holds the rootless backend's HOME and state directory,
	// given to RootlessUID and kept between runs (its seed build cache is
	// built once). Default CacheDir/rootless.
	RootlessDir string
	// ScaleSizes are the numbers of live sandboxes the scale section
	// measures, ascending. Default DefaultScaleSizes.
	ScaleSizes []int
	// BatchSize is how many programs the batch section runs on each side.
	// Default DefaultBatchSize.
	BatchSize int
	// MCPSessions is how many MCP sessions the mcp-load section runs at
	// once. Default DefaultMCPSessions.
	MCPSessions int
	// Log receives progress lines (what is being measured); nil: none.
	Log io.Writer
}

// Defaults returns the default Config.
func Defaults() Config {
	cache := "/var/cache/go-runtime-sandbox/bench"
	if err := os.MkdirAll(cache, 0o755); err != nil {
		if uc, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(uc, "go-runtime-sandbox", "bench")
		}
	}
	return Config{Sections: slices.Clone(DefaultSections), Baselines: slices.Clone(AllBaselines), Rounds: 10, CacheDir: cache,
		RootlessUID: DefaultRootlessUID, ScaleSizes: slices.Clone(DefaultScaleSizes), BatchSize: DefaultBatchSize, MCPSessions: DefaultMCPSessions}
}

// RegisterFlags adds the run's flags to fs, writing into cfg.
func RegisterFlags(fs *flag.FlagSet, cfg *Config) {
	fs.Func("sections", "comma-separated sections to measure: server, local, mcp, hotpath, cpu-share, rootless, scale, batch, mcp-load, snapshots, first-call (default server,local,mcp,hotpath,cpu-share; rootless needs root; scale, batch, mcp-load, snapshots and first-call take minutes)", func(s string) error {
		cfg.Sections = strings.Split(s, ",")
		return nil
	})
	fs.Func("baselines", "comma-separated upstream baselines of the server section: python, sandboxd (default both; empty: none)", func(s string) error {
		cfg.Baselines = nil
		if s != "" {
			cfg.Baselines = strings.Split(s, ",")
		}
		return nil
	})
	fs.Func("scale-sizes", "comma-separated numbers of live sandboxes the scale section measures, ascending (default 50,200,500,1000)", func(s string) error {
		cfg.ScaleSizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("%q is not a number", f)
			}
			cfg.ScaleSizes = append(cfg.ScaleSizes, n)
		}
		return nil
	})
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "programs the batch section runs on each side (8 at once), a mix of the corpus's cases")
	fs.IntVar(&cfg.MCPSessions, "mcp-sessions", cfg.MCPSessions, "MCP sessions the mcp-load section runs at once over HTTP, each with a sandbox of its own")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "samples per slow figure (go runs, opens); fast figures take 10x as many")
	fs.StringVar(&cfg.CacheDir, "cache-dir", cfg.CacheDir, "where upstream's sandboxd is built once per machine")
	fs.StringVar(&cfg.StateDir, "state-dir", cfg.StateDir, "the local backend's state directory (default: its own)")
	fs.IntVar(&cfg.RootlessUID, "rootless-uid", cfg.RootlessUID, "the rootless section's user: its backend runs as this uid and gid")
	fs.StringVar(&cfg.RootlessDir, "rootless-dir", cfg.RootlessDir, "the rootless backend's HOME and state directory, given to --rootless-uid and kept (default: <cache-dir>/rootless)")
}

// Validate rejects a Config a run cannot use, naming the setting.
func (c *Config) Validate() error {
	for _, s := range c.Sections {
		if !slices.Contains(AllSections, s) {
			return fmt.Errorf("--sections: unknown section %q (want some of %s)", s, strings.Join(AllSections, ", "))
		}
	}
	for _, b := range c.Baselines {
		if !slices.Contains(AllBaselines, b) {
			return fmt.Errorf("--baselines: unknown baseline %q (want some of %s)", b, strings.Join(AllBaselines, ", "))
		}
	}
	if len(c.Sections) == 0 {
		return errors.New("--sections: name at least one section")
	}
	if c.Rounds < 1 {
		return fmt.Errorf("--rounds=%d: want at least 1", c.Rounds)
	}
	if c.CacheDir == "" {
		return errors.New("--cache-dir: must not be empty")
	}
	for i, n := range c.ScaleSizes {
		if n < 1 || (i > 0 && n <= c.ScaleSizes[i-1]) {
			return fmt.Errorf("--scale-sizes=%v: want positive numbers, ascending", c.ScaleSizes)
		}
	}
	if slices.Contains(c.Sections, SectionScale) && len(c.ScaleSizes) == 0 {
		return errors.New("--scale-sizes: name at least one size for the scale section")
	}
	if c.BatchSize < 2 {
		return fmt.Errorf("--batch-size=%d: want at least 2 (the batch runs in two halves)", c.BatchSize)
	}
	if c.MCPSessions < 1 {
		return fmt.Errorf("--mcp-sessions=%d: want at least 1", c.MCPSessions)
	}
	if c.RootlessUID <= 0 {
		return fmt.Errorf("--rootless-uid=%d: want a uid other than root", c.RootlessUID)
	}
	return nil
}

// runner holds one run's state.
type runner struct {
	cfg    Config
	report *Report
	bins   map[string]string // our built commands by name
}

func (r *runner) add(row Row) { r.report.Rows = append(r.report.Rows, check(row)) }

func (r *runner) note(format string, args ...any) {
	r.report.Notes = append(r.report.Notes, "note: "+fmt.Sprintf(format, args...))
	r.logf(format, args...)
}

func (r *runner) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "bench: "+format+"\n", args...)
	}
}

// Run measures the configured sections and returns the report. A
// baseline that cannot run here (no python3 FastAPI, no network to build
// sandboxd) is skipped with a note; a figure of ours that cannot be
// measured is an error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, report: &Report{Started: time.Now(), Machine: describeMachine(ctx)}}
	if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("cache directory: %w", err)
	}
	bindir, err := os.MkdirTemp("", "bench-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bindir)
	r.logf("building cmd/sandbox-server, cmd/sandbox-processapi and cmd/mcp-server")
	if r.bins, err = buildOurs(ctx, bindir, "sandbox-server", "sandbox-processapi", "mcp-server"); err != nil {
		return nil, err
	}
	sections := map[string]func(context.Context) error{
		SectionServer:    r.serverSection,
		SectionLocal:     r.localSection,
		SectionMCP:       r.mcpSection,
		SectionHotpath:   r.hotpathSection,
		SectionCPUShare:  r.cpuShareSection,
		SectionRootless:  r.rootlessSection,
		SectionScale:     r.scaleSection,
		SectionBatch:     r.batchSection,
		SectionMCPLoad:   r.mcpLoadSection,
		SectionSnapshots: r.snapshotsSection,
		SectionFirstCall: r.firstCallSection,
	}
	for _, s := range AllSections {
		if !slices.Contains(cfg.Sections, s) {
			continue
		}
		r.logf("measuring %s", s)
		if err := sections[s](ctx); err != nil {
			return r.report, fmt.Errorf("%s section: %w", s, err)
		}
	}
	r.report.Machine.LoadEnd = loadAvg()
	r.report.Elapsed = time.Since(r.report.Started)
	return r.report, nil
}
