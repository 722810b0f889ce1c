package backendflag

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/frontend/optionflag"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

func parse(t *testing.T, args ...string) *Flags {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAllowModules: --allow-modules is a comma-separated list of module
// path patterns for local.Options.AllowModules; a bad pattern is an error
// naming the flag; by default the list is empty (feature off).
func TestAllowModules(t *testing.T) {
	o, err := parse(t).localOptions()
	if err != nil || o.AllowModules != nil {
		t.Fatalf("default: %q, %v; want none", o.AllowModules, err)
	}
	o, err = parse(t, "--allow-modules=github.com/foo/*, golang.org/x/text").localOptions()
	if err != nil || !reflect.DeepEqual(o.AllowModules, []string{"github.com/foo/*", "golang.org/x/text"}) {
		t.Fatalf("two patterns: %q, %v", o.AllowModules, err)
	}
	for _, bad := range []string{"github.com/foo/[", "a.com,,b.com", "a.com/../b"} {
		_, err := parse(t, "--allow-modules="+bad).New(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), "--allow-modules") {
			t.Errorf("--allow-modules=%s: %v; want an error naming the flag", bad, err)
		}
	}
}

// TestFileSizeFlag: --file-size-mb sets local.Options.FileSizeBytes
// (default local.DefaultFileSizeBytes); zero or less is an error naming
// the flag.
func TestFileSizeFlag(t *testing.T) {
	o, err := parse(t).localOptions()
	if err != nil || o.FileSizeBytes != local.DefaultFileSizeBytes {
		t.Fatalf("default: %d, %v; want %d", o.FileSizeBytes, err, int64(local.DefaultFileSizeBytes))
	}
	o, err = parse(t, "--file-size-mb=64").localOptions()
	if err != nil || o.FileSizeBytes != 64<<20 {
		t.Fatalf("--file-size-mb=64: %d, %v", o.FileSizeBytes, err)
	}
	if _, err := parse(t, "--file-size-mb=0").localOptions(); err == nil || !strings.Contains(err.Error(), "--file-size-mb") {
		t.Fatalf("--file-size-mb=0: %v; want an error naming the flag", err)
	}
}

// TestMemoryBudgetFlags: --memory-budget-mb sets
// local.Options.MemoryBudgetBytes and --disk-mb DiskBytes; 0, the
// default of both, leaves the backend's default (which for the disk
// depends on whether it is in memory); a negative value is an error
// naming the flag.
func TestMemoryBudgetFlags(t *testing.T) {
	o, err := parse(t).localOptions()
	if err != nil || o.MemoryBudgetBytes != 0 || o.DiskBytes != 0 {
		t.Fatalf("default: budget %d, disk %d, %v; want 0 and 0 (the backend's defaults)", o.MemoryBudgetBytes, o.DiskBytes, err)
	}
	o, err = parse(t, "--memory-budget-mb=4096", "--disk-mb=512").localOptions()
	if err != nil || o.MemoryBudgetBytes != 4<<30 || o.DiskBytes != 512<<20 {
		t.Fatalf("--memory-budget-mb=4096 --disk-mb=512: %d, %d, %v", o.MemoryBudgetBytes, o.DiskBytes, err)
	}
	for _, fl := range []string{"--memory-budget-mb", "--disk-mb"} {
		if _, err := parse(t, fl+"=-1").localOptions(); err == nil || !strings.Contains(err.Error(), fl) {
			t.Errorf("%s=-1: %v; want an error naming the flag", fl, err)
		}
	}
	f := parse(t)
	err = f.Explain(errors.New("raise Options.MemoryBudgetBytes or lower Options.DiskBytes"))
	if err.Error() != "raise --memory-budget-mb or lower --disk-mb" {
		t.Errorf("Explain: %q", err)
	}
}

// TestSnapshotShareFlags: --snapshot-mb sets local.Options.SnapshotBytes
// and --snapshot-per-owner-mb SnapshotBytesPerOwner; 0, the default of
// both, leaves the backend's defaults (4 GiB, a quarter of it); a
// negative value is an error naming the flag, and the backend's name for
// the share reaches the user as the flag.
func TestSnapshotShareFlags(t *testing.T) {
	o, err := parse(t).localOptions()
	if err != nil || o.SnapshotBytes != 0 || o.SnapshotBytesPerOwner != 0 {
		t.Fatalf("default: quota %d, share %d, %v; want 0 and 0 (the backend's defaults)", o.SnapshotBytes, o.SnapshotBytesPerOwner, err)
	}
	o, err = parse(t, "--snapshot-mb=2048", "--snapshot-per-owner-mb=256").localOptions()
	if err != nil || o.SnapshotBytes != 2<<30 || o.SnapshotBytesPerOwner != 256<<20 {
		t.Fatalf("--snapshot-mb=2048 --snapshot-per-owner-mb=256: %d, %d, %v", o.SnapshotBytes, o.SnapshotBytesPerOwner, err)
	}
	for _, fl := range []string{"--snapshot-mb", "--snapshot-per-owner-mb"} {
		if _, err := parse(t, fl+"=-1").New(t.Context(), nil); err == nil || !strings.Contains(err.Error(), fl+"=-1") {
			t.Errorf("%s=-1: %v; want an error naming the flag", fl, err)
		}
	}
	if got := parse(t).ExplainText("raise Options.SnapshotBytesPerOwner"); got != "raise --snapshot-per-owner-mb" {
		t.Errorf("Explain: %q", got)
	}
}

