package difftest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"
)

// known is a difference kept on purpose: each server's observation is
// pinned, and docs/sandboxd.md (section doc) explains it.
type known struct {
	upstream, ours, doc string
}

// diffCase sends the same requests to a target and describes what came
// back. Cases run in order on each target, so a case sees the files the
// cases before it left.
type diffCase struct {
	name  string
	run   func(t *testing.T, tg *target) string
	known *known
}

func TestDifferential(t *testing.T) {
	dir := t.TempDir()
	oursBin, upstreamBin := buildBinaries(t, dir)
	targets := []*target{startUpstream(t, upstreamBin, dir), startOurs(t, oursBin, dir)}

	cases := append(processCases(), restCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := make([]string, len(targets))
			for i, tg := range targets {
				got[i] = strings.ReplaceAll(tc.run(t, tg), tg.root, "<ROOT>")
			}
			up, ours := got[0], got[1]
			switch {
			case tc.known == nil && up != ours:
				t.Errorf("servers differ:\n upstream: %s\n ours:     %s", up, ours)
			case tc.known != nil && (up != tc.known.upstream || ours != tc.known.ours):
				t.Errorf("documented difference (docs/sandboxd.md, %s) changed:\n upstream: %s\n   pinned: %s\n ours:     %s\n   pinned: %s",
					tc.known.doc, up, tc.known.upstream, ours, tc.known.ours)
			default:
				t.Logf("upstream: %s", up)
				if tc.known != nil {
					t.Logf("ours:     %s (documented: %s)", ours, tc.known.doc)
				}
			}
		})
	}
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func sh(cmd string) *processv1.ProcessConfig {
	return &processv1.ProcessConfig{Command: []string{"/bin/sh", "-c", cmd}}
}

func code(err error) string { return "code=" + status.Code(err).String() }

// execute describes one Execute call.
func execute(t *testing.T, tg *target, cfg *processv1.ProcessConfig) string {
	res, err := tg.grpc.Execute(callCtx(t), &processv1.ExecuteRequest{Config: cfg})
	if err != nil {
		return code(err)
	}
	return fmt.Sprintf("exit=%d stdout=%q stderr=%q", res.GetExitCode(), res.GetStdout(), res.GetStderr())
}

// stream describes one Start call: whether it opened with an InitEvent,
// each stream's bytes, and the exit code (or the gRPC code it failed
// with). during, if set, runs once the InitEvent has arrived.
func stream(t *testing.T, tg *target, req *processv1.StartRequest, during func(ctx context.Context, pid int32)) string {
	return streamDuring(t, tg, req, during, false)
}

// streamOnOutput is stream with during run once the command's first
// stdout has arrived as well: the command has done what it prints after
// (started its children, set its trap), however late a busy machine ran
// it, where a sleep before during could end first.
func streamOnOutput(t *testing.T, tg *target, req *processv1.StartRequest, during func(ctx context.Context, pid int32)) string {
	return streamDuring(t, tg, req, during, true)
}

func streamDuring(t *testing.T, tg *target, req *processv1.StartRequest, during func(ctx context.Context, pid int32), onOutput bool) string {
	ctx := callCtx(t)
	st, err := tg.grpc.Start(ctx, req)
	if err != nil {
		return code(err)
	}
	var out, errOut bytes.Buffer
	desc := ""
	var pid int32
	for i := 0; ; i++ {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return desc + code(err)
		}
		switch e := ev.GetEvent().(type) {
		case *processv1.StartResponse_Init:
			if i == 0 {
				desc += "init "
			} else {
				desc += "late-init "
			}
			pid = e.Init.GetProcessId()
			if during != nil && !onOutput {
				during(ctx, pid)
				during = nil
			}
		case *processv1.StartResponse_Stdout:
			out.Write(e.Stdout)
			if during != nil && onOutput {
				during(ctx, pid)
				during = nil
			}
		case *processv1.StartResponse_Stderr:
			errOut.Write(e.Stderr)
		case *processv1.StartResponse_Exit:
			desc += fmt.Sprintf("stdout=%q stderr=%q exit=%d", out.String(), errOut.String(), e.Exit.GetExitCode())
		}
	}
	return desc
}

