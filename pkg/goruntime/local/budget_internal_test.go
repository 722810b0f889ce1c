package local

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
)

// TestMemoryBudgetArithmetic: the default budget is half the host's
// memory, and with the default sizes of a user's sandbox (1 GiB of
// memory, a 1 GiB disk in memory) it holds 5 on these 24 GiB machines
// (MemTotal 24,683,784 kB); a pool sandbox is held at 64 MiB, never
// above the sandbox's own limit.
func TestMemoryBudgetArithmetic(t *testing.T) {
	const memTotal = 24_683_784 << 10
	budget := defaultMemoryBudget(memTotal)
	if budget != memTotal/2 {
		t.Errorf("defaultMemoryBudget(%d) = %d, want half", int64(memTotal), budget)
	}
	if defaultMemoryBudget(0) != 0 {
		t.Error("an unknown MemTotal gives a budget")
	}
	o := Options{MemoryBytes: DefaultMemoryBytes, DiskBytes: DefaultMemoryDiskBytes}
	if n := budget / o.chargedMemory(true); n != 5 {
		t.Errorf("the default budget holds %d default sandboxes of a user, want 5", n)
	}
	if n := budget / (Options{MemoryBytes: DefaultMemoryBytes, DiskBytes: DefaultDiskBytes}).chargedMemory(true); n != 2 {
		t.Errorf("with a 4 GiB disk in memory it holds %d, want 2", n)
	}

	full := o.cgroupLimits(true, true)
	held := heldLimits(full)
	if held.MemoryBytes != poolMemoryBytes || held.FilesBytes != 0 || held.Processes != full.Processes || !held.Background {
		t.Errorf("heldLimits(%+v) = %+v, want a memory limit of %d and the rest as it was", full, held, poolMemoryBytes)
	}
	small := cgroups.Limits{MemoryBytes: 32 << 20, FilesBytes: 16 << 20}
	if h := heldLimits(small); h.MemoryBytes != 48<<20 {
		t.Errorf("heldLimits of a 48 MiB sandbox = %d MiB, want its own 48", h.MemoryBytes>>20)
	}
}

func TestSizeText(t *testing.T) {
	for n, want := range map[int64]string{1 << 30: "1 GiB", 4 << 30: "4 GiB", 640 << 20: "640 MiB", 1536 << 20: "1536 MiB", 64 << 20: "64 MiB"} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestBudgetError: a sandbox the budget refuses gets an error wrapping
// ErrHostLimit and goruntime.ErrUnavailable that says what is promised
// and names the settings to change; another failure is only unavailable.
func TestBudgetError(t *testing.T) {
	b := budget{opts: Options{MemoryBytes: 96 << 20, DiskBytes: 64 << 20}}
	err := b.err(fmt.Errorf("make it: %w", &cgroups.OverBudget{Budget: 480 << 20, Promised: 480 << 20, Live: 3, Need: 160 << 20}))
	if !errors.Is(err, ErrHostLimit) || !errors.Is(err, goruntime.ErrUnavailable) {
		t.Errorf("refused: %v; want ErrHostLimit and ErrUnavailable", err)
	}
	for _, want := range []string{"live sandboxes (3, of every process and state directory)", "promised 480 MiB of 480 MiB", "Options.MemoryBudgetBytes", "needs 160 MiB", "96 MiB for its processes, Options.MemoryBytes", "64 MiB disk, which is in memory, Options.DiskBytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refused: %q does not say %q", err, want)
		}
	}
	other := b.err(errors.New("permission denied"))
	if errors.Is(other, ErrHostLimit) || !errors.Is(other, goruntime.ErrUnavailable) {
		t.Errorf("a cgroup that could not be made: %v; want ErrUnavailable only", other)
	}
}

// TestMemoryNoteStatesTheLimit: the note of a command that hit the
// memory limit states the limit the cgroup applies: on a memory disk,
// the processes' memory and up to the whole disk more while it is empty.
func TestMemoryNoteStatesTheLimit(t *testing.T) {
	b := &Backend{opts: Options{MemoryBytes: 1 << 30, DiskBytes: 4 << 30}, host: host{memoryDisk: true}}
	note := b.opts.limitNote(goruntime.LimitMemory, b.host.memoryDisk)
	for _, want := range []string{"1 GiB for its processes", "up to 4 GiB more while its disk is empty", "the disk is in memory (Options.DiskBytes)", "share 5 GiB"} {
		if !strings.Contains(note, want) {
			t.Errorf("memory disk: note %q does not say %q", note, want)
		}
	}
	b.host.memoryDisk = false
	if note := b.opts.limitNote(goruntime.LimitMemory, b.host.memoryDisk); !strings.Contains(note, "1024 MiB for all its processes") || strings.Contains(note, "disk") {
		t.Errorf("ext4 disk: note %q", note)
	}
}

// TestBudgetHoldsASandbox: with disks in memory, a budget smaller than
// one sandbox's promise is refused (by New's validate), naming the
// settings; without, it is not applied.
func TestBudgetHoldsASandbox(t *testing.T) {
	o := Options{MemoryBytes: 96 << 20, DiskBytes: 64 << 20, MemoryBudgetBytes: 100 << 20}
	err := o.budgetProblem(true)
	if err == nil || !strings.Contains(err.Error(), "Options.MemoryBudgetBytes") || !strings.Contains(err.Error(), "promised 160 MiB") {
		t.Errorf("a budget of 100 MiB for sandboxes of 160: %v", err)
	}
	if err := o.budgetProblem(false); err != nil {
		t.Errorf("ext4 disks: %v", err)
	}
	o.MemoryBudgetBytes = 160 << 20
	if err := o.budgetProblem(true); err != nil {
		t.Errorf("a budget of exactly one sandbox: %v", err)
	}
}
