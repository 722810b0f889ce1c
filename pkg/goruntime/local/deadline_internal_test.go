package local

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCallLimitGrowsWithBytes: a file call's deadline is its floor plus
// its allowance per MiB moved, without overflow for the largest uploads.
func TestCallLimitGrowsWithBytes(t *testing.T) {
	l := &callLimit{floor: 2 * time.Minute, perMiB: time.Second, start: time.Now()}
	if got := l.allowed(); got != 2*time.Minute {
		t.Errorf("nothing moved: %s; want the floor, 2m0s", got)
	}
	l.moved.Store(10 << 20)
	if got := l.allowed(); got != 2*time.Minute+10*time.Second {
		t.Errorf("10 MiB moved: %s; want 2m10s", got)
	}
	l.moved.Store(64 << 30)
	if got := l.allowed(); got != 2*time.Minute+65536*time.Second {
		t.Errorf("64 GiB moved: %s; want 2m0s + 65536 s", got)
	}
	if l.passed(l.start.Add(time.Hour)) || !l.passed(l.start.Add(20*time.Hour)) {
		t.Error("64 GiB moved: passed after 1 h or not after 20 h")
	}
	if err := l.cause("upload x"); !errors.Is(err, errNoAnswer) || !strings.Contains(err.Error(), "upload x") {
		t.Errorf("cause: %v", err)
	}
}
