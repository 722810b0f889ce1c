// Package gotool turns what the go command prints into structured results:
// diagnostics (compiler, vet, gofmt and test failure positions), per-test
// results from the go tool's JSON event stream (go test -json, or
// test2json over go test's text), benchmark lines and coverage.
//
// It only parses: it runs nothing. The callers (goruntime.Session, the
// backends, front ends) decide which go commands run and where; this
// package knows what their output means. Every parser is exercised
// against fixtures recorded from the real go command (testdata/*.txtar),
// and a test re-records them with the host's go and compares, so the
// fixtures follow the toolchain the project builds with.
//
// Paths in diagnostics are made relative to the work directory the
// command ran in (a sandbox's /app): "./pkg/x.go", "pkg/x.go" and
// "/app/pkg/x.go" all become "pkg/x.go". Paths outside it (GOROOT, the
// module cache) stay absolute.
package gotool
