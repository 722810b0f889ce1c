package goruntimetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// CheckHandles is the conformance check of a goruntime.HandleBackend
// (every implementation runs it in its tests, as testing/fstest's TestFS
// for a file system): it makes handles of two owners and checks that a
// handle's sandbox keeps its files across a Disconnect and an
// AttachHandle, that another owner's ID and a missing one get the same
// error wrapping goruntime.ErrSandboxNotFound (byte for byte once the ID
// is taken out), that IDs have 128 bits, that listing shows an owner's own
// handles with their labels and CountHandles counts them, that a bad spec
// makes nothing, that delete ends the handle, and that a handle idle past
// ttl (short: the check waits for it, up to ttl + expireWait) is gone. It
// cleans up what it made and returns the first failure.
func CheckHandles(ctx context.Context, hb goruntime.HandleBackend, ttl, expireWait time.Duration) (err error) {
	const ownerA, ownerB = "check-owner-a", "check-owner-b"
	var made []string
	defer func() {
		for _, id := range made {
			_ = hb.DeleteHandle(context.WithoutCancel(ctx), ownerA, id)
		}
	}()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s handles: "+format, append([]any{hb.Name()}, args...)...)
	}

	// A bad spec makes nothing.
	before, err := hb.ListHandles(ctx, ownerA)
	if err != nil {
		return fail("ListHandles: %v", err)
	}
	for _, bad := range []goruntime.HandleSpec{
		{TTL: 0},
		{TTL: time.Minute, Labels: map[string]string{"bad key": "x"}},
		{TTL: time.Minute, Labels: map[string]string{"k": strings.Repeat("v", 64)}},
	} {
		if _, sb, err := hb.CreateHandle(ctx, ownerA, bad); err == nil {
			_ = sb.Close(ctx)
			return fail("CreateHandle(%+v) succeeded, want an error", bad)
		}
	}
	if _, sb, err := hb.CreateHandle(ctx, "", goruntime.HandleSpec{TTL: time.Minute}); err == nil {
		_ = sb.Close(ctx)
		return fail("CreateHandle with an empty owner succeeded")
	}
	if after, err := hb.ListHandles(ctx, ownerA); err != nil || len(after) != len(before) {
		return fail("after refused creates: %d handles (err %v), want %d", len(after), err, len(before))
	}

	// Create, write a file, release.
	labels := map[string]string{"project": "conformance", "step": "1"}
	h, sb, err := hb.CreateHandle(ctx, ownerA, goruntime.HandleSpec{Labels: labels, TTL: time.Hour})
	if err != nil {
		return fail("CreateHandle: %v", err)
	}
	made = append(made, h.ID)
	if !goruntime.ValidHandleID(h.ID) {
		return fail("handle ID %q is not 32 hex digits (128 bits)", h.ID)
	}
	if h.Owner != ownerA || h.TTL != time.Hour || h.Labels["project"] != "conformance" || h.Created.IsZero() || h.Expires.Before(h.LastUsed) {
		return fail("CreateHandle returned %+v", h)
	}
	if err := sb.WriteFile(ctx, "kept.txt", strings.NewReader("kept")); err != nil {
		return fail("write in the handle's sandbox: %v", err)
	}
	if err := sb.Disconnect(ctx); err != nil {
		return fail("Disconnect: %v", err)
	}

	// Attach again: the file is there, the handle renewed.
	h2, sb2, err := hb.AttachHandle(ctx, ownerA, h.ID)
	if err != nil {
		return fail("AttachHandle by its owner: %v", err)
	}
	data, err := sb2.ReadFile(ctx, "kept.txt")
	_ = sb2.Disconnect(ctx)
	if err != nil || string(data) != "kept" {
		return fail("after attach, kept.txt = %q, %v; want \"kept\"", data, err)
	}
	if h2.ID != h.ID || h2.LastUsed.Before(h.LastUsed) || h2.Labels["step"] != "1" {
		return fail("AttachHandle returned %+v after %+v", h2, h)
	}

	// Another owner's ID answers as a missing one.
	missing := goruntime.NewHandleID()
	_, _, errMissing := hb.AttachHandle(ctx, ownerB, missing)
	_, _, errForeign := hb.AttachHandle(ctx, ownerB, h.ID)
	if err := sameNotFound(errMissing, missing, errForeign, h.ID); err != nil {
		return fail("AttachHandle: %v", err)
	}
	if err := sameNotFound(hb.DeleteHandle(ctx, ownerB, missing), missing, hb.DeleteHandle(ctx, ownerB, h.ID), h.ID); err != nil {
		return fail("DeleteHandle: %v", err)
	}
	if _, _, err := hb.AttachHandle(ctx, ownerA, "../"+h.ID); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		return fail("AttachHandle of a malformed ID: %v, want ErrSandboxNotFound", err)
	}
	listB, err := hb.ListHandles(ctx, ownerB)
	if err != nil {
		return fail("ListHandles of another owner: %v", err)
	}
	for _, x := range listB {
		if x.ID == h.ID {
			return fail("another owner lists handle %s", h.ID)
		}
	}
	listA, err := hb.ListHandles(ctx, ownerA)
	if err != nil {
		return fail("ListHandles: %v", err)
	}
	// The count covers every owner's handles (others may exist: the
	// backend may be shared, so only a lower bound is checked).
	if n, err := hb.CountHandles(ctx); err != nil || n < len(listA)+len(listB) {
		return fail("CountHandles = %d, %v; want at least the %d handles the two owners list", n, err, len(listA)+len(listB))
	}
	found := false
	for _, x := range listA {
		found = found || (x.ID == h.ID && x.Labels["project"] == "conformance")
	}
	if !found {
		return fail("the owner's list %+v lacks handle %s with its labels", listA, h.ID)
	}

	// Delete ends it.
	if err := hb.DeleteHandle(ctx, ownerA, h.ID); err != nil {
		return fail("DeleteHandle by its owner: %v", err)
	}
	if _, _, err := hb.AttachHandle(ctx, ownerA, h.ID); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		return fail("AttachHandle after delete: %v, want ErrSandboxNotFound", err)
	}

	// Idle past its TTL: gone.
	he, sbe, err := hb.CreateHandle(ctx, ownerA, goruntime.HandleSpec{TTL: ttl})
	if err != nil {
		return fail("CreateHandle with TTL %s: %v", ttl, err)
	}
	made = append(made, he.ID)
	if err := sbe.Disconnect(ctx); err != nil {
		return fail("Disconnect: %v", err)
	}
	deadline := time.Now().Add(ttl + expireWait)
	for {
		time.Sleep(ttl / 4)
		list, err := hb.ListHandles(ctx, ownerA)
		if err != nil {
			return fail("ListHandles: %v", err)
		}
		listed := false
		for _, x := range list {
			listed = listed || x.ID == he.ID
		}
		if !listed {
			break
		}
		if time.Now().After(deadline) {
			return fail("handle %s with TTL %s still listed %s after its last use", he.ID, ttl, ttl+expireWait)
		}
	}
	if _, _, err := hb.AttachHandle(ctx, ownerA, he.ID); !errors.Is(err, goruntime.ErrSandboxNotFound) {
		return fail("AttachHandle of an expired handle: %v, want ErrSandboxNotFound", err)
	}
	return nil
}

// sameNotFound checks that two errors wrap ErrSandboxNotFound and read
// the same once their IDs are replaced.
func sameNotFound(a error, aID string, b error, bID string) error {
	if !errors.Is(a, goruntime.ErrSandboxNotFound) || !errors.Is(b, goruntime.ErrSandboxNotFound) {
		return fmt.Errorf("missing ID: %v; another owner's ID: %v; want both wrapping ErrSandboxNotFound", a, b)
	}
	as := strings.ReplaceAll(a.Error(), aID, "ID")
	bs := strings.ReplaceAll(b.Error(), bID, "ID")
	if as != bs {
		return fmt.Errorf("another owner's ID answers %q, a missing one %q: an existence oracle", bs, as)
	}
	return nil
}
