package wire

// ExecuteRequest is the body of POST /execute.
type ExecuteRequest struct {
	// Command is run with /bin/sh -c in the base directory.
	Command string `json:"command"`
	// TimeoutSeconds (extension) overrides the server's default deadline
	// for this command; 0 or absent means the default.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// Env (extension) is added to the command's environment.
	Env map[string]string `json:"env,omitempty"`
}

// UnpackExecutePath is POST's route (ours) for a call's files and its
// command in one request: the body is an UnpackExecuteRequest; the files
// are written as POST /unpack writes them, then the command runs as POST
// /execute runs it, and the answer is /execute's. When the files cannot
// all be written the command does not run and the answer is /unpack's
// error. A server without the route answers 404 without an error code:
// the client sends the files with /unpack, then the command.
const UnpackExecutePath = "/unpack-execute"

// MaxInlineArchiveBytes is the largest Archive an UnpackExecuteRequest
// carries (its tar bytes, before base64): the few source files of a
// usual call. Larger archives go to /unpack as a stream of their own.
const MaxInlineArchiveBytes = 1 << 20

// UnpackExecuteRequest is the body of POST UnpackExecutePath: an
// /execute request and the tar archive of its files (what POST /unpack
// takes; base64 in JSON).
type UnpackExecuteRequest struct {
	ExecuteRequest
	Archive []byte `json:"archive"`
}

// ExecuteResponse is the 200 body of POST /execute: the legacy fields
// first, then our extensions.
type ExecuteResponse struct {
	// Stdout and Stderr are capped per stream (the server's
	// --max-output-bytes, counted in JSON-encoded bytes, marker included);
	// each byte that is not UTF-8 becomes U+FFFD.
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// ExitCode is ExitTimedOut (124) when the deadline killed the
	// command, SignalExitCode(N) (128+N) when signal N did.
	ExitCode        int     `json:"exit_code"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
	TimedOut        bool    `json:"timed_out"`
	Signal          int     `json:"signal"`      // 0 when no signal ended the command
	DurationMS      float64 `json:"duration_ms"` // wall time of the command, milliseconds
	// CPUMS is the CPU time (user and system) of the command and of the
	// descendants it waited for, milliseconds: what it cost whatever the
	// load beside it.
	CPUMS float64 `json:"cpu_ms"`
}

// FileEntry is one element of the GET /list/{path} array.
type FileEntry struct {
	Name    string  `json:"name"`
	Size    int64   `json:"size"`     // bytes
	Type    string  `json:"type"`     // "file" or "directory"
	ModTime float64 `json:"mod_time"` // seconds since the Unix epoch
}

// Message is the body of /upload's 200 and of every error status our
// handlers answer (a route or method that does not exist gets FastAPI's
// {"detail": ...} instead, as upstream's).
type Message struct {
	Message string `json:"message"`
	// Code (extension) says which error this is, for clients that map
	// errors to their own (pkg/goruntime/internal/apierror); absent on 200.
	Code ErrorCode `json:"error_code,omitempty"`
	// Reason (extension) says more than an upstream-compatible Message
	// may, e.g. which symlink made a name escape; absent when there is
	// nothing to add.
	Reason string `json:"reason,omitempty"`
}

// ErrorCode is the machine-readable kind of an error answer, the
// "error_code" field of Message. Clients must treat an unknown or absent
// code by the HTTP status alone.
type ErrorCode string

const (
	// CodePathEscape (403): the name leads outside the base directory or
	// cannot name a file.
	CodePathEscape ErrorCode = "path_escape"
	// CodePermissionDenied (403): the name is inside the base directory
	// but the server's user may not read or write it (EACCES, EPERM).
	CodePermissionDenied ErrorCode = "permission_denied"
	// CodeNotFound (404): the file or directory does not exist, or is not
	// a directory where one is needed.
	CodeNotFound ErrorCode = "not_found"
	// CodeTooLarge (413): the request body is over the server's limit.
	CodeTooLarge ErrorCode = "too_large"
	// CodeBadRequest (400): the request is malformed.
	CodeBadRequest ErrorCode = "bad_request"
	// CodeConflict (409): the upload's target or a parent is the wrong
	// kind of file.
	CodeConflict ErrorCode = "conflict"
	// CodeNoSpace (507): a write failed because the file system holding
	// the base directory is full (bytes or inodes: ENOSPC, EDQUOT).
	CodeNoSpace ErrorCode = "no_space"
	// CodeInternal (500): the server failed on its side (I/O).
	CodeInternal ErrorCode = "internal"
	// CodeBusy (409): the sandbox runs a command (or a process a command
	// left behind), or another snapshot or restore is under way, and the
	// operation needs it still (a snapshot, a restore).
	CodeBusy ErrorCode = "busy"
)

// Snapshots of a sandbox's files (our extension; docs/sandbox-server.md,
// "Snapshots"). GET SnapshotPath answers a tar of the sandbox's files,
// streamed, with the trailers SnapshotStatusTrailer ("ok", or the
// ErrorCode of what went wrong once the answer had begun) and
// SnapshotErrorTrailer (the message); only a tar whose status is "ok" is
// whole and consistent. POST SnapshotPath?mode=SnapshotModeRestore or
// SnapshotModeAdd writes such a tar back in place. Both answer 409 with
// CodeBusy while anything runs in the sandbox.
//
// A snapshot's entries are named by the area they belong to, so that a
// tar taken in one sandbox lands in another whatever its directories'
// paths: SnapshotAreaApp/<path> (the base directory),
// SnapshotAreaGoPath/<path> (GOPATH's first entry, without the caches
// below), SnapshotAreaGoModCache/<path> (GOMODCACHE) and
// SnapshotAreaGoCache/<path> (GOCACHE).
const (
	SnapshotPath          = "/snapshot"
	SnapshotStatusTrailer = "X-Snapshot-Status"
	SnapshotErrorTrailer  = "X-Snapshot-Error"
	// SnapshotStatusOK is SnapshotStatusTrailer's value for a whole tar.
	SnapshotStatusOK = "ok"
	// SnapshotModeRestore empties the base directory and GOPATH (but
	// the caches) before writing the tar: a rollback in place.
	SnapshotModeRestore = "restore"
	// SnapshotModeAdd writes the tar over what is there: a fresh
	// sandbox opened from a snapshot.
	SnapshotModeAdd = "add"

	SnapshotAreaApp        = "app"
	SnapshotAreaGoPath     = "gopath"
	SnapshotAreaGoModCache = "gomodcache"
	SnapshotAreaGoCache    = "gocache"
)
