// Package sandboxid makes and checks the local backend's sandbox IDs: 16
// lower-case hex digits, random. An ID names a sandbox's state directory,
// its cgroup and its disk, so a name of another shape is never one of
// ours (prune relies on that).
package sandboxid

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// New returns a new random ID.
func New() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Valid reports whether id has the shape New makes, so that it can name a
// directory safely.
func Valid(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}
