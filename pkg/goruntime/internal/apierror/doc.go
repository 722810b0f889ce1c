// Package apierror turns the runtime server's error answers into the
// goruntime sentinel errors, the one mapping both backends use (the local
// backend's own HTTP client and the agent-sandbox SDK's HTTPError).
package apierror
