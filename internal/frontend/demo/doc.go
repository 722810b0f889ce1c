// Package demo holds the end-to-end flows cmd/demo runs against any
// backend: a single-file smoke flow and a multi-file module flow. Each step
// runs one command in the sandbox and checks its exit code and output.
package demo
