package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Escapes through the paths a command controls: writes outside the
// sandbox's own directories, and symlinks the host's file calls meet.

// writeOutsideAttack: a command cannot write anywhere but /app, /tmp and
// its HOME (not /, /usr, /etc, the module cache, GOROOT, /proc, /home or
// the server's /.sandbox), and GOROOT/x does not appear on the host.
func writeOutsideAttack(s *goruntime.Session) findings {
	var f findings
	res := f.mustOK(s, goruntime.Request{Command: "go env GOROOT"})
	if res == nil {
		return f
	}
	goroot := strings.TrimSpace(res.Stdout)
	for _, target := range []string{"/x", "/usr/x", "/etc/x", "/go/pkg/mod/x", goroot + "/x", "/proc/x", "/home/x", "/.sandbox/x"} {
		if res := f.run(s, goruntime.Request{Command: "echo pwned > " + target}); res != nil && res.ExitCode == 0 {
			f.add("writing %s succeeded", target)
		}
	}
	for _, target := range []string{"/app/ok", "/tmp/ok", "$HOME/ok"} {
		f.mustOK(s, goruntime.Request{Command: "echo fine > " + target + " && cat " + target})
	}
	if _, err := os.Stat(filepath.Join(goroot, "x")); err == nil {
		f.add("%s/x appeared on the host", goroot)
	}
	return f
}

func TestWriteOutsideAppFails(t *testing.T) {
	check(t, writeOutsideAttack(openSession(t, newBackend(t, testOptions()))))
}

// symlinkReadAttack: reading a symlink a command pointed out of /app
// fails with ErrPathEscape and an error naming the symlink and its
// target, not only "Access denied"; the file outside stays unread.
func symlinkReadAttack(s *goruntime.Session) findings {
	var f findings
	if f.mustOK(s, goruntime.Request{Command: "ln -s /etc/passwd pw"}) == nil {
		return f
	}
	data, err := s.ReadFile(context.Background(), "pw")
	if !errors.Is(err, goruntime.ErrPathEscape) || !strings.Contains(err.Error(), "pw is a symlink to /etc/passwd") {
		f.add("ReadFile(pw) = %q, %v; want ErrPathEscape naming the symlink", data, err)
	}
	return f
}

func TestReadThroughSymlinkOutSaysSo(t *testing.T) {
	check(t, symlinkReadAttack(openSession(t, newBackend(t, testOptions()))))
}

// symlinkUploadAttack: a directory in /app that an earlier command made a
// symlink to a read-only place (/etc) makes a later upload under it fail
// with an error that says what is in the way, not only tar's words;
// nothing is written outside, and the sandbox stays usable.
func symlinkUploadAttack(s *goruntime.Session) findings {
	var f findings
	if f.mustOK(s, goruntime.Request{Command: "ln -s /etc conf"}) == nil {
		return f
	}
	_, err := s.Execute(context.Background(), goruntime.Request{Files: []goruntime.File{{Path: "conf/app.yaml", Data: []byte("x: 1\n")}}, Command: "true"})
	if err == nil || !strings.Contains(err.Error(), "conf/app.yaml") || !strings.Contains(err.Error(), "symlink") {
		f.add("upload through a symlink to /etc: %v, want an error naming the file and the symlink", err)
	}
	if res := f.mustOK(s, goruntime.Request{Command: "test ! -e /etc/app.yaml && echo ok"}); res != nil && strings.TrimSpace(res.Stdout) != "ok" {
		f.add("the file reached /etc: %q", res.Stdout)
	}
	return f
}

func TestUploadThroughSymlinkOut(t *testing.T) {
	check(t, symlinkUploadAttack(openSession(t, newBackend(t, testOptions()))))
}
