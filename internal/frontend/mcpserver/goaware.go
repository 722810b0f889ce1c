package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/sessions"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// The Go-aware parts of the tools: run_go_code's diagnostics, tests and
// go_version, and check_go_code. The JSON names here are a contract
// clients rely on (docs/mcp.md); do not rename them.

// Diagnostic is one finding in run_go_code's and check_go_code's results.
type Diagnostic struct {
	File    string `json:"file" jsonschema:"path relative to /app (absolute for files outside it); empty when the tool gave no position"`
	Line    int    `json:"line" jsonschema:"1-based line; 0 when unknown"`
	Column  int    `json:"column" jsonschema:"1-based column; 0 when unknown"`
	Message string `json:"message"`
	Source  string `json:"source" jsonschema:"the tool that reported it"`
}

// TestResult is one test or subtest in run_go_code's result.
type TestResult struct {
	Package   string `json:"package" jsonschema:"import path of the test's package"`
	Name      string `json:"name" jsonschema:"test name as go test prints it; subtests are TestA/sub"`
	Status    string `json:"status"`
	ElapsedMS int64  `json:"elapsed_ms" jsonschema:"run time in milliseconds as go test reported it"`
	Output    string `json:"output" jsonschema:"what the test printed (t.Log, t.Error, fmt.Print), without go test's === RUN and --- PASS lines; head and tail kept when long"`
}

// CheckInput is check_go_code's input.
type CheckInput struct {
	Files     map[string]string `json:"files,omitempty" jsonschema:"files to write under /app first: relative path to full content; existing files are overwritten"`
	Packages  []string          `json:"packages,omitempty" jsonschema:"package patterns to check, e.g. ./... (the default) or ./internal/store"`
	SandboxID string            `json:"sandbox_id,omitempty" jsonschema:"work in this sandbox of yours (from create_sandbox); default: this session's own sandbox"`
}

// CheckOutput is check_go_code's structured result.
type CheckOutput struct {
	Diagnostics     []Diagnostic `json:"diagnostics" jsonschema:"gofmt, compile and vet findings, sorted by file and position"`
	DiagnosticsLeft int          `json:"diagnostics_left_out,omitempty" jsonschema:"findings beyond the ones listed"`
	GofmtDiff       string       `json:"gofmt_diff" jsonschema:"unified diff gofmt would apply (gofmt -d); empty when every file is formatted; head and tail kept when long"`
	OK              bool         `json:"ok" jsonschema:"nothing was found"`
	DurationMS      int64        `json:"duration_ms"`
	SandboxID       string       `json:"sandbox_id"`
}

// Caps that keep run_go_code's and check_go_code's results small enough
// for a model's context, next to the head+tail window of the streams.
const (
	maxMCPDiagnostics = 100
	maxMCPTests       = 200
	maxMCPTestOutput  = 1 << 10 // head and tail of each test's output, each
	maxMCPGofmtDiff   = 8 << 10 // head and tail of the gofmt diff, each
)

var (
	diagnosticSources = []any{string(goruntime.SourceCompile), string(goruntime.SourceVet), string(goruntime.SourceGofmt), string(goruntime.SourceTest)}
	testStatuses      = []any{string(goruntime.TestPass), string(goruntime.TestFail), string(goruntime.TestSkip)}
)

const checkDescription = `Check Go code without running it: gofmt differences (as findings and as a unified diff), compile and type errors (test files included) and go vet findings for the whole module, in the same sandbox as run_go_code. No user code runs (no init, no tests, no binary left behind). files are written under /app first, like run_go_code's; packages defaults to ./... . Each finding has file, line, column, message and source (gofmt, compile, vet).`

// enumDiagnostics and enumTests set the enums of the diagnostics' source
// and the tests' status in an output schema.
func enumGoAware(schema *jsonschema.Schema) {
	if d, ok := schema.Properties["diagnostics"]; ok && d.Items != nil {
		d.Items.Properties["source"].Enum = diagnosticSources
	}
	if t, ok := schema.Properties["tests"]; ok && t.Items != nil {
		t.Items.Properties["status"].Enum = testStatuses
	}
}

func (s *Server) addGoAwareTools() {
	out, err := jsonschema.For[CheckOutput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: output schema of check_go_code: %v", err))
	}
	enumGoAware(out)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:         "check_go_code",
		Title:        "Check Go code",
		Description:  checkDescription,
		OutputSchema: out,
		Annotations: &mcp.ToolAnnotations{
			Title:           "Check Go code",
			DestructiveHint: ptr(true), // writes files under /app
			OpenWorldHint:   ptr(false),
		},
	}, s.checkGoCode)
}

// mcpDiagnostics converts and caps diagnostics; left counts those left out.
func mcpDiagnostics(ds []goruntime.Diagnostic) (out []Diagnostic, left int) {
	out = []Diagnostic{}
	for i, d := range ds {
		if i == maxMCPDiagnostics {
			return out, len(ds) - i
		}
		out = append(out, Diagnostic{File: d.File, Line: d.Line, Column: d.Column, Message: d.Message, Source: string(d.Source)})
	}
	return out, 0
}

