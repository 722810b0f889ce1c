package goruntime

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// oneRequestServer is a sandbox whose server takes a call's files with
// its command (UnpackExecSandbox), or, with unsupported, one that
// predates that and answers errors.ErrUnsupported. It records each way
// the Session used: UnpackExec (the archive's names and the command),
// Unpack (lengthServer) and Exec (oldServer).
type oneRequestServer struct {
	lengthServer
	unsupported bool
	refuse      error // UnpackExec's files error, if set
	asked       int   // UnpackExec calls
	together    [][]string
}

func (o *oneRequestServer) UnpackExec(_ context.Context, archive []byte, req ExecRequest) (*ExecResult, error) {
	o.asked++
	if o.unsupported {
		return nil, fmt.Errorf("unpack and execute: the runtime server has no /unpack-execute: %w", errors.ErrUnsupported)
	}
	if o.refuse != nil {
		return nil, &FilesError{Err: o.refuse}
	}
	names := []string{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		names = append(names, hdr.Name)
	}
	o.together = append(o.together, append(names, "$ "+req.Command))
	return &ExecResult{Stdout: "ran\n"}, nil
}

func newOneRequestServer() *oneRequestServer {
	return &oneRequestServer{lengthServer: lengthServer{oldServer: oldServer{uploaded: map[string][]string{}}}}
}

// TestFilesGoWithCommand: a call's files up to 1 MiB go with its command
// in one request; larger files, and files without a command, go to
// Unpack first; the result is the one request's.
func TestFilesGoWithCommand(t *testing.T) {
	sb := newOneRequestServer()
	s := NewSession(sb, Options{})
	ctx := context.Background()
	small := []File{{Path: "go.mod", Data: []byte("module m\n")}, {Path: "main.go", Data: []byte("package main\n")}}
	res, err := s.Execute(ctx, Request{Files: small, Command: "go run ."})
	if err != nil || res.Stdout != "ran\n" {
		t.Fatalf("Execute = %+v, %v", res, err)
	}
	if _, err := s.Execute(ctx, Request{Files: []File{{Path: "big.bin", Data: make([]byte, 1<<20)}}, Command: "ls"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Execute(ctx, Request{Files: small}); err != nil {
		t.Fatal(err)
	}
	if want := "[[go.mod main.go $ go run .]]"; fmt.Sprint(sb.together) != want {
		t.Errorf("one-request calls %v, want %s", sb.together, want)
	}
	if want := "[[big.bin] [go.mod main.go]]"; fmt.Sprint(sb.entries) != want {
		t.Errorf("Unpack calls %v, want %s (the large files, then the files without a command)", sb.entries, want)
	}
	if want := "[ls]"; fmt.Sprint(sb.commands) != want {
		t.Errorf("Exec calls %q, want %s", sb.commands, want)
	}
}

// TestUnpackExecFallsBack: against a server that predates the one
// request, the first call's files and command go in two, and every later
// call goes in two without asking again.
func TestUnpackExecFallsBack(t *testing.T) {
	sb := newOneRequestServer()
	sb.unsupported = true
	s := NewSession(sb, Options{})
	ctx := context.Background()
	for i := range 3 {
		files := []File{{Path: fmt.Sprintf("f%d.go", i), Data: []byte("package main\n")}}
		if _, err := s.Execute(ctx, Request{Files: files, Command: fmt.Sprint("echo ", i)}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if sb.asked != 1 {
		t.Errorf("UnpackExec asked %d times, want once", sb.asked)
	}
	if want := "[[f0.go] [f1.go] [f2.go]]"; fmt.Sprint(sb.entries) != want {
		t.Errorf("Unpack calls %v, want %s", sb.entries, want)
	}
	if want := "[echo 0 echo 1 echo 2]"; fmt.Sprint(sb.commands) != want {
		t.Errorf("Exec calls %q, want %s", sb.commands, want)
	}
}

// TestUnpackExecFilesRefused: files the server would not write fail the
// call as the files' error (what Unpack's would say), not the command's.
func TestUnpackExecFilesRefused(t *testing.T) {
	sb := newOneRequestServer()
	sb.refuse = fmt.Errorf("unpack: Access denied: %w", ErrPathEscape)
	s := NewSession(sb, Options{})
	_, err := s.Execute(context.Background(), Request{Files: []File{{Path: "main.go", Data: []byte("x")}}, Command: "go run ."})
	if !errors.Is(err, ErrPathEscape) || !strings.HasPrefix(err.Error(), "unpack 1 files: ") {
		t.Errorf("Execute error %v; want the files' error (unpack 1 files: ..., ErrPathEscape)", err)
	}
	if len(sb.commands) != 0 || len(sb.together) != 0 {
		t.Errorf("ran %q %v after the files were refused", sb.commands, sb.together)
	}
}
