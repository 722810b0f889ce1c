// Package corpus is the conformance corpus of go-runtime-sandbox: real Go
// programs under testdata/, each run twice — directly on the host with the
// go command (the oracle) and through a goruntime.Session — with stdout,
// exit code and outcome compared after normalization.
//
// A case is a directory holding Go files (a main package, a module with
// sub-packages, a test-only package…) and a spec file, case.txt, of
// "key: value" lines:
//
//	note:    one line saying what the case covers (required)
//	command: shell command run with sh -c in the case directory (default "go run .")
//	stdin:   a file of the case fed to the command's stdin
//	env:     NAME=value added to the command's environment (repeatable)
//	timeout: the request's timeout, a Go duration (default 60s)
//	compare: the streams compared, "stdout" (default) or "stdout stderr"
//	exit:    the exit code the oracle must produce (required)
//	outcome: the goruntime.Outcome the oracle must produce (required)
//	slow:    "true" to run only when slow cases are asked for
//	diagnostic: "file:line[:col] source" the sandbox's Result.Diagnostics
//	         must hold (repeatable; col 0 or absent matches any column)
//	test:    "name status" the sandbox's Result.Tests must hold (repeatable)
//	benchmark: a benchmark name the sandbox's Result.Benchmarks must hold,
//	         with a positive ns/op (repeatable)
//
// Blank lines and lines starting with "#" are ignored. Every other file in
// the directory is shipped to the sandbox under the same relative path.
package corpus
