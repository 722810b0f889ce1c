package playground

import (
	"encoding/json"
	"strings"
	"testing"
)

// lastEvent is an action's done (or error) event.
func lastEvent(t *testing.T, code int, body string) event {
	t.Helper()
	if code != 200 {
		t.Fatalf("%d %q", code, body)
	}
	evs := events(t, body)
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	last := evs[len(evs)-1]
	if last.Kind != "done" {
		t.Fatalf("ended with %+v", last)
	}
	return last
}

func TestActions(t *testing.T) {
	f := newFixture(t, nil)
	c := f.browser(t)

	t.Run("run reads stdin", func(t *testing.T) {
		req, _ := json.Marshal(actionRequest{Files: `package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	in, _ := io.ReadAll(os.Stdin)
	fmt.Printf("got %q\n", in)
}
`, Stdin: "to the program\n"})
		code, body := f.post(t, c, "/api/run", string(req))
		if ev := lastEvent(t, code, body); ev.Outcome != "ok" || !strings.Contains(body, `got \"to the program\\n\"`) {
			t.Errorf("outcome %q, answer %q: want the stdin echoed", ev.Outcome, body)
		}
	})

	t.Run("check marks a vet finding", func(t *testing.T) {
		code, body := f.post(t, c, "/api/check", action("package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Printf(\"%d\\n\", \"x\")\n}\n"))
		ev := lastEvent(t, code, body)
		if ev.Outcome != "check_failed" || len(ev.Diagnostics) != 1 || ev.Diagnostics[0].Line != 6 || ev.Diagnostics[0].Source != "vet" {
			t.Errorf("check: %+v, want one vet finding on line 6", ev.Done)
		}
	})

	t.Run("format rewrites .go files only", func(t *testing.T) {
		in := "-- go.mod --\nmodule m\n-- main.go --\npackage main\nfunc main(){\n}\n-- notes.txt --\n  keep   me\n"
		code, body := f.post(t, c, "/api/format", action(in))
		ev := lastEvent(t, code, body)
		want := "-- go.mod --\nmodule m\n-- main.go --\npackage main\n\nfunc main() {\n}\n-- notes.txt --\n  keep   me\n"
		if ev.Files != want {
			t.Errorf("formatted %q, want %q", ev.Files, want)
		}
	})

	t.Run("format reports a syntax error on its line", func(t *testing.T) {
		code, body := f.post(t, c, "/api/format", action("package main\n\nfunc main() {\n\tx := \n}\n"))
		ev := lastEvent(t, code, body)
		if ev.Outcome != "format_failed" || len(ev.Diagnostics) == 0 || ev.Diagnostics[0].File != "prog.go" || ev.Diagnostics[0].Line != 5 {
			t.Errorf("format of broken code: %+v", ev.Done)
		}
	})

	t.Run("test lists tests and coverage", func(t *testing.T) {
		req, _ := json.Marshal(actionRequest{Files: "-- go.mod --\nmodule m\n-- m.go --\npackage m\n\nfunc F() int { return 1 }\n-- m_test.go --\npackage m\n\nimport \"testing\"\n\nfunc TestF(t *testing.T) {\n\tif F() != 1 {\n\t\tt.Fatal()\n\t}\n}\n\nfunc TestBad(t *testing.T) { t.Error(\"bad\") }\n", Cover: true})
		code, body := f.post(t, c, "/api/test", string(req))
		ev := lastEvent(t, code, body)
		if ev.Outcome != "test_failed" || len(ev.Tests) != 2 || len(ev.Coverage) != 1 {
			t.Fatalf("test: %+v", ev.Done)
		}
		for _, tr := range ev.Tests {
			if (tr.Name == "TestBad") != (tr.Status == "fail") {
				t.Errorf("test %+v", tr)
			}
		}
	})
}
