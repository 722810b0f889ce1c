// Package difftest holds the differential test of our sandboxd API (served
// by cmd/sandbox-server --grpc-addr/--rest-addr) against upstream's
// standalone daemon, sigs.k8s.io/agent-sandbox/packages/sandboxd/cmd/sandboxd
// at v1.0.3: the same ProcessService and REST requests go to both, and exit
// codes, stream contents, HTTP status codes and gRPC codes are compared.
// Every difference it finds is listed in docs/sandboxd.md.
//
// Run: go test ./internal/server/processapi/difftest/ (builds both binaries; upstream's
// from the test/e2e/tools module, about 4 minutes on 2 cores the first time,
// cached by the Go build cache after). SANDBOXD_UPSTREAM_BIN names a
// prebuilt upstream binary instead.
package difftest
