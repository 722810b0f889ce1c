package apierror

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		body     string
		msg      string
		sentinel error
	}{
		{"code decides over status", 400, `{"message":"gone","error_code":"not_found"}`, "gone", goruntime.ErrNotExist},
		{"escape by code", 403, `{"message":"Access denied","error_code":"path_escape"}`, "Access denied", goruntime.ErrPathEscape},
		{"permission by code", 403, `{"message":"x","error_code":"permission_denied"}`, "x", fs.ErrPermission},
		{"too large by code", 413, `{"message":"big","error_code":"too_large"}`, "big", goruntime.ErrTooLarge},
		{"busy by code", 409, `{"message":"a command runs","error_code":"busy"}`, "a command runs", goruntime.ErrSandboxBusy},
		{"plain 409", 409, `{"message":"in the way","error_code":"conflict"}`, "in the way", nil},
		{"upstream 403", 403, `{"message":"Access denied"}`, "Access denied", goruntime.ErrPathEscape},
		{"older server's permission 403", 403, `{"message":"Permission denied: \"f\""}`, `Permission denied: "f"`, fs.ErrPermission},
		{"plain 404", 404, `{"detail":"Not Found"}`, `{"detail":"Not Found"}`, goruntime.ErrNotExist},
		{"plain 413 text", 413, "too big\n", "too big", goruntime.ErrTooLarge},
		{"unknown code, other status", 500, `{"message":"disk full","error_code":"internal"}`, "disk full", nil},
		{"proxy page", 502, "<html>bad gateway</html>", "<html>bad gateway</html>", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, sentinel := Decode(tc.status, []byte(tc.body))
			if msg != tc.msg {
				t.Errorf("msg = %q, want %q", msg, tc.msg)
			}
			if !errors.Is(sentinel, tc.sentinel) || (tc.sentinel == nil) != (sentinel == nil) {
				t.Errorf("sentinel = %v, want %v", sentinel, tc.sentinel)
			}
		})
	}
}

// TestDecodeReason: a reason (our extension) follows the message; the
// message's start, which old clients match, is unchanged.
func TestDecodeReason(t *testing.T) {
	msg, sentinel := Decode(403, []byte(`{"message":"Access denied","error_code":"path_escape","reason":"pw is a symlink to /etc/passwd, outside the base directory"}`))
	if msg != "Access denied: pw is a symlink to /etc/passwd, outside the base directory" || sentinel != goruntime.ErrPathEscape {
		t.Errorf("Decode = %q, %v", msg, sentinel)
	}
}
