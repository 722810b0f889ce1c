// Package sessions is what a front end needs between its clients and a
// goruntime backend, so that a second front end is a sibling of
// mcpserver, not a copy of it: a Pool holding one sandbox per client
// (opened on the client's first call, attached to a claim for the
// process-wide client, closed when the client ends, when idle, or at
// shutdown), each client's calls taking turns; the bounds on how many
// sandboxes are open, in all and of one principal, counting those a
// front end keeps outside the pool (limits.go); the progress of an open
// in flight, logged and passed on to the calls that wait for it; and
// Describe, the wording that turns a library error into one a user (or a
// model) can act on.
package sessions
