// Package mcpserver serves go-runtime-sandbox to MCP clients (Claude Code,
// Cursor, Gemini CLI, any client of the Model Context Protocol): the tool
// run_go_code builds, runs and tests Go code in a sandbox from a
// goruntime.Backend, check_go_code reports gofmt, vet and build findings
// without running it, and read_file, list_files and reset_sandbox inspect
// and reset the sandbox.
//
// Over stdio the server keeps one sandbox for the whole process, opened on
// the first tool call (or at startup, Config.OpenAtStart). Over Streamable HTTP each MCP session gets its own
// sandbox, closed when the session ends or after it has been idle for
// Config.IdleTTL. Calls within a session run one at a time. The pool of
// sandboxes, the progress of opens and commands, and the error wording
// are internal/frontend/sessions', shared with any other front end; this
// package adds what is MCP's: tools, schemas, notifications, transports.
package mcpserver
