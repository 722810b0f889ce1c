// Package modproxy is a host-side Go module proxy (the GOPROXY protocol:
// <module>/@v/list, @v/<version>.info, .mod, .zip and <module>/@latest)
// that serves only module paths matching an allowlist of patterns. It
// answers from the host module cache's cache/download directory and fills
// that cache, when a version is missing, with the host's own go command
// (`go mod download`, which verifies checksums against the host's GOSUMDB
// and uses the host's network and GOPROXY).
//
// Sandboxes without a network reach it through a unix socket and a
// loopback relay inside their network namespace (see the local backend's
// Options.AllowModules and docs/go-aware.md). A request for a module
// outside the allowlist gets 404 with a text/plain body that the
// sandbox's go command prints, naming the pattern to add. Every failure
// is a 404 (the go command's "not found", so that its search over an
// import path's prefixes goes on), except malformed requests (400) and
// methods other than GET and HEAD (405).
//
// The package does not speak the checksum database protocol: verification
// is the host go command's job when it downloads, and sandboxes trust the
// host module cache as they already do for its read-only file:// proxy.
package modproxy
