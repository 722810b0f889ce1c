// Package server is the runtime server that runs inside every
// sandbox: agent-sandbox's legacy runtime contract (GET /, POST /execute,
// POST /upload, GET /download/{path}, GET /list/{path}, GET /exists/{path})
// plus this project's /execute extensions. docs/sandbox-server.md has the
// contract table and the differences from upstream's Python runtime.
package server
