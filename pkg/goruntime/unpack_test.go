package goruntime

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// oldServer stands for a sandbox whose runtime server predates /unpack:
// Unpack answers errors.ErrUnsupported; WriteFile and Exec record what
// the Session sent instead.
type oldServer struct {
	unpacks  int
	uploaded map[string][]string // file name -> names in its tar archive
	commands []string
}

func (o *oldServer) ID() string { return "old" }
func (o *oldServer) Unpack(_ context.Context, r io.Reader) error {
	o.unpacks++
	_, _ = io.Copy(io.Discard, r)
	return fmt.Errorf("unpack: the runtime server has no /unpack: %w", errors.ErrUnsupported)
}
func (o *oldServer) WriteFile(_ context.Context, name string, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		o.uploaded[name] = append(o.uploaded[name], hdr.Name)
	}
}
func (o *oldServer) Exec(_ context.Context, req ExecRequest) (*ExecResult, error) {
	o.commands = append(o.commands, req.Command)
	return &ExecResult{}, nil
}
func (o *oldServer) ReadFile(context.Context, string) ([]byte, error) { return nil, ErrNotExist }
func (o *oldServer) List(context.Context, string) ([]FileInfo, error) { return nil, ErrNotExist }
func (o *oldServer) Close(context.Context) error                      { return nil }
func (o *oldServer) Disconnect(context.Context) error                 { return nil }

// TestUnpackFallsBackToTar: a sandbox whose server cannot /unpack still
// gets every call's files (uploaded as one archive that tar unpacks), and
// the Session asks /unpack only once.
func TestUnpackFallsBackToTar(t *testing.T) {
	sb := &oldServer{uploaded: map[string][]string{}}
	s := NewSession(sb, Options{})
	ctx := context.Background()
	for i := range 3 {
		files := []File{{Path: "main.go", Data: []byte("package main\n")}, {Path: fmt.Sprintf("p/f%d.go", i), Data: []byte("package p\n")}}
		if _, err := s.Execute(ctx, Request{Files: files}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if sb.unpacks != 1 {
		t.Errorf("Unpack asked %d times, want once", sb.unpacks)
	}
	if len(sb.uploaded) != 3 || len(sb.commands) != 3 {
		t.Fatalf("uploaded %v, ran %q; want 3 archives, each unpacked by a command", sb.uploaded, sb.commands)
	}
	for name, entries := range sb.uploaded {
		if len(entries) != 2 || entries[0] != "main.go" {
			t.Errorf("archive %s holds %v, want main.go and p/f<i>.go", name, entries)
		}
		found := false
		for _, c := range sb.commands {
			found = found || strings.HasPrefix(c, "tar -xf "+name+" ")
		}
		if !found {
			t.Errorf("archive %s was never unpacked (commands %q)", name, sb.commands)
		}
	}
}

// lengthServer records, for each Unpack, whether the archive came with
// its length known (a reader with Len, which net/http sends with a
// Content-Length in one write) and the names it held.
type lengthServer struct {
	oldServer
	known   []bool
	entries [][]string
}

func (l *lengthServer) Unpack(_ context.Context, r io.Reader) error {
	_, ok := r.(interface{ Len() int })
	l.known = append(l.known, ok)
	var names []string
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		names = append(names, hdr.Name)
	}
	l.entries = append(l.entries, names)
	return nil
}

// TestSmallArchiveSentWhole: a call's files up to inMemoryArchiveBytes
// reach Unpack as one archive of known length; more are streamed (never
// held in memory whole); both carry every file.
func TestSmallArchiveSentWhole(t *testing.T) {
	sb := &lengthServer{oldServer: oldServer{uploaded: map[string][]string{}}}
	s := NewSession(sb, Options{})
	ctx := context.Background()
	small := []File{{Path: "go.mod", Data: []byte("module m\n")}, {Path: "main.go", Data: []byte("package main\n")}}
	large := []File{{Path: "big.bin", Data: make([]byte, inMemoryArchiveBytes+1)}, {Path: "main.go", Data: []byte("package main\n")}}
	for _, files := range [][]File{small, large} {
		if _, err := s.Execute(ctx, Request{Files: files, Command: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	if len(sb.known) != 2 || !sb.known[0] || sb.known[1] {
		t.Errorf("length known per call %v, want [true false] (small whole, large streamed)", sb.known)
	}
	want := [][]string{{"go.mod", "main.go"}, {"big.bin", "main.go"}}
	if fmt.Sprint(sb.entries) != fmt.Sprint(want) {
		t.Errorf("archives held %v, want %v", sb.entries, want)
	}
}
