// Package processapi serves the sandboxd hybrid API of KEP-539.2 (the API
// newer agent-sandbox SDKs speak) next to our legacy runtime contract:
// gRPC ProcessService (Start streaming, Execute, WriteStdin, SendSignal,
// ResizeTTY) and REST /v1/files/{path}, /v1/health, /v1/metadata.
//
// The protocol and most handlers are upstream's
// (sigs.k8s.io/agent-sandbox/packages/sandboxd): this package chooses the
// listeners, runs the lifecycle, and wraps upstream's ProcessServer to kill
// a command's whole process group when its client goes away and to report
// signal deaths as 128+N. docs/sandboxd.md lists every difference from
// upstream's standalone daemon.
//
// It links gRPC, so the runtime server does not import it: Main is the
// companion binary cmd/sandbox-processapi, which sandbox-server starts on
// the first connection to its sandboxd listeners and hands them over
// (docs/sandboxd.md, "The companion process"). A program that re-executes
// itself as the server calls Start in its own process instead.
package processapi
