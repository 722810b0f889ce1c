package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Go-aware fields of run_go_code and the check_go_code tool, through
// the real MCP client (goruntimetest runs the host's go).

const goawareTest = `package calc

import (
	"fmt"
	"testing"
)

func TestDouble(t *testing.T) {
	t.Run("two", func(t *testing.T) { t.Log("fine") })
	t.Run("wrong want", func(t *testing.T) {
		fmt.Println("printed by the subtest")
		t.Errorf("got 4, want 5")
	})
}

func TestSkipped(t *testing.T) { t.Skip("not here") }
`

func TestRunGoCodeDiagnosticsAndTests(t *testing.T) {
	s, _ := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)

	// The names in the schema are a contract.
	tl, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, tool := range tl.Tools {
		schema, _ := json.Marshal(tool.OutputSchema)
		in, _ := json.Marshal(tool.InputSchema)
		switch tool.Name {
		case "run_go_code":
			for _, want := range []string{`"diagnostics"`, `"tests"`, `"file"`, `"line"`, `"column"`, `"message"`, `"source"`,
				`"package"`, `"name"`, `"status"`, `"elapsed_ms"`, `"output"`, `["compile","vet","gofmt","test"]`, `["pass","fail","skip"]`} {
				if !strings.Contains(string(schema), want) {
					t.Errorf("run_go_code output schema lacks %s", want)
				}
			}
			if !strings.Contains(string(in), `"go_version"`) {
				t.Errorf("run_go_code input schema lacks go_version: %s", in)
			}
		case "check_go_code":
			found = true
			if !strings.Contains(string(in), `"files"`) || !strings.Contains(string(in), `"packages"`) ||
				!strings.Contains(string(schema), `"diagnostics"`) || !strings.Contains(string(schema), `"gofmt_diff"`) {
				t.Errorf("check_go_code schemas: in %s out %s", in, schema)
			}
		}
	}
	if !found {
		t.Fatal("check_go_code not listed")
	}

	res := call(t, cs, "run_go_code", map[string]any{
		"files":   map[string]any{"go.mod": "module example.com/m\n\ngo 1.24\n", "calc/calc_test.go": goawareTest},
		"command": "go test -v ./...",
	})
	out := runOut(t, res)
	if !res.IsError || out.Outcome != "test_failed" {
		t.Errorf("outcome %s isError %v", out.Outcome, res.IsError)
	}
	var sub, skip *TestResult
	for i, tr := range out.Tests {
		switch tr.Name {
		case "TestDouble/wrong_want":
			sub = &out.Tests[i]
		case "TestSkipped":
			skip = &out.Tests[i]
		}
	}
	if sub == nil || sub.Status != "fail" || sub.Package != "example.com/m/calc" || !strings.Contains(sub.Output, "printed by the subtest") {
		t.Errorf("failing subtest: %+v (tests %+v)", sub, out.Tests)
	}
	if skip == nil || skip.Status != "skip" || !strings.Contains(skip.Output, "not here") {
		t.Errorf("skipped test: %+v", skip)
	}
	if len(out.Diagnostics) == 0 || out.Diagnostics[0].File != "calc/calc_test.go" || out.Diagnostics[0].Source != "test" {
		t.Errorf("test diagnostics: %+v", out.Diagnostics)
	}
	if txt := text(res); !strings.Contains(txt, "tests: 1 passed, 2 failed, 1 skipped") || !strings.Contains(txt, "failed: TestDouble, TestDouble/wrong_want") {
		t.Errorf("text lacks the test summary:\n%s", txt)
	}

	// A type error in a nested package.
	res = call(t, cs, "run_go_code", map[string]any{
		"files":   map[string]any{"calc/calc_test.go": "package calc\n", "calc/calc.go": "package calc\n\nfunc F() int {\n\treturn \"x\"\n}\n"},
		"command": "go build ./...",
	})
	out = runOut(t, res)
	if len(out.Diagnostics) != 1 || out.Diagnostics[0].File != "calc/calc.go" || out.Diagnostics[0].Line != 4 || out.Diagnostics[0].Column != 9 || out.Diagnostics[0].Source != "compile" {
		t.Errorf("diagnostics: %+v", out.Diagnostics)
	}
	if out.Tests == nil || out.Diagnostics == nil {
		t.Error("tests and diagnostics must be present (empty lists), not null")
	}

	// A malformed go_version is refused before anything runs.
	res = call(t, cs, "run_go_code", map[string]any{"command": "go version", "go_version": "latest"})
	if !res.IsError || !strings.Contains(text(res), "want a release such as 1.25.9") {
		t.Errorf("bad go_version: %s", text(res))
	}
}

func TestCheckGoCode(t *testing.T) {
	s, hb := newTestServer(t, Config{})
	cs := connectMemory(t, s, nil)
	res := call(t, cs, "check_go_code", map[string]any{
		"files": map[string]any{
			"go.mod":     "module example.com/c\n\ngo 1.24\n",
			"main.go":    "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc init() { os.WriteFile(\"ran\", nil, 0o644) }\n\nfunc main() {\n\tfmt.Printf(\"%d\\n\", \"x\")\n}\n",
			"lib/lib.go": "package lib\n\nfunc  F() int { return 1 }\n",
		},
	})
	var out CheckOutput
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if !res.IsError || out.OK {
		t.Errorf("findings should be an error result: %s", text(res))
	}
	var gofmt, vet bool
	for _, d := range out.Diagnostics {
		gofmt = gofmt || d.Source == "gofmt" && d.File == "lib/lib.go" && d.Line == 3
		vet = vet || d.Source == "vet" && d.File == "main.go" && d.Line == 11
	}
	if !gofmt || !vet {
		t.Errorf("want a gofmt finding in lib/lib.go:3 and a vet finding in main.go:11: %+v", out.Diagnostics)
	}
	if !strings.Contains(out.GofmtDiff, "+func F() int { return 1 }") || !strings.Contains(text(res), "--- gofmt -d ---") {
		t.Errorf("gofmt diff: %q", out.GofmtDiff)
	}
	if sb := hb.Sandbox(out.SandboxID); sb == nil {
		t.Errorf("check_go_code answered with sandbox %q, which is not open", out.SandboxID)
	} else if _, err := os.Stat(filepath.Join(sb.Dir(), "ran")); err == nil {
		t.Error("check_go_code ran the program's init")
	}
	res = call(t, cs, "check_go_code", map[string]any{"packages": []any{"-toolexec=evil"}})
	if !res.IsError || !strings.Contains(text(res), "not a package pattern") {
		t.Errorf("flag as package: %s", text(res))
	}
}
