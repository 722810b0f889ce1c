// Package playground is the web playground's server (cmd/playground): a
// page (static/, embedded) editing a Go module as txtar, and the HTTP API
// behind its buttons, each call in the browser session's own sandbox
// through the session layer the MCP server uses (sessions.Pool), so
// limits, idle TTL, principals, progress and error wording are the same.
//
// One sandbox per browser session (browsers.go: an unguessable cookie);
// the API is same-origin only, with optional bearer auth (the MCP HTTP
// endpoint's guard, mcphttp); request bodies and files are capped
// (Config); share links are content-addressed files on the server's disk
// within a quota (store.go), made at a rate per principal (ratelimit.go).
// Output reaches the page as text: the page sets
// textContent, never innerHTML, and its Content-Security-Policy allows
// only its own script and style.
package playground
