package local_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/localtest"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// TestInheritedFDs: a program that opens sandboxes while holding
// descriptors without close-on-exec (its launcher's: a directory, a file
// open for appending, a pipe, a socket) hands none of them to a sandbox.
// A command, through the runtime contract and through the process API,
// sees only its standard streams, and no process of the sandbox
// (bubblewrap, the runtime server, its companion) holds them.
func TestInheritedFDs(t *testing.T) {
	files, in := localtest.Inherit(t)
	cmd := helperCmd("descriptors")
	cmd.ExtraFiles = files
	checkDescriptorsHelper(t, cmd, in)
}

// descriptorsUID is the user TestInheritedFDsAsUser runs the backend as
// (beside the other rootless tests' 65525 and 65529 to 65533; each test's
// user has subordinate ids of its own).
const descriptorsUID = 65527

// TestInheritedFDsAsUser is the same for a backend run by a user other
// than root, with its sandboxes' own subordinate ids.
func TestInheritedFDsAsUser(t *testing.T) {
	u := newAsUser(t, descriptorsUID, "grs-descriptors", rootlessSubIDs+5*65536, true)
	files, in := localtest.Inherit(t)
	cmd := u.command("descriptors", true)
	cmd.ExtraFiles = files
	checkDescriptorsHelper(t, cmd, in)
}

// checkDescriptorsHelper runs a descriptors helper, checks the
// descriptors of its sandbox's processes from here (root) while the
// helper waits, and fails with every leak found.
func checkDescriptorsHelper(t *testing.T, cmd *exec.Cmd, in localtest.Inherited) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var bad []string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		pids, ok := strings.CutPrefix(lines.Text(), "pids ")
		if !ok {
			bad = append(bad, lines.Text())
			continue
		}
		for _, p := range strings.Fields(pids) {
			pid, _ := strconv.Atoi(p)
			found, err := in.CheckProcess(pid)
			if localtest.NotVisible(err) {
				t.Logf("not checked from the host: %v", err)
				continue
			}
			if err != nil {
				t.Error(err)
			}
			bad = append(bad, found...)
		}
		stdin.Close() // the helper closes its sandbox and exits
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr.String())
	}
	if len(bad) > 0 {
		t.Errorf("descriptors the backend's process inherited reached the sandbox:\n%s", strings.Join(bad, "\n"))
	}
}

// descriptorsHelper is the helper of TestInheritedFDs: a process started
// holding localtest.Inherit's objects opens a sandbox and runs
// localtest.ListCommand in it both ways. It prints each leak found, then
// "pids" and the host pids of the sandbox's processes, and keeps the
// sandbox until its standard input ends.
func descriptorsHelper(ctx context.Context, opts local.Options) int {
	in, err := localtest.InheritedHere()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, err := local.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer b.Close(context.WithoutCancel(ctx))
	sb, err := b.Open(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sb.Close(context.WithoutCancel(ctx))
	req := goruntime.ExecRequest{Command: localtest.ListCommand}
	res, err := sb.Exec(ctx, req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "exec:", err)
		return 1
	}
	for _, b := range in.CheckCommand(res.Stdout + res.Stderr) {
		fmt.Println("command (runtime contract): " + b)
	}
	res, err = sb.(goruntime.StreamingSandbox).ExecStream(ctx, req, func(goruntime.Chunk) {})
	if err != nil {
		fmt.Fprintln(os.Stderr, "exec stream:", err)
		return 1
	}
	for _, b := range in.CheckCommand(res.Stdout + res.Stderr) {
		fmt.Println("command (process API): " + b)
	}
	pids, err := localtest.SandboxProcesses(sb.(*local.Sandbox).Dir())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if len(pids) < 3 {
		fmt.Fprintln(os.Stderr, "sandbox processes", pids, "want bubblewrap, the server and its companion at least")
		return 1
	}
	fmt.Println("pids", strings.Trim(fmt.Sprint(pids), "[]"))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}
