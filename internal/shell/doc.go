// Package shell holds the rules this project needs about POSIX shell
// text, shared by host-side and sandbox-side code: how to quote a word so
// sh reads it back unchanged, which names sh passes on as environment
// variables, and how long one argument may be.
package shell
