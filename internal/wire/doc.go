// Package wire declares the JSON bodies of the agent-sandbox runtime
// contract as our runtime server (internal/server) speaks it, with
// our additive extensions, so the server and our own clients (the local
// backend) share one definition. Upstream clients ignore the extension
// fields. docs/sandbox-server.md has the contract table.
package wire