func processCases() []diffCase {
	sigterm := func(t *testing.T, tg *target) func(context.Context, int32) {
		return func(ctx context.Context, pid int32) {
			if _, err := tg.grpc.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: pid, Signal: processv1.Signal_SIGNAL_SIGTERM}); err != nil {
				t.Errorf("%s SendSignal: %v", tg.name, err)
			}
		}
	}
	return []diffCase{
		{name: "Execute/output and exit code", run: func(t *testing.T, tg *target) string {
			return execute(t, tg, sh("echo out; echo err >&2; exit 3"))
		}},
		{name: "Execute/argv without shell", run: func(t *testing.T, tg *target) string {
			return execute(t, tg, &processv1.ProcessConfig{Command: []string{"cat", "a.txt", "sub/b.txt"}})
		}},
		{name: "Execute/empty command", run: func(t *testing.T, tg *target) string {
			return execute(t, tg, &processv1.ProcessConfig{})
		}},
		{name: "Execute/no config", run: func(t *testing.T, tg *target) string {
			return execute(t, tg, nil)
		}},
		{name: "Execute/missing binary", run: func(t *testing.T, tg *target) string {
			return execute(t, tg, &processv1.ProcessConfig{Command: []string{"/no/such/binary"}})
		}},
		{name: "Execute/binary not on PATH", run: func(t *testing.T, tg *target) string {
			return execute(t, tg, &processv1.ProcessConfig{Command: []string{"no-such-command-here"}})
		}},
		{name: "Execute/not executable", run: func(t *testing.T, tg *target) string {
			return execute(t, tg, &processv1.ProcessConfig{Command: []string{"./a.txt"}})
		}},
		{name: "Execute/cwd in root", run: func(t *testing.T, tg *target) string {
			cwd := "sub/deeper"
			cfg := sh("pwd")
			cfg.Cwd = &cwd
			return execute(t, tg, cfg)
		}},
		{name: "Execute/cwd escaping with dotdot", run: func(t *testing.T, tg *target) string {
			cwd := "../.."
			cfg := sh("pwd")
			cfg.Cwd = &cwd
			return execute(t, tg, cfg)
		}},
		{name: "Execute/cwd through escaping symlink", run: func(t *testing.T, tg *target) string {
			cwd := "link-out"
			cfg := sh("pwd")
			cfg.Cwd = &cwd
			return execute(t, tg, cfg)
		}},
		{name: "Execute/cwd missing", run: func(t *testing.T, tg *target) string {
			cwd := "nope"
			cfg := sh("pwd")
			cfg.Cwd = &cwd
			return execute(t, tg, cfg)
		}},
		{name: "Execute/env vars", run: func(t *testing.T, tg *target) string {
			cfg := sh(`echo "$DIFF_A $DIFF_B"`)
			cfg.EnvVars = map[string]string{"DIFF_A": "1", "DIFF_B": "two words"}
			return execute(t, tg, cfg)
		}},
		{name: "Execute/stdin is at EOF", run: func(t *testing.T, tg *target) string {
			return execute(t, tg, sh("cat; echo done"))
		}},
		{name: "Execute/large output", run: func(t *testing.T, tg *target) string {
			res, err := tg.grpc.Execute(callCtx(t), &processv1.ExecuteRequest{Config: sh("head -c 3000000 /dev/zero | tr '\\0' x")})
			if err != nil {
				return code(err)
			}
			return fmt.Sprintf("exit=%d stdout-bytes=%d all-x=%v", res.GetExitCode(), len(res.GetStdout()),
				strings.Trim(string(res.GetStdout()), "x") == "")
		}},
		{name: "Execute/killed by a signal", run: func(t *testing.T, tg *target) string {
			return execute(t, tg, sh("kill -TERM $$"))
		}, known: &known{
			upstream: `exit=-1 stdout="" stderr=""`,
			ours:     `exit=143 stdout="" stderr=""`,
			doc:      "signal exit codes",
		}},
		{name: "Execute/many quick commands all report their exit", run: func(t *testing.T, tg *target) string {
			bad := 0
			for i := range 150 {
				want := int32(i % 3)
				res, err := tg.grpc.Execute(callCtx(t), &processv1.ExecuteRequest{Config: sh("exit " + strconv.Itoa(int(want)))})
				if err != nil || res.GetExitCode() != want {
					bad++
				}
			}
			return fmt.Sprintf("wrong=%d of 150", bad)
		}},
		{name: "Start/streams stdout stderr and exit", run: func(t *testing.T, tg *target) string {
			return stream(t, tg, &processv1.StartRequest{Config: sh("echo one; echo two >&2; echo three; exit 2")}, nil)
		}},
		{name: "Start/empty command", run: func(t *testing.T, tg *target) string {
			return stream(t, tg, &processv1.StartRequest{Config: &processv1.ProcessConfig{}}, nil)
		}},
		{name: "Start/missing binary", run: func(t *testing.T, tg *target) string {
			return stream(t, tg, &processv1.StartRequest{Config: &processv1.ProcessConfig{Command: []string{"/no/such/binary"}}}, nil)
		}},
		{name: "Start/cwd escaping", run: func(t *testing.T, tg *target) string {
			cwd := "/etc"
			cfg := sh("pwd")
			cfg.Cwd = &cwd
			return stream(t, tg, &processv1.StartRequest{Config: cfg}, nil)
		}},
		{name: "Start/many quick commands all report their exit", run: func(t *testing.T, tg *target) string {
			bad := 0
			for range 100 {
				if got := stream(t, tg, &processv1.StartRequest{Config: sh("exit 7")}, nil); got != `init stdout="" stderr="" exit=7` {
					bad++
				}
			}
			return fmt.Sprintf("wrong=%d of 100", bad)
		}},
		{name: "WriteStdin/input then EOF", run: func(t *testing.T, tg *target) string {
			return stream(t, tg, &processv1.StartRequest{Config: sh("cat; echo end")}, func(ctx context.Context, pid int32) {
				for _, req := range []*processv1.WriteStdinRequest{
					{ProcessId: pid, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("line 1\nline 2\n")}},
					{ProcessId: pid, Payload: &processv1.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}},
				} {
					if _, err := tg.grpc.WriteStdin(ctx, req); err != nil {
						t.Errorf("%s WriteStdin: %v", tg.name, err)
					}
				}
			})
		}},
		{name: "WriteStdin/unknown process", run: func(t *testing.T, tg *target) string {
			_, err := tg.grpc.WriteStdin(callCtx(t), &processv1.WriteStdinRequest{ProcessId: 99999, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("x")}})
			return code(err)
		}},
		{name: "SendSignal/SIGTERM ends the command", run: func(t *testing.T, tg *target) string {
			return streamOnOutput(t, tg, &processv1.StartRequest{Config: sh("echo started; sleep 300")}, sigterm(t, tg))
		}, known: &known{
			upstream: `init stdout="started\n" stderr="" exit=-1`,
			ours:     `init stdout="started\n" stderr="" exit=143`,
			doc:      "signal exit codes",
		}},
		{name: "SendSignal/SIGTERM stops the whole process group", run: func(t *testing.T, tg *target) string {
			var child int
			desc := streamOnOutput(t, tg, &processv1.StartRequest{Config: sh("sleep 300 & echo $!; sleep 301")}, sigterm(t, tg))
			// The background child's pid is the first line of stdout.
			if i := strings.Index(desc, `stdout="`); i >= 0 {
				child, _ = strconv.Atoi(strings.TrimSuffix(strings.SplitN(desc[i+8:], `\n`, 2)[0], `"`))
			}
			if child <= 0 {
				return "no child pid in " + desc
			}
			defer syscall.Kill(child, syscall.SIGKILL)
			return fmt.Sprintf("background child gone=%v", goneWithin(child, time.Minute))
		}},
		{name: "SendSignal/SIGINT to a shell loop", run: func(t *testing.T, tg *target) string {
			return streamOnOutput(t, tg, &processv1.StartRequest{Config: sh("trap 'echo caught; exit 5' INT; echo ready; while :; do sleep 0.05; done")},
				func(ctx context.Context, pid int32) {
					if _, err := tg.grpc.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: pid, Signal: processv1.Signal_SIGNAL_SIGINT}); err != nil {
						t.Errorf("%s SendSignal: %v", tg.name, err)
					}
				})
		}},
		{name: "SendSignal/unspecified signal", run: func(t *testing.T, tg *target) string {
			var got string
			stream(t, tg, &processv1.StartRequest{Config: sh("sleep 300")}, func(ctx context.Context, pid int32) {
				_, err := tg.grpc.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: pid})
				got = code(err)
				_, _ = tg.grpc.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: pid, Signal: processv1.Signal_SIGNAL_SIGKILL})
			})
			return got
		}},
		{name: "SendSignal/unknown process", run: func(t *testing.T, tg *target) string {
			_, err := tg.grpc.SendSignal(callCtx(t), &processv1.SendSignalRequest{ProcessId: 99999, Signal: processv1.Signal_SIGNAL_SIGTERM})
			return code(err)
		}},
		{name: "Start/client cancels while a background child runs", run: func(t *testing.T, tg *target) string {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st, err := tg.grpc.Start(ctx, &processv1.StartRequest{Config: sh("sleep 300 & echo $!; wait")})
			if err != nil {
				return code(err)
			}
			var child int
			for child == 0 {
				ev, err := st.Recv()
				if err != nil {
					return code(err)
				}
				if out := ev.GetStdout(); out != nil {
					child, _ = strconv.Atoi(strings.TrimSpace(string(out)))
				}
			}
			defer syscall.Kill(child, syscall.SIGKILL)
			cancel()
			return fmt.Sprintf("background child gone=%v", goneWithin(child, time.Minute))
		}},
		{name: "Execute/deadline passes while a background child runs", run: func(t *testing.T, tg *target) string {
			// Long enough for a busy machine's shell to start the child
			// and write its pid first.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := tg.grpc.Execute(ctx, &processv1.ExecuteRequest{Config: sh("sleep 300 & echo $! > bg.pid; wait")})
			data, rerr := os.ReadFile(filepath.Join(tg.root, "bg.pid"))
			child, _ := strconv.Atoi(strings.TrimSpace(string(data)))
			if rerr != nil || child <= 0 {
				return fmt.Sprintf("%s, no child pid: %v", code(err), rerr)
			}
			defer syscall.Kill(child, syscall.SIGKILL)
			return fmt.Sprintf("%s background child gone=%v", code(err), goneWithin(child, time.Minute))
		}},
		{name: "PTY/size and output", run: func(t *testing.T, tg *target) string {
			// Upstream sizes the PTY only after the child has started, so a
			// command that asks at once may see "0 0" on either server
			// (docs/sandboxd.md, "PTY size race"); wait a moment first.
			// Upstream may also lose output written just before the
			// command exits (its reader stops at the PTY's EIO; seen under
			// load: "24 80" without "hi"), so the command lingers after
			// its last line.
			return stream(t, tg, &processv1.StartRequest{Config: sh("sleep 0.3; stty size; echo hi; sleep 0.3"), Pty: &processv1.PTY{Cols: 80, Rows: 24}}, nil)
		}},
		{name: "ResizeTTY/running PTY", run: func(t *testing.T, tg *target) string {
			return stream(t, tg, &processv1.StartRequest{Config: sh("sleep 0.5; stty size"), Pty: &processv1.PTY{Cols: 80, Rows: 24}},
				func(ctx context.Context, pid int32) {
					if _, err := tg.grpc.ResizeTTY(ctx, &processv1.ResizeTTYRequest{ProcessId: pid, Cols: 100, Rows: 30}); err != nil {
						t.Errorf("%s ResizeTTY: %v", tg.name, err)
					}
				})
		}},
		{name: "ResizeTTY/process without PTY", run: func(t *testing.T, tg *target) string {
			var got string
			stream(t, tg, &processv1.StartRequest{Config: sh("sleep 300")}, func(ctx context.Context, pid int32) {
				_, err := tg.grpc.ResizeTTY(ctx, &processv1.ResizeTTYRequest{ProcessId: pid, Cols: 10, Rows: 10})
				got = code(err)
				_, _ = tg.grpc.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: pid, Signal: processv1.Signal_SIGNAL_SIGKILL})
			})
			return got
		}},
		{name: "ResizeTTY/unknown process", run: func(t *testing.T, tg *target) string {
			_, err := tg.grpc.ResizeTTY(callCtx(t), &processv1.ResizeTTYRequest{ProcessId: 99999, Cols: 10, Rows: 10})
			return code(err)
		}},
	}
}

