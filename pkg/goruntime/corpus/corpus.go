package corpus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/shell"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// SpecFile is the name of a case's spec file.
const SpecFile = "case.txt"

// DefaultCommand runs a case when its spec names no command.
const DefaultCommand = "go run ."

// DefaultTimeout bounds a case's command when its spec names no timeout.
const DefaultTimeout = 60 * time.Second

// ErrBadSpec is wrapped by errors about a malformed case.txt or a case
// directory that does not match its spec.
var ErrBadSpec = errors.New("bad corpus case")

// Case is one program of the corpus and how to run it.
type Case struct {
	// Name is the case directory's base name.
	Name string
	// Dir is the case directory on the host.
	Dir string
	// Note says what the case covers.
	Note string
	// Files are the case's files (all but case.txt), paths relative to Dir
	// with "/" separators, in lexical order.
	Files []goruntime.File
	// Command is the shell command as the spec gives it.
	Command string
	// Stdin names a file of the case fed to the command; empty for none
	// (the command's stdin is then empty).
	Stdin string
	// Env is added to the command's environment.
	Env map[string]string
	// Timeout bounds the command's wall time.
	Timeout time.Duration
	// CompareStderr adds stderr to the streams compared (stdout always is).
	CompareStderr bool
	// WantExit and WantOutcome are what the oracle must produce: they keep
	// the corpus honest (a case meant to panic that stops panicking fails).
	WantExit    int
	WantOutcome goruntime.Outcome
	// Slow marks cases run only on request (they take tens of seconds).
	Slow bool
	// WantDiagnostics, WantTests and WantBenchmarks are Go-aware results
	// the sandbox run must report, as the spec gives them ("file:line:col
	// source", "name status", "name").
	WantDiagnostics, WantTests, WantBenchmarks []string
}

// Script returns the command line both the oracle and the sandbox run:
// Command, with stdin redirected from the Stdin file when there is one.
func (c Case) Script() string {
	if c.Stdin == "" {
		return c.Command
	}
	return "{ " + c.Command + "\n} < " + shell.Quote(c.Stdin)
}

// Load reads every case under dir (one sub-directory each), sorted by name.
// Errors wrap ErrBadSpec and name the case.
func Load(dir string) ([]Case, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read corpus %s: %w", dir, err)
	}
	var cases []Case
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		c, err := LoadCase(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("corpus %s holds no cases: %w", dir, ErrBadSpec)
	}
	return cases, nil
}

// LoadCase reads the case in dir: its spec and its files. Errors wrap
// ErrBadSpec for a missing or malformed spec.
func LoadCase(dir string) (Case, error) {
	name := filepath.Base(dir)
	spec, err := os.ReadFile(filepath.Join(dir, SpecFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Case{}, fmt.Errorf("case %s: no %s: %w", name, SpecFile, ErrBadSpec)
		}
		return Case{}, fmt.Errorf("case %s: %w", name, err)
	}
	c, err := ParseSpec(name, spec)
	if err != nil {
		return Case{}, err
	}
	c.Dir = dir
	c.Files, err = readFiles(dir)
	if err != nil {
		return Case{}, fmt.Errorf("case %s: %w", name, err)
	}
	if c.Stdin != "" && !slices.ContainsFunc(c.Files, func(f goruntime.File) bool { return f.Path == c.Stdin }) {
		return Case{}, fmt.Errorf("case %s: stdin file %q is not in the case: %w", name, c.Stdin, ErrBadSpec)
	}
	return c, nil
}