// mcpTests converts and caps tests, keeping failures first when there are
// more than fit; left counts those left out.
func mcpTests(ts []goruntime.TestResult) (out []TestResult, left int) {
	out = []TestResult{}
	if len(ts) > maxMCPTests {
		ts = slices.Clone(ts)
		slices.SortStableFunc(ts, func(a, b goruntime.TestResult) int {
			return boolRank(a.Status != goruntime.TestFail) - boolRank(b.Status != goruntime.TestFail)
		})
		left = len(ts) - maxMCPTests
		ts = ts[:maxMCPTests]
	}
	for _, t := range ts {
		o, _ := goruntime.HeadTail(t.Output, maxMCPTestOutput, maxMCPTestOutput)
		out = append(out, TestResult{Package: t.Package, Name: t.Name, Status: string(t.Status), ElapsedMS: t.Elapsed.Milliseconds(), Output: o})
	}
	return out, left
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// formatGoAware renders diagnostics and failed tests for a model to read,
// after a run's streams.
func formatGoAware(b *strings.Builder, ds []Diagnostic, dsLeft int, ts []TestResult, tsLeft int) {
	if len(ds) > 0 {
		fmt.Fprintf(b, "--- diagnostics (%d) ---\n", len(ds)+dsLeft)
		for _, d := range ds {
			msg, _, _ := strings.Cut(d.Message, "\n")
			pos := d.File
			if d.Line > 0 {
				pos += fmt.Sprintf(":%d", d.Line)
				if d.Column > 0 {
					pos += fmt.Sprintf(":%d", d.Column)
				}
			}
			if pos != "" {
				pos += ": "
			}
			fmt.Fprintf(b, "%s%s (%s)\n", pos, msg, d.Source)
		}
		if dsLeft > 0 {
			fmt.Fprintf(b, "... and %d more\n", dsLeft)
		}
	}
	if len(ts) > 0 {
		n := map[string]int{}
		var failed []string
		for _, t := range ts {
			n[t.Status]++
			if t.Status == string(goruntime.TestFail) {
				failed = append(failed, t.Name)
			}
		}
		fmt.Fprintf(b, "--- tests: %d passed, %d failed, %d skipped", n["pass"], n["fail"], n["skip"])
		if tsLeft > 0 {
			fmt.Fprintf(b, " (%d more not listed)", tsLeft)
		}
		b.WriteString(" ---\n")
		if len(failed) > 0 {
			fmt.Fprintf(b, "failed: %s\n", strings.Join(failed, ", "))
		}
	}
}

func (s *Server) checkGoCode(ctx context.Context, req *mcp.CallToolRequest, in CheckInput) (*mcp.CallToolResult, CheckOutput, error) {
	files := toolFiles(in.Files)
	for _, p := range in.Packages {
		if p == "" || strings.HasPrefix(p, "-") || strings.ContainsAny(p, "\x00\n") {
			return nil, CheckOutput{}, fmt.Errorf("packages: %q is not a package pattern such as ./... or ./internal/store", p)
		}
	}
	var res *goruntime.CheckResult
	u, err := s.call(ctx, req, in.SandboxID, needWork, nil, func(sess *goruntime.Session, _ time.Duration) error {
		if s.cfg.Ephemeral {
			if err := sess.Reset(ctx); err != nil {
				return fmt.Errorf("empty /app before the call (--ephemeral): %w", err)
			}
		}
		var err error
		res, err = sess.Check(ctx, goruntime.CheckRequest{Files: files, Packages: in.Packages, Timeout: s.cfg.DefaultTimeout})
		return err
	})
	if err != nil {
		s.failed.log(ctx, "check_go_code", err)
		return nil, CheckOutput{}, sessions.Describe(err)
	}
	ds, left := mcpDiagnostics(res.Diagnostics)
	diff, _ := goruntime.HeadTail(res.GofmtDiff, maxMCPGofmtDiff, maxMCPGofmtDiff)
	out := CheckOutput{Diagnostics: ds, DiagnosticsLeft: left, GofmtDiff: diff, OK: res.OK(), DurationMS: res.Duration.Milliseconds(), SandboxID: u.ID}
	var b strings.Builder
	b.WriteString(createdNote(u))
	if out.OK {
		fmt.Fprintf(&b, "ok: gofmt, go build and go vet found nothing (%d ms)\n", out.DurationMS)
	} else {
		fmt.Fprintf(&b, "%d findings (%d ms)\n", len(ds)+left, out.DurationMS)
		formatGoAware(&b, ds, left, nil, 0)
	}
	if diff != "" {
		fmt.Fprintf(&b, "--- gofmt -d ---\n%s", diff)
	}
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimRight(b.String(), "\n")}},
		IsError: !out.OK,
	}, out, nil
}

// describeToolchain adds what to do about an unavailable go_version.
func describeToolchain(err error) error {
	if errors.Is(err, goruntime.ErrToolchainUnavailable) {
		return fmt.Errorf("go_version: %w", err)
	}
	return err
}
