package server

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// The base directory's path names another directory than the server
// opened at start (the local backend mounts a snapshot's layers over a
// pooled sandbox's /app; here the directory is swapped by renames): the
// server's file operations and commands then reach the new one, and the
// old one is left alone.
func TestBaseDirectoryReplaced(t *testing.T) {
	ts := startServer(t, nil)
	if err := os.WriteFile(filepath.Join(ts.Base, "old.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _ := ts.get(t, "/exists/old.txt"); code != http.StatusOK {
		t.Fatalf("exists old.txt before the swap: %d", code)
	}
	moved := ts.Base + ".old"
	if err := os.Rename(ts.Base, moved); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(moved) })
	if err := os.Mkdir(ts.Base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts.Base, "new.txt"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, body := ts.get(t, "/download/new.txt")
	if string(body) != "new" {
		t.Fatalf("download new.txt after the swap = %q, want the new directory's file", body)
	}
	body2, ct, _ := multipartBody("up.bin", 10, 1)
	if code, raw := ts.upload(t, body2, ct); code != http.StatusOK {
		t.Fatalf("upload after the swap: %d %s", code, raw)
	}
	if _, err := os.Stat(filepath.Join(ts.Base, "up.bin")); err != nil {
		t.Errorf("the upload did not land in the new directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(moved, "up.bin")); err == nil {
		t.Errorf("the upload landed in the old directory")
	}
	if res := ts.run(t, "cat new.txt"); res.Stdout != "new" {
		t.Errorf("a command's working directory after the swap: cat new.txt = %q (exit %d, %q)", res.Stdout, res.ExitCode, res.Stderr)
	}
}
