package goruntime_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/goruntimetest"
)

// openFake opens a Session on the fake backend (goruntimetest): the
// Session's own logic needs no bubblewrap. The backends' tests and the
// conformance corpus (pkg/goruntime/corpus) hold them to the same contract.
func openFake(t *testing.T) *goruntime.Session {
	t.Helper()
	sess, err := goruntime.Open(context.Background(), goruntimetest.New(t.TempDir()), goruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	return sess
}

func TestCloseDoesNotWaitForExecute(t *testing.T) {
	sess := openFake(t)
	done := make(chan error, 1)
	go func() {
		_, err := sess.Execute(context.Background(), goruntime.Request{Command: "sleep 60"})
		done <- err
	}()
	time.Sleep(500 * time.Millisecond) // let the command start
	start := time.Now()
	if err := sess.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Execute of a command whose sandbox was closed returned no error")
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Execute still running 20s after Close returned (Close took %v)", time.Since(start))
	}
	if _, err := sess.Execute(context.Background(), goruntime.Request{Command: "true"}); !errors.Is(err, goruntime.ErrClosed) {
		t.Fatalf("Execute after Close = %v, want ErrClosed", err)
	}
}

func TestExecuteRefusesBadRequestsUpFront(t *testing.T) {
	sess := openFake(t)
	ctx := context.Background()
	bad := []goruntime.Request{
		{Command: "env", Env: map[string]string{"1ABC": "x"}},
		{Command: "env", Env: map[string]string{"X Y": "x"}},
		{Command: "env", Env: map[string]string{"OK": "a\x00b"}},
		{Command: "true", Files: []goruntime.File{{Path: "dir/", Data: []byte("x")}}},
		{Command: "true", Files: []goruntime.File{{Path: "d/" + strings.Repeat("n", 300) + ".go"}}},
	}
	for _, req := range bad {
		if _, err := sess.Execute(ctx, req); err == nil {
			t.Errorf("Execute(%+v) = nil error, want a refusal", req.Env)
		}
	}
	// Nothing was written and the session still works.
	res, err := sess.Execute(ctx, goruntime.Request{Command: "ls -A | wc -l; echo $GOOD", Env: map[string]string{"GOOD": "yes"}})
	if err != nil || res.Stdout != "0\nyes\n" {
		t.Fatalf("after refusals: %+v, %v; want an empty /app and GOOD=yes", res, err)
	}
}

// TestLargeUploadStreams: the files of a request stream into the sandbox
// as one tar archive; the archive is never built in memory. 96 MiB of
// files must cost well under their size in allocations (a built archive
// costs at least its size, and a doubling buffer about twice that), and
// arrive whole.
func TestLargeUploadStreams(t *testing.T) {
	sess := openFake(t)
	const size = 96 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := sess.Execute(context.Background(), goruntime.Request{Files: []goruntime.File{{Path: "big/data.bin", Data: data}}, Command: "wc -c < big/data.bin"})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(res.Stdout); got != strconv.Itoa(size) {
		t.Errorf("the file arrived with %s bytes, want %d", got, size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Errorf("uploading %d MiB allocated %d MiB: the archive was buffered", size>>20, alloc>>20)
	}
}
