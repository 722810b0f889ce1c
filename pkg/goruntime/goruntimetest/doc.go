// Package goruntimetest is a fake goruntime.Backend for tests of code
// built on goruntime (the Session, the front ends): each sandbox is a
// temporary directory on this machine and commands run there with
// /bin/sh -c, without isolation, so such tests need neither bubblewrap
// nor a cluster. It keeps the contract callers rely on: a timeout kills
// the command's process group (exit code 124, output kept), a cancelled
// ctx kills the command, a closed sandbox kills what runs in it, paths are
// checked with goruntime.CheckPath, errors wrap the goruntime sentinels,
// and files stream to disk. Tests reach in through Backend.Sandbox: Kill
// makes a sandbox gone, SetLimit reports a resource limit, LargestRead
// says how much one ReadFile handed out.
//
// It is not a sandbox: never run untrusted code with it. Whether a real
// backend keeps the contract is the conformance corpus's job
// (pkg/goruntime/corpus).
package goruntimetest
