package archmap

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/go-runtime-sandbox/go-runtime-sandbox/"

// entry is a row of the map: the packages it names and their side.
type entry struct {
	paths []string // module-relative; "x/..." names x and everything below it
	side  string   // "sandbox", "host" or "shared"
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// readMap reads the table of docs/architecture.md's "Where things live".
func readMap(t *testing.T) []entry {
	t.Helper()
	f, err := os.Open("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []entry
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Where things live"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("map row with %d cells: %q", len(cells), line)
		}
		side := strings.Fields(strings.TrimSpace(cells[len(cells)-2]))
		if len(side) == 0 || !slices.Contains([]string{"sandbox", "host", "shared"}, side[0]) {
			t.Errorf("map row %q: side %q is not sandbox, host or shared", cells[1], cells[len(cells)-2])
			continue
		}
		e := entry{side: side[0]}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			e.paths = append(e.paths, m[1])
		}
		rows = append(rows, e)
	}
	if len(rows) < 20 {
		t.Fatalf("read %d rows of the map: is the section still called \"Where things live\"?", len(rows))
	}
	return rows
}

// pkg is a package of the module as go list sees it.
type pkg struct {
	path    string   // module-relative
	imports []string // of the module, module-relative, not the tests'
	deps    []string // likewise, every package it links
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	ours := func(list string) []string {
		var o []string
		for _, p := range strings.Fields(list) {
			if rel, ok := strings.CutPrefix(p, module); ok {
				o = append(o, rel)
			}
		}
		return o
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		rel, ok := strings.CutPrefix(f[0], module)
		if !ok || len(f) != 3 {
			continue
		}
		pkgs = append(pkgs, pkg{path: rel, imports: ours(f[1]), deps: ours(f[2])})
	}
	return pkgs
}

// sideOf is the side the map gives path, "" when it names none.
func sideOf(rows []entry, path string) string {
	for _, e := range rows {
		for _, p := range e.paths {
			if p == path || (strings.HasSuffix(p, "/...") && strings.HasPrefix(path+"/", strings.TrimSuffix(p, "..."))) {
				return e.side
			}
		}
	}
	return ""
}

// TestMapNamesEveryPackage: every package go list finds is in the map,
// and every path the map names is a package (or a directory of them).
func TestMapNamesEveryPackage(t *testing.T) {
	rows, pkgs := readMap(t), listPackages(t)
	for _, p := range pkgs {
		if sideOf(rows, p.path) == "" {
			t.Errorf("docs/architecture.md does not name package %s: add it to \"Where things live\" with its side", p.path)
		}
	}
	for _, e := range rows {
		for _, p := range e.paths {
			if _, err := os.Stat(filepath.Join("../..", strings.TrimSuffix(p, "/..."))); err != nil {
				t.Errorf("docs/architecture.md names %s, which is not in the tree", p)
			}
		}
	}
}

// TestMapSidesHold: code on the sandbox side never links pkg/,
// internal/client/ or internal/frontend/ (nor any host package but the
// gate, which its binary carries); a shared package imports neither side
// and has importers on both.
func TestMapSidesHold(t *testing.T) {
	rows, pkgs := readMap(t), listPackages(t)
	hostOnly := []string{"pkg/", "internal/client/", "internal/frontend/"}
	importers := map[string]map[string]bool{} // shared package -> sides importing it
	for _, p := range pkgs {
		side := sideOf(rows, p.path)
		if side == "sandbox" {
			for _, d := range p.deps {
				if slices.ContainsFunc(hostOnly, func(pre string) bool { return strings.HasPrefix(d, pre) }) {
					t.Errorf("sandbox-side %s links %s (host side): sandbox code never imports pkg/, internal/client/ or internal/frontend/", p.path, d)
				}
			}
		}
		for _, imp := range p.imports {
			isShared := sideOf(rows, imp) == "shared"
			if side == "shared" && !isShared && sideOf(rows, imp) != "" {
				t.Errorf("shared %s imports %s (%s side): a shared package imports neither side", p.path, imp, sideOf(rows, imp))
			}
			if isShared && side != "shared" {
				if importers[imp] == nil {
					importers[imp] = map[string]bool{}
				}
				importers[imp][side] = true
			}
		}
	}
	for _, e := range rows {
		if e.side != "shared" {
			continue
		}
		for _, p := range e.paths {
			if !importers[p]["host"] || !importers[p]["sandbox"] {
				t.Errorf("docs/architecture.md calls %s shared, but its importers are on sides %v: call it by the one side that uses it", p, importers[p])
			}
		}
	}
}
