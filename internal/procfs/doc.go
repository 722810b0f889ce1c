// Package procfs reads the few facts this project needs about a process
// from Linux's /proc/<pid>/stat: its state, process group and start time. It is shared
// by sandbox-side code and host-side code (and their tests) and imports
// nothing from either.
package procfs
