// Package shell holds the two rules this project needs about POSIX shell
// text, shared by host-side and sandbox-side code: how to quote a word so
// sh reads it back unchanged, and which names sh passes on as environment
// variables.
package shell
