package bench

// What the first-call section (firstcall.go) talks to mcp-server with:
// its start as a user, the calls, the notifications counted meanwhile,
// and its log, watched for the lines that say the seed builds are
// complete.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notifications counts the progress and log notifications a client got.
type notifications struct{ progress, logs atomic.Int64 }

// take returns the counts so far and starts again from zero.
func (n *notifications) take() (progress, logs int64) {
	return n.progress.Swap(0), n.logs.Swap(0)
}

// startFirstCallServer starts the built mcp-server as u on state over
// stdio (its log at debug level into logs) and returns the initialized
// client, whose notifications n counts.
func (r *runner) startFirstCallServer(ctx context.Context, u firstCallUser, state string, logs *watchedLog, n *notifications) (*mcp.ClientSession, error) {
	args := []string{"--log-level=debug", "--state-dir=" + state}
	if u.relax != "" {
		args = append(args, "--relax="+u.relax)
	}
	cmd := u.command(ctx, r.bins["mcp-server"], args...)
	cmd.Stderr = logs
	opts := &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { n.progress.Add(1) },
		LoggingMessageHandler:       func(context.Context, *mcp.LoggingMessageRequest) { n.logs.Add(1) },
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, opts).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("start mcp-server as %s: %w (its log: %s)", u.name, err, logs)
	}
	return cs, nil
}

// firstCallTimeout is the calls' timeout_seconds: past the default 60 s,
// so that a first call on a very busy machine is measured, not cut.
const firstCallTimeout = 300

// runGoCode calls run_go_code with files and a progress token and checks
// the program printed want ("": anything).
func runGoCode(ctx context.Context, cs *mcp.ClientSession, files map[string]string, command, want, token string) error {
	params := &mcp.CallToolParams{Name: "run_go_code", Arguments: map[string]any{"files": files, "command": command, "timeout_seconds": firstCallTimeout}}
	params.SetProgressToken(token)
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return fmt.Errorf("run_go_code: %w", err)
	}
	var out struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	data, _ := json.Marshal(res.StructuredContent)
	if json.Unmarshal(data, &out) != nil || res.IsError || (want != "" && out.Stdout != want) {
		text, _ := json.Marshal(res.Content)
		return fmt.Errorf("run_go_code: unexpected result %s %s", data, text)
	}
	return nil
}

// watchedLog is a process's log, kept, that says when lines containing
// given texts arrive.
type watchedLog struct {
	mu      sync.Mutex
	b       strings.Builder
	texts   map[string]chan time.Time // each gets the time its text arrived, once
	pending map[string]bool           // the texts not arrived yet
}

func newWatchedLog(texts ...string) *watchedLog {
	w := &watchedLog{texts: map[string]chan time.Time{}, pending: map[string]bool{}}
	for _, t := range texts {
		w.texts[t] = make(chan time.Time, 1)
		w.pending[t] = true
	}
	return w
}

func (w *watchedLog) Write(p []byte) (int, error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	for t := range w.pending {
		if strings.Contains(w.b.String(), t) {
			w.texts[t] <- now
			delete(w.pending, t)
		}
	}
	return len(p), nil
}

func (w *watchedLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// wait returns when text arrived, waiting for it; text must be one
// newWatchedLog was given, and waited for once.
func (w *watchedLog) wait(ctx context.Context, text string) (time.Time, error) {
	w.mu.Lock()
	ch, ok := w.texts[text]
	w.mu.Unlock()
	if !ok {
		return time.Time{}, errors.New("not a text the log watches")
	}
	select {
	case at := <-ch:
		return at, nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}
