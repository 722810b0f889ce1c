package apierror

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/wire"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// permissionDeniedPrefix starts the message of a 403 for a file the
// server's user may not access, from servers that predate error_code.
const permissionDeniedPrefix = "Permission denied"

// Decode reads an error answer: status is the HTTP status, body what the
// server sent (any shape; only its first bytes matter). It returns the
// message to show (the body's "message" when it has one, followed by its
// "reason" when it has one, else the trimmed body) and the sentinel a caller can test with errors.Is, or nil when the
// answer is no error callers tell apart:
//
//	not_found, 404                        -> goruntime.ErrNotExist
//	path_escape, 403                      -> goruntime.ErrPathEscape
//	permission_denied, 403 "Permission…"  -> fs.ErrPermission
//	too_large, 413                        -> goruntime.ErrTooLarge
//	no_space, 507                         -> goruntime.ErrDiskFull
//	busy (409)                            -> goruntime.ErrSandboxBusy
//
// The body's error_code decides; without one (upstream's runtime, an older
// server, a proxy's page) the status does.
func Decode(status int, body []byte) (msg string, sentinel error) {
	msg = strings.TrimSpace(string(body))
	var m wire.Message
	if json.Unmarshal(body, &m) == nil && m.Message != "" {
		msg = m.Message
		if m.Reason != "" {
			msg += ": " + m.Reason
		}
	}
	switch m.Code {
	case wire.CodeNotFound:
		return msg, goruntime.ErrNotExist
	case wire.CodePathEscape:
		return msg, goruntime.ErrPathEscape
	case wire.CodePermissionDenied:
		return msg, fs.ErrPermission
	case wire.CodeTooLarge:
		return msg, goruntime.ErrTooLarge
	case wire.CodeNoSpace:
		return msg, goruntime.ErrDiskFull
	case wire.CodeBusy:
		return msg, goruntime.ErrSandboxBusy
	}
	switch status {
	case http.StatusNotFound:
		return msg, goruntime.ErrNotExist
	case http.StatusForbidden:
		if strings.HasPrefix(msg, permissionDeniedPrefix) {
			return msg, fs.ErrPermission
		}
		return msg, goruntime.ErrPathEscape
	case http.StatusRequestEntityTooLarge:
		return msg, goruntime.ErrTooLarge
	case http.StatusInsufficientStorage:
		return msg, goruntime.ErrDiskFull
	}
	return msg, nil
}

// NoRoute reports whether an answer says the server has no such route: a
// 404 without an error_code (a server older than the route, upstream's
// runtime), where a route the server has answers 404 with one (not_found).
func NoRoute(status int, body []byte) bool {
	if status != http.StatusNotFound {
		return false
	}
	var m wire.Message
	return json.Unmarshal(body, &m) != nil || m.Code == ""
}
