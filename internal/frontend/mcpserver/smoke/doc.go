// Package smoke holds end-to-end scenarios for the MCP server: each one
// talks to a running mcp-server (any backend, stdio or Streamable HTTP)
// through the official MCP SDK client and checks what an agent relies on.
// cmd/mcp-server's tests run them against the built binary; cmd/mcp-smoke
// runs them against any backend from the command line.
package smoke
