// Package archmap holds the test that keeps docs/architecture.md's map
// true: every package of the module is named there, with its side
// (sandbox, host or shared), and the rules the map states hold in the
// import graph. It has no code of its own.
package archmap
