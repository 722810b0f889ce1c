// Package local is the local backend of goruntime: each sandbox is a
// private directory tree on this machine plus the runtime server running
// inside bubblewrap (user, pid, net, ipc and uts namespaces; no network by
// default; only Go, the system's /usr and the module cache bound
// read-only), with per-sandbox cgroup limits on memory, tasks and CPU and
// an RLIMIT_FSIZE cap on file size. docs/local-backend.md describes the
// isolation, the limits and the seed build cache.
package local