func multipartBody(t *testing.T, field, content string) (http.Header, io.Reader) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	fw, err := w.CreateFormFile(field, "upload.bin")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(fw, content)
	_ = w.Close()
	return http.Header{"Content-Type": {w.FormDataContentType()}}, &buf
}

func restCases() []diffCase {
	call := func(method, path string) func(*testing.T, *target) string {
		return func(t *testing.T, tg *target) string { return restCall(t, tg, method, path, nil, nil) }
	}
	put := func(path, body string) func(*testing.T, *target) string {
		return func(t *testing.T, tg *target) string {
			return restCall(t, tg, http.MethodPut, path, nil, strings.NewReader(body))
		}
	}
	return []diffCase{
		{name: "REST/health", run: call("GET", "/v1/health")},
		{name: "REST/metadata", run: func(t *testing.T, tg *target) string {
			// Only our own variables: the rest of SANDBOX_* depends on the machine.
			desc := restCall(t, tg, "GET", "/v1/metadata", nil, nil)
			if strings.Contains(desc, `"SANDBOX_DIFF_META":"visible"`) && !strings.Contains(desc, "SANDBOX_DIFF_TOKEN") {
				return firstField(desc) + " shows SANDBOX_DIFF_META, hides SANDBOX_DIFF_TOKEN"
			}
			return desc
		}},
		{name: "REST/get file", run: call("GET", "/v1/files/a.txt")},
		{name: "REST/get file by absolute root path", run: func(t *testing.T, tg *target) string {
			return restCall(t, tg, "GET", "/v1/files"+tg.root+"/sub/b.txt", nil, nil)
		}},
		{name: "REST/head file", run: call("HEAD", "/v1/files/a.txt")},
		{name: "REST/head missing", run: call("HEAD", "/v1/files/missing.txt")},
		{name: "REST/get range", run: func(t *testing.T, tg *target) string {
			return restCall(t, tg, "GET", "/v1/files/a.txt", http.Header{"Range": {"bytes=1-3"}}, nil)
		}},
		{name: "REST/get missing", run: call("GET", "/v1/files/missing.txt")},
		{name: "REST/list directory", run: call("GET", "/v1/files/sub")},
		{name: "REST/list root", run: call("GET", "/v1/files/")},
		{name: "REST/escape with encoded dotdot", run: call("GET", "/v1/files/..%2F..%2Fetc%2Fpasswd")},
		{name: "REST/escape through symlink", run: call("GET", "/v1/files/link-out/passwd")},
		{name: "REST/put raw", run: put("/v1/files/new/nested/c.txt", "sea")},
		{name: "REST/get what was put", run: call("GET", "/v1/files/new/nested/c.txt")},
		{name: "REST/put with mode", run: put("/v1/files/exec.sh?mode=0755", "#!/bin/sh\necho run\n")},
		{name: "REST/mode shows in listing and runs", run: func(t *testing.T, tg *target) string {
			return restCall(t, tg, "GET", "/v1/files/", nil, nil) + " | " + execute(t, tg, &processv1.ProcessConfig{Command: []string{"./exec.sh"}})
		}},
		{name: "REST/put bad mode", run: put("/v1/files/bad.txt?mode=777", "x")},
		{name: "REST/put onto a directory", run: put("/v1/files/sub", "x")},
		{name: "REST/put escaping", run: put("/v1/files/..%2Fescape.txt", "x")},
		{name: "REST/put multipart", run: func(t *testing.T, tg *target) string {
			h, body := multipartBody(t, "file", "from a form")
			return restCall(t, tg, "PUT", "/v1/files/form.txt", h, body) + " | " + restCall(t, tg, "GET", "/v1/files/form.txt", nil, nil)
		}},
		{name: "REST/put multipart without file part", run: func(t *testing.T, tg *target) string {
			h, body := multipartBody(t, "other", "x")
			return restCall(t, tg, "PUT", "/v1/files/form2.txt", h, body)
		}},
		{name: "REST/wrong method", run: call("POST", "/v1/files/a.txt")},
		{name: "REST/unknown route", run: call("GET", "/v1/nope")},
		{name: "REST/delete file", run: call("DELETE", "/v1/files/a.txt")},
		{name: "REST/delete missing", run: call("DELETE", "/v1/files/a.txt")},
		{name: "REST/delete non-empty directory", run: call("DELETE", "/v1/files/full")},
		{name: "REST/delete bad recursive flag", run: call("DELETE", "/v1/files/full?recursive=maybe")},
		{name: "REST/delete directory recursively", run: call("DELETE", "/v1/files/full?recursive=true")},
		{name: "REST/delete empty directory", run: call("DELETE", "/v1/files/empty")},
		{name: "REST/delete escaping symlink itself", run: call("DELETE", "/v1/files/link-out")},
		{name: "REST/delete root", run: call("DELETE", "/v1/files/")},
		{name: "REST/delete root recursively clears it", run: func(t *testing.T, tg *target) string {
			return restCall(t, tg, "DELETE", "/v1/files/?recursive=true", nil, nil) + " | " + restCall(t, tg, "GET", "/v1/files/", nil, nil)
		}},
	}
}

// firstField is the "status=..." part of a restCall description.
func firstField(desc string) string {
	f, _, _ := strings.Cut(desc, " ")
	return f
}
