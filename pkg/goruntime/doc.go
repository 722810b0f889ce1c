// Package goruntime runs untrusted Go code in isolated sandboxes and reports
// what happened. A Session wraps one sandbox from a Backend (local
// bubblewrap or Kubernetes agent-sandbox); Execute ships files, runs a
// command, and returns output, exit code, timing and an Outcome.
//
// State persists across Executes in one session: files and built binaries
// under /app, and the Go build cache.
package goruntime
