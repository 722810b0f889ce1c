package goruntime

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestValidateFilesRefusesEscapes(t *testing.T) {
	bad := []string{"", "/etc/passwd", "../x", "a/../../x", "a/..", `\x`, "a\x00b", ".", "./"}
	for _, p := range bad {
		err := ValidateFiles([]File{{Path: p}})
		if !errors.Is(err, ErrPathEscape) {
			t.Errorf("ValidateFiles(%q) = %v, want ErrPathEscape", p, err)
		}
	}
	good := []string{"main.go", "a/b/c.go", "./x.go", "dir/.hidden", "a..b"}
	for _, p := range good {
		if err := ValidateFiles([]File{{Path: p}}); err != nil {
			t.Errorf("ValidateFiles(%q) = %v, want nil", p, err)
		}
	}
	if err := ValidateFiles([]File{{Path: "a.go"}, {Path: "./a.go"}}); err == nil {
		t.Error("ValidateFiles accepted the same path twice")
	}
	// A file and a file below it: the archive would write the first, then
	// fail on the second, half done.
	for _, files := range [][]File{{{Path: "a"}, {Path: "a/b.go"}}, {{Path: "x/y/z.go"}, {Path: "x/y"}}} {
		if err := ValidateFiles(files); err == nil || !strings.Contains(err.Error(), "also given as a file") {
			t.Errorf("ValidateFiles(%q, %q) = %v, want an error naming both", files[0].Path, files[1].Path, err)
		}
	}
	if err := ValidateFiles([]File{{Path: "ab"}, {Path: "a/b.go"}, {Path: "a/c.go"}}); err != nil {
		t.Errorf("ValidateFiles of siblings = %v", err)
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	in := []File{
		{Path: "go.mod", Data: []byte("module x\n")},
		{Path: "cmd/tool/main.go", Data: []byte("package main\n"), Mode: 0o600},
		{Path: "run.sh", Data: []byte("#!/bin/sh\n"), Mode: 0o755 | 0o4000}, // setuid bit must be dropped
	}
	data, err := Archive(in)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(data))
	for i := 0; ; i++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			if i != len(in) {
				t.Fatalf("archive holds %d entries, want %d", i, len(in))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		want := in[i]
		wantMode := int64(want.Mode.Perm())
		if wantMode == 0 {
			wantMode = 0o644
		}
		if hdr.Name != want.Path || hdr.Typeflag != tar.TypeReg || hdr.Mode != wantMode || string(body) != string(want.Data) {
			t.Errorf("entry %d = %s type %c mode %o %q; want %s regular mode %o %q",
				i, hdr.Name, hdr.Typeflag, hdr.Mode, body, want.Path, wantMode, want.Data)
		}
	}
	if _, err := Archive([]File{{Path: "../evil"}}); !errors.Is(err, ErrPathEscape) {
		t.Errorf("Archive(../evil) = %v, want ErrPathEscape", err)
	}
}

func TestValidateFilesNames(t *testing.T) {
	for _, p := range []string{"dir/", "a/" + strings.Repeat("x", 256)} {
		if err := ValidateFiles([]File{{Path: p}}); err == nil {
			t.Errorf("ValidateFiles(%.40q) = nil, want an error", p)
		}
	}
	if err := ValidateFiles([]File{{Path: strings.Repeat("x", 255)}}); err != nil {
		t.Errorf("ValidateFiles(255-byte name) = %v, want nil", err)
	}
}

func TestValidateEnv(t *testing.T) {
	for _, k := range []string{"", "1A", "A-B", "A B", "é", "BASH_FUNC_x%%", "A=B"} {
		if err := ValidateEnv(map[string]string{k: "v"}); err == nil {
			t.Errorf("ValidateEnv(%q) = nil, want an error", k)
		}
	}
	if err := ValidateEnv(map[string]string{"_A1": "any value\nwith lines"}); err != nil {
		t.Errorf("ValidateEnv(_A1) = %v", err)
	}
	if err := ValidateEnv(map[string]string{"A": "x\x00"}); err == nil {
		t.Error("ValidateEnv accepted a NUL in a value")
	}
}