// ParseSpec parses the text of a case.txt for the case called name. Files
// and Dir are left empty. Errors wrap ErrBadSpec and give the line.
func ParseSpec(name string, data []byte) (Case, error) {
	c := Case{Name: name, Command: DefaultCommand, Timeout: DefaultTimeout}
	bad := func(line int, format string, args ...any) (Case, error) {
		return Case{}, fmt.Errorf("case %s: %s line %d: %s: %w", name, SpecFile, line, fmt.Sprintf(format, args...), ErrBadSpec)
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			return bad(n, "want \"key: value\", got %q", line)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if seen[key] && key != "env" && key != "diagnostic" && key != "test" && key != "benchmark" {
			return bad(n, "%s given twice", key)
		}
		seen[key] = true
		switch key {
		case "note":
			c.Note = val
		case "command":
			if val == "" {
				return bad(n, "empty command")
			}
			c.Command = val
		case "stdin":
			p := path.Clean(val)
			if val == "" || p != val || path.IsAbs(p) || strings.HasPrefix(p, "../") || p == ".." || p == SpecFile {
				return bad(n, "stdin %q is not a plain relative path of a case file", val)
			}
			c.Stdin = val
		case "env":
			k, v, ok := strings.Cut(val, "=")
			if !ok || k == "" || strings.ContainsAny(k, " \t") {
				return bad(n, "env %q is not NAME=value", val)
			}
			if c.Env == nil {
				c.Env = map[string]string{}
			}
			if _, dup := c.Env[k]; dup {
				return bad(n, "env %s given twice", k)
			}
			c.Env[k] = v
		case "timeout":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return bad(n, "timeout %q is not a positive duration", val)
			}
			c.Timeout = d
		case "compare":
			fields := strings.Fields(val)
			for _, f := range fields {
				switch f {
				case "stdout":
				case "stderr":
					c.CompareStderr = true
				default:
					return bad(n, "compare %q: streams are stdout and stderr", f)
				}
			}
			if !slices.Contains(fields, "stdout") {
				return bad(n, "compare %q must include stdout", val)
			}
		case "exit":
			code, err := strconv.Atoi(val)
			if err != nil || code < 0 || code > 255 {
				return bad(n, "exit %q is not a code 0-255", val)
			}
			c.WantExit = code
		case "outcome":
			o := goruntime.Outcome(val)
			if !slices.Contains(knownOutcomes, o) {
				return bad(n, "unknown outcome %q", val)
			}
			c.WantOutcome = o
		case "diagnostic":
			f := strings.Fields(val)
			if len(f) != 2 || strings.Count(f[0], ":") < 1 {
				return bad(n, "diagnostic %q is not \"file:line[:col] source\"", val)
			}
			c.WantDiagnostics = append(c.WantDiagnostics, val)
		case "test":
			f := strings.Fields(val)
			if len(f) != 2 || !slices.Contains([]string{"pass", "fail", "skip"}, f[1]) {
				return bad(n, "test %q is not \"name pass|fail|skip\"", val)
			}
			c.WantTests = append(c.WantTests, val)
		case "benchmark":
			if val == "" || strings.ContainsAny(val, " \t") {
				return bad(n, "benchmark %q is not a benchmark name", val)
			}
			c.WantBenchmarks = append(c.WantBenchmarks, val)
		case "slow":
			b, err := strconv.ParseBool(val)
			if err != nil {
				return bad(n, "slow %q is not true or false", val)
			}
			c.Slow = b
		default:
			return bad(n, "unknown key %q", key)
		}
	}
	if err := sc.Err(); err != nil {
		return Case{}, fmt.Errorf("case %s: read %s: %w", name, SpecFile, err)
	}
	for _, k := range []string{"note", "exit", "outcome"} {
		if !seen[k] {
			return Case{}, fmt.Errorf("case %s: %s has no %q line: %w", name, SpecFile, k, ErrBadSpec)
		}
	}
	return c, nil
}

var knownOutcomes = []goruntime.Outcome{
	goruntime.OutcomeOK, goruntime.OutcomeBuildFailed, goruntime.OutcomeTestFailed,
	goruntime.OutcomePanic, goruntime.OutcomeRuntimeError, goruntime.OutcomeTimeout,
	goruntime.OutcomeMemoryLimit, goruntime.OutcomeProcessLimit, goruntime.OutcomeFileSizeLimit,
	goruntime.OutcomeOutputLimit, goruntime.OutcomeDiskLimit,
}

// readFiles returns every regular file under dir but the spec, keeping the
// executable bit.
func readFiles(dir string) ([]goruntime.File, error) {
	var files []goruntime.File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == SpecFile {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file: %w", rel, ErrBadSpec)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, goruntime.File{Path: rel, Data: data, Mode: info.Mode().Perm()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read files: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no files besides %s: %w", SpecFile, ErrBadSpec)
	}
	return files, nil
}
