package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// ScreenshotsEnv names a directory the browser test writes its
// screenshots to (docs/playground/ when refreshing the docs); without it
// they go to a temporary directory.
const ScreenshotsEnv = "PLAYGROUND_SCREENSHOTS"

// browsers are the programs findBrowser looks for, Debian's first.
var browsers = []string{"chromium", "chromium-headless-shell", "google-chrome", "chrome"}

// findBrowser returns a headless-capable Chromium. Without one it fails
// when the machine could install Debian's (the test must not pass
// quietly where make deps would have given it a browser) and skips only
// where none can be installed.
func findBrowser(t testing.TB) string {
	t.Helper()
	for _, name := range browsers {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	for _, dir := range []string{"/usr/lib/chromium", "/usr/lib/chromium-headless-shell"} {
		for _, name := range []string{"chromium", "chromium-headless-shell", "headless_shell"} {
			if p := filepath.Join(dir, name); isExecutable(p) {
				return p
			}
		}
	}
	out, err := exec.Command("apt-cache", "policy", "chromium").Output()
	if err == nil && strings.Contains(string(out), "Candidate:") && !strings.Contains(string(out), "Candidate: (none)") {
		t.Fatal("no Chromium found, but this machine can install Debian's: run make deps (scripts/install-deps.sh chromium)")
	}
	t.Skipf("no Chromium (looked for %v) and none can be installed here (apt-cache policy chromium: %v): the browser test needs one", browsers, err)
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// newBrowser starts a headless Chromium with a fresh profile and returns
// a tab's context.
func newBrowser(t testing.TB) context.Context {
	t.Helper()
	path := findBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	t.Cleanup(acancel)
	tctx, tcancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(tcancel)
	return tctx
}

// do runs steps, failing the test with what was asked.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition on each change of the page (and
// every 100 ms) until it holds; on failure it reports what the page
// shows.
func waitFor(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(4*time.Minute))); err != nil {
		t.Fatalf("waiting for %s (%s): %v\n%s", what, cond, err, pageState(ctx))
	}
}

