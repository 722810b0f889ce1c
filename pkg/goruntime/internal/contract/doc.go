// Package contract is the host-side client of the runtime contract our
// runtime server serves inside a sandbox (the legacy agent-sandbox routes
// plus our additive extensions, docs/sandbox-server.md): Client runs
// commands and moves files over connections a backend's dial function
// makes, and Request and Result are the one mapping between
// goruntime.ExecRequest / goruntime.ExecResult and the wire's /execute
// bodies, which a backend that reaches the server another way (the
// agent-sandbox SDK) uses too. internal/client/processclient speaks the
// sandboxd process API; apierror maps the server's error answers.
//
// The server is not trusted: a sandbox's commands can replace it, so
// every answer is bounded before it is held (see Client).
package contract
