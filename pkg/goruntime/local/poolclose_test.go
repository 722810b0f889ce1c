package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// TestWarmPoolCloseWaitsForDeadClaims: a pool sandbox that died while it
// waited (here: its processes SIGKILLed, as a machine-wide kill or the
// OOM killer does) is skipped by a claim and closed in the background;
// Backend.Close waits for that close too, so nothing of the sandbox is
// left in the state directory once Close returns.
func TestWarmPoolCloseWaitsForDeadClaims(t *testing.T) {
	b := newBackend(t, poolOptions(1))
	waitPool(t, b, 1)
	ids := local.WarmPoolReadyIDs(b)
	if len(ids) != 1 {
		t.Fatalf("warm pool of 1 holds %v", ids)
	}
	id := ids[0]
	data, err := os.ReadFile(filepath.Join(b.StateDir(), "sandboxes", id, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Keep []int `json:"keep"`
	}
	if err := json.Unmarshal(data, &m); err != nil || len(m.Keep) == 0 {
		t.Fatalf("sandbox %s state: keep %v, %v", id, m.Keep, err)
	}
	for _, pid := range m.Keep {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	waitGone(t, "killed pool sandbox", m.Keep)

	if got := local.WarmPoolClaim(b); got != "" {
		t.Fatalf("claimed sandbox %s from a pool whose one sandbox was killed", got)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(b.StateDir(), "sandboxes", id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead pool sandbox %s is still in the state directory after Backend.Close returned: %v", id, err)
	}
}