// pageState is what the page shows, for failure messages.
func pageState(ctx context.Context) string {
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({
		badge: document.getElementById("badge").textContent,
		progress: document.getElementById("progress").textContent,
		output: document.getElementById("output").textContent.slice(0, 2000),
		state: document.body.dataset.state || ""})`))
	if err != nil {
		return "(page state unavailable: " + err.Error() + ")"
	}
	return s
}

// example chooses an example from the menu and waits for it.
func example(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	q, _ := json.Marshal(name)
	do(t, ctx, "choose the example "+name, chromedp.Evaluate[chromedp.Void](`(() => {
		const s = document.getElementById("examples"); s.value = `+string(q)+`; s.dispatchEvent(new Event("change")); })()`))
	waitFor(t, ctx, "the example "+name, `document.body.dataset.example === `+string(q))
}

// setProgram makes the editor hold one file, prog.go, with text.
func setProgram(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	example(t, ctx, "hello")
	do(t, ctx, "type the program", chromedp.SetValue(chromedp.CSS("#code"), text))
}

// moduleText is every file of the editor as "name\ncontent", read by
// going through its tabs.
func moduleText(t *testing.T, ctx context.Context) string {
	t.Helper()
	return eval[string](t, ctx, `(() => {
		const out = [];
		for (const tab of document.querySelectorAll("#tabs [role=tab]")) {
			tab.click();
			out.push(tab.dataset.file + "\n" + document.getElementById("code").value);
		}
		return out.join("\n----\n"); })()`)
}

// clickAndWait clicks a button and waits for the call to end.
func runAction(t *testing.T, ctx context.Context, button string) {
	t.Helper()
	do(t, ctx, "click "+button, chromedp.Click(chromedp.CSS(button)))
	waitFor(t, ctx, button+" to finish", `document.body.dataset.state === "idle" && document.getElementById("badge").dataset.outcome !== undefined`)
}

// screenshot saves the whole page as name.png.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv(ScreenshotsEnv)
	if dir == "" {
		dir = t.TempDir()
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// colorScheme emulates prefers-color-scheme.
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

// viewport sets the page's size (mobile: a phone's).
func viewport(width, height int64, mobile bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		scale := 1.0
		if mobile {
			scale = 2
		}
		_, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: width, Height: height, DeviceScaleFactor: scale, Mobile: mobile})
		return err
	})
}

// sessionCookie is the playground's cookie in ctx's browser context.
func sessionCookie(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	var v string
	do(t, ctx, "read cookies", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
		if err != nil {
			return err
		}
		for _, c := range res.Cookies {
			if c.Name == "playground_session" {
				v = c.Value
			}
		}
		return nil
	}))
	if v == "" {
		t.Fatal("the page set no playground_session cookie")
	}
	return v
}

func TestBrowser(t *testing.T) {
	requireBwrap(t)
	ctx := newBrowser(t)
	url := startPlayground(t, "--timeout=3m")

	var dialogs atomic.Int32
	if err := chromedp.Listen(ctx, func(ev any) {
		switch ev.(type) {
		case *page.EventJavascriptDialogOpening, page.EventJavascriptDialogOpening:
			dialogs.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "load the page", colorScheme("light"), chromedp.Navigate(url))
	waitFor(t, ctx, "the page to be ready", `document.body.dataset.ready === "1"`)
	if got := eval[string](t, ctx, `document.getElementById("version").options[0].textContent`); !strings.HasPrefix(got, "1.") {
		t.Errorf("version picker's first entry %q: want the sandbox's Go version", got)
	}

	t.Run("output streams before the program ends", func(t *testing.T) {
		setProgram(t, ctx, `package main

import (
	"fmt"
	"time"
)

func main() {
	fmt.Println("Hello, streaming world")
	time.Sleep(4 * time.Second)
	fmt.Println("goodbye")
}
`)
		// Shift+Enter in the editor runs (go.dev/play's key).
		do(t, ctx, "Shift+Enter", chromedp.Focus(chromedp.CSS("#code")),
			chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierShift)))
		// The state when the first line shows: the run must not have ended.
		wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
		defer cancel()
		seen, err := chromedp.Run(wctx, chromedp.Poll[string](`(() => {
			const o = document.getElementById("output").textContent;
			if (!o.includes("Hello, streaming world")) return document.body.dataset.state === "idle" ? "ended: " + o : false;
			return (document.body.dataset.state === "running" && !o.includes("goodbye")) ? "running" : "ended: " + o; })()`,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(4*time.Minute)))
		if err != nil {
			t.Fatalf("waiting for the first line: %v\n%s", err, pageState(ctx))
		}
		if seen != "running" {
			t.Fatalf("the first line showed only once the run had %s", seen)
		}
		waitFor(t, ctx, "the run to end", `document.body.dataset.state === "idle"`)
		if got := eval[string](t, ctx, `document.getElementById("badge").dataset.outcome`); got != "ok" {
			t.Errorf("outcome %q, want ok; %s", got, pageState(ctx))
		}
		if out := eval[string](t, ctx, `document.getElementById("output").textContent`); !strings.Contains(out, "goodbye") {
			t.Errorf("output %q lacks the last line", out)
		}
	})

	t.Run("compile error marks its line", func(t *testing.T) {
		example(t, ctx, "compile-error")
		waitFor(t, ctx, "the example", `document.getElementById("code").value.includes("three")`)
		runAction(t, ctx, "#run")
		if got := eval[string](t, ctx, `document.getElementById("badge").dataset.outcome`); got != "build_failed" {
			t.Fatalf("outcome %q, want build_failed; %s", got, pageState(ctx))
		}
		lines := eval[[]string](t, ctx, `[...document.querySelectorAll("#gutter .marked")].map(d => d.dataset.line)`)
		if len(lines) != 1 || lines[0] != "7" {
			t.Fatalf("marked lines %v, want [7] (n + 1)", lines)
		}
		do(t, ctx, "click the marker", chromedp.Click(chromedp.CSS(`#gutter .marked`)))
		line := eval[int](t, ctx, `(() => { const c = document.getElementById("code");
			return c.value.slice(0, c.selectionStart).split("\n").length; })()`)
		if line != 7 {
			t.Errorf("clicking the marker put the cursor on line %d, want 7", line)
		}
		do(t, ctx, "dark", colorScheme("dark"))
		screenshot(t, ctx, "playground-dark")
		do(t, ctx, "light", colorScheme("light"))
	})

	t.Run("tests table with a failure and its output", func(t *testing.T) {
		example(t, ctx, "tests")
		waitFor(t, ctx, "the example's tabs", `document.querySelectorAll("#tabs [role=tab]").length === 4`)
		do(t, ctx, "-cover", chromedp.Click(chromedp.CSS("#cover")))
		runAction(t, ctx, "#test")
		rows := eval[[]string](t, ctx, `[...document.querySelectorAll("#tests tbody tr[data-status]")].map(r => r.cells[0].firstChild.textContent + "=" + r.dataset.status)`)
		want := []string{"TestReverseASCII=pass", "TestReverseUnicode=fail"}
		if strings.Join(rows, ",") != strings.Join(want, ",") {
			t.Fatalf("tests table %v, want %v; %s", rows, want, pageState(ctx))
		}
		shown := eval[string](t, ctx, `[...document.querySelectorAll("#tests tr.testoutput")].filter(r => !r.hidden).map(r => r.textContent).join("|")`)
		if !strings.Contains(shown, `Reverse("héllo")`) {
			t.Errorf("the failed test's output shown: %q, want its t.Errorf message", shown)
		}
		if cov := eval[string](t, ctx, `document.getElementById("coverage").textContent`); !strings.Contains(cov, "% of statements") {
			t.Errorf("coverage %q, want a package's percentage", cov)
		}
		screenshot(t, ctx, "playground-light")
	})

	t.Run("format rewrites the code", func(t *testing.T) {
		setProgram(t, ctx, "package main\nimport \"fmt\"\nfunc main(){\nfmt.Println( \"x\" )}\n")
		// Ctrl+Enter formats (go.dev/play's key).
		do(t, ctx, "Ctrl+Enter", chromedp.Focus(chromedp.CSS("#code")),
			chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
		waitFor(t, ctx, "the format to end", `document.body.dataset.state === "idle" && document.getElementById("badge").dataset.outcome !== undefined`)
		want := "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"x\")\n}\n"
		if got := eval[string](t, ctx, `document.getElementById("code").value`); got != want {
			t.Errorf("formatted code %q, want %q", got, want)
		}
	})

	t.Run("share link opens the same files in a fresh session", func(t *testing.T) {
		example(t, ctx, "tests")
		waitFor(t, ctx, "the example's tabs", `document.querySelectorAll("#tabs [role=tab]").length === 4`)
		before := moduleText(t, ctx)
		do(t, ctx, "Share", chromedp.Click(chromedp.CSS("#share")))
		waitFor(t, ctx, "the link", `document.getElementById("shareurl").value.includes("/p/")`)
		link := eval[string](t, ctx, `document.getElementById("shareurl").value`)
		mine := sessionCookie(t, ctx, url)

		other, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
		defer cancel()
		do(t, other, "open the link", chromedp.Navigate(link))
		waitFor(t, other, "the shared page to be ready", `document.body.dataset.ready === "1"`)
		if got := moduleText(t, other); got != before {
			t.Errorf("the link opened %q, want %q", got, before)
		}
		if theirs := sessionCookie(t, other, url); theirs == mine {
			t.Error("the link's page shares the sharer's session")
		}
	})

	t.Run("program output is text", func(t *testing.T) {
		setProgram(t, ctx, `package main

import "fmt"

func main() {
	fmt.Println("<script>alert(1)</script>")
	fmt.Println("<img src=x onerror=alert(2)>")
}
`)
		runAction(t, ctx, "#run")
		out := eval[string](t, ctx, `document.getElementById("output").textContent`)
		if !strings.Contains(out, "<script>alert(1)</script>") || !strings.Contains(out, "<img src=x onerror=alert(2)>") {
			t.Errorf("output %q: want the characters as printed", out)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll("#output script, #output img").length`); n != 0 {
			t.Errorf("the output made %d elements", n)
		}
		if n := dialogs.Load(); n != 0 {
			t.Errorf("%d dialogs opened", n)
		}
	})

	t.Run("phone width", func(t *testing.T) {
		example(t, ctx, "hello")
		waitFor(t, ctx, "the example", `document.getElementById("code").value.includes("Hello")`)
		runAction(t, ctx, "#run")
		do(t, ctx, "phone", viewport(390, 844, true))
		if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("at 390 px the page is %d px wide: it scrolls sideways", w)
		}
		screenshot(t, ctx, "playground-phone")
	})
}
