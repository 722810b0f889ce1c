package local_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// squatUID is the user TestSubIDRootSquatted runs its backend as: a uid
// with no account on the host and no other use in the tests (the rootless
// test's is 65533, and it may run at the same time: its directory in /tmp
// must stay free).
const squatUID = 65531

// TestSubIDRootSquatted: a user with subordinate ids, whose
// /tmp/go-runtime-sandbox-<uid> another local user made first (/tmp is
// everyone's, and the name is predictable), must not get sandboxes that
// quietly run as its own uid: New refuses, naming the directory, as the
// host-uid row's fix says (remove it, or relax Options.Relax.HostUID).
// Without the refusal any local user can switch off another user's
// per-sandbox host uids by making one directory.
func TestSubIDRootSquatted(t *testing.T) {
	u := newAsUser(t, squatUID, "grs-squat", rootlessSubIDs+65536, false)
	squat := subIDRootOf(squatUID)
	if err := os.RemoveAll(squat); err != nil {
		t.Fatal(err)
	}
	// Another local user (nobody) makes it first, open to all.
	if err := os.Mkdir(squat, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(squat) })
	if err := os.Chmod(squat, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(squat, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cmd := u.command("subid-squat", true)
	out, err := cmd.CombinedOutput()
	t.Logf("the backend as uid %d with %s made by uid 65534:\n%s", squatUID, squat, out)
	if err != nil {
		t.Fatalf("squat helper: %v", err)
	}
	switch {
	case strings.Contains(string(out), "new ok"):
		t.Errorf("New accepted a backend whose sandboxes run as the user's own uid because another user made %s first", squat)
	case !strings.Contains(string(out), "new refused") || !strings.Contains(string(out), squat):
		t.Errorf("New did not refuse naming %s", squat)
	}
}

// squatHelper is the helper mode subid-squat: New as the user, and what
// came of it.
func squatHelper(ctx context.Context, opts local.Options) int {
	b, err := local.New(opts)
	if err != nil {
		fmt.Printf("new refused: %v\n", err)
		return 0
	}
	defer b.Close(ctx)
	fmt.Println("new ok")
	return 0
}
