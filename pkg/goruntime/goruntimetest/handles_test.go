package goruntimetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

func TestHandlesConformance(t *testing.T) {
	b := goruntimetest.New(t.TempDir())
	if err := goruntimetest.CheckHandles(context.Background(), b, time.Second, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := b.Live(); n != 0 {
		t.Errorf("%d sandboxes left open after the check", n)
	}
}

// A handle whose clock passed its TTL is gone and its sandbox closed; a
// use before that renews it.
func TestHandleExpiryRenewedOnUse(t *testing.T) {
	ctx := context.Background()
	b := goruntimetest.New(t.TempDir())
	now := time.Now()
	b.SetClock(func() time.Time { return now })
	h, sb, err := b.CreateHandle(ctx, "alice", goruntime.HandleSpec{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_ = sb.Disconnect(ctx)
	now = now.Add(50 * time.Second)
	if _, sb, err = b.AttachHandle(ctx, "alice", h.ID); err != nil {
		t.Fatalf("attach before the TTL: %v", err)
	}
	_ = sb.Disconnect(ctx)
	now = now.Add(50 * time.Second) // 100 s after create, 50 s after use
	if _, _, err := b.AttachHandle(ctx, "alice", h.ID); err != nil {
		t.Fatalf("attach 50 s after a use with a 1 min TTL: %v", err)
	}
	now = now.Add(61 * time.Second)
	if _, _, err := b.AttachHandle(ctx, "alice", h.ID); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		t.Fatalf("attach past the TTL: %v, want ErrSandboxNotFound", err)
	}
	if b.Live() != 0 || b.Handles() != 0 {
		t.Errorf("after expiry: %d sandboxes, %d handles; want 0, 0", b.Live(), b.Handles())
	}
}

// oracle tells another owner's handle from a missing one: the check must
// catch it.
type oracle struct{ *goruntimetest.Backend }

func (o oracle) AttachHandle(ctx context.Context, owner, id string) (goruntime.Handle, goruntime.Sandbox, error) {
	h, sb, err := o.Backend.AttachHandle(ctx, owner, id)
	if err != nil && o.Backend.Handles() > 0 && goruntime.ValidHandleID(id) {
		for _, other := range []string{"check-owner-a"} {
			if hs, _ := o.Backend.ListHandles(ctx, other); len(hs) > 0 && hs[0].ID == id {
				return h, sb, errors.New("sandbox handle belongs to someone else: " + goruntime.ErrSandboxNotFound.Error())
			}
		}
	}
	return h, sb, err
}

func TestCheckHandlesCatchesAnOracle(t *testing.T) {
	err := goruntimetest.CheckHandles(context.Background(), oracle{goruntimetest.New(t.TempDir())}, time.Second, time.Second)
	if err == nil {
		t.Fatal("CheckHandles passed a backend that tells another owner's handle from a missing one")
	}
	t.Log(err)
}
