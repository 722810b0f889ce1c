// Package processclient is the host-side client of the sandboxd process API
// (gRPC ProcessService) our runtime server serves inside a sandbox: Dial
// connects, Exec runs one command and streams its output.
package processclient