// TestWarmPoolFlags: --local-warm-pool-size is the local backend's count,
// --warm-pool-name agent-sandbox's pool; the old names still set them and
// print a one-line notice naming the new one.
func TestWarmPoolFlags(t *testing.T) {
	o, err := parse(t, "--local-warm-pool-size=3").localOptions()
	if err != nil || o.WarmPool != 3 {
		t.Fatalf("--local-warm-pool-size=3: %d, %v", o.WarmPool, err)
	}
	if f := parse(t, "--warm-pool-name=p"); f.AgentSandbox.WarmPool != "p" {
		t.Fatalf("--warm-pool-name=p: %q", f.AgentSandbox.WarmPool)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	f := Register(fs)
	if err := fs.Parse([]string{"--local-warm-pool=0", "--warm-pool=old"}); err != nil {
		t.Fatal(err)
	}
	o, err = f.localOptions()
	if err != nil || o.WarmPool != -1 || f.AgentSandbox.WarmPool != "old" {
		t.Fatalf("old names: local %d, agent-sandbox %q, %v; want -1 (off) and old", o.WarmPool, f.AgentSandbox.WarmPool, err)
	}
	want := "warning: --local-warm-pool is deprecated; use --local-warm-pool-size\n" +
		"warning: --warm-pool is deprecated; use --warm-pool-name\n"
	if out.String() != want {
		t.Errorf("notices %q, want %q", out.String(), want)
	}
}

// TestExplainNamesRegisteredFlags: every flag Explain names is one
// Register adds, and each backend's Options field maps to its own flag.
func TestExplainNamesRegisteredFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	Register(fs)
	for _, table := range []map[string]string{optionflag.Local, optionflag.AgentSandbox} {
		for field, fl := range table {
			name, _, _ := strings.Cut(strings.TrimPrefix(fl, "--"), "=")
			if fs.Lookup(name) == nil {
				t.Errorf("Options.%s: flag %s is not registered", field, fl)
			}
		}
	}
	for _, name := range local.RelaxNames {
		found := false
		for _, fl := range optionflag.Local {
			found = found || fl == "--relax="+name
		}
		if !found {
			t.Errorf("no Relax field explained as --relax=%s", name)
		}
	}
}

// TestExplain: Options fields in a backend's error become flags, per
// backend; the result still wraps the error.
func TestExplain(t *testing.T) {
	base := fmt.Errorf("local backend: disk quota 1 bytes (Options.DiskBytes, 0 MiB); relax it (Options.Relax.DiskQuota) or see local.Options.AllowModules and Options.Nope: %w", goruntime.ErrUnavailable)
	got := parse(t).Explain(base)
	want := "local backend: disk quota 1 bytes (--disk-mb, 0 MiB); relax it (--relax=disk) or see --allow-modules and Options.Nope: " + goruntime.ErrUnavailable.Error()
	if got.Error() != want {
		t.Errorf("local:\n got %s\nwant %s", got, want)
	}
	if !errors.Is(got, goruntime.ErrUnavailable) {
		t.Error("the explained error no longer wraps ErrUnavailable")
	}
	as := parse(t, "--backend=agent-sandbox")
	if got := as.ExplainText("(Options.WarmPool) or set Options.Connectivity=in-cluster-pod-ip"); got != "(--warm-pool-name) or set --connectivity=in-cluster-pod-ip" {
		t.Errorf("agent-sandbox: %s", got)
	}
	if got := parse(t).ExplainText("Options.WarmPool"); got != "--local-warm-pool-size" {
		t.Errorf("local WarmPool: %s", got)
	}
	if parse(t).Explain(nil) != nil {
		t.Error("Explain(nil) != nil")
	}
}

// TestNewErrorsNameFlags: an Options check inside local.New reaches the
// user as the flag to change.
func TestNewErrorsNameFlags(t *testing.T) {
	_, err := parse(t, "--memory-mb=8").New(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "--memory-mb") || strings.Contains(err.Error(), "Options.") {
		t.Fatalf("--memory-mb=8: %v; want an error naming --memory-mb, not the Options field", err)
	}
}
