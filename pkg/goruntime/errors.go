package goruntime

import "errors"

// Errors a caller can test with errors.Is. Backends wrap them with what
// failed.
var (
	// ErrNotExist: a file or directory asked for does not exist.
	ErrNotExist = errors.New("file does not exist")
	// ErrIsDir: a file asked for is a directory (Session.ReadAt).
	ErrIsDir = errors.New("is a directory")
	// ErrPathEscape: a path leaves the sandbox's work directory (absolute,
	// "..", or through a symlink).
	ErrPathEscape = errors.New("path escapes the sandbox work directory")
	// ErrTooLarge: an upload or a request is over a size limit.
	ErrTooLarge = errors.New("too large")
	// ErrDiskFull: writing a file into the sandbox failed because its
	// disk quota (bytes or inodes) is used up. Free space with a command
	// (a call without files, e.g. `rm -rf big`) or Session.Reset.
	ErrDiskFull = errors.New("the sandbox's disk is full")
	// ErrSandboxNotFound: no sandbox has the ID given to Attach.
	ErrSandboxNotFound = errors.New("sandbox not found")
	// ErrSandboxGone: the sandbox died or was deleted while in use, or
	// stopped answering (its server let a call pass the call's deadline:
	// it is stuck, or a command replaced it) and was stopped.
	ErrSandboxGone = errors.New("sandbox is gone")
	// ErrClosed: the Session or Sandbox was already closed or disconnected.
	ErrClosed = errors.New("session closed")
	// ErrUnavailable: the backend cannot run sandboxes here (bubblewrap
	// missing, namespaces forbidden, cluster unreachable). The wrapping error
	// names the fix.
	ErrUnavailable = errors.New("backend unavailable")
)
