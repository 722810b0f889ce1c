// Package clip shortens text for logs, error messages and tool output, the
// one rule every layer (server, library, front ends) uses.
package clip
