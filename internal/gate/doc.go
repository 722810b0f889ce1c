// Package gate is the first process of every local sandbox: the one that
// stands between the backend starting the sandbox and bubblewrap.
//
// The backend starts its runtime server's binary in gate mode (Env set,
// Plan.Args as its arguments; the same binary a sandbox runs, so nothing
// else must be found or installed). The gate first marks every descriptor
// it inherited close-on-exec but those the plan passes on (Plan.Pass), so
// that what the backend's own process was started holding never reaches
// the sandbox; it then waits for its release: the backend has put it into
// the sandbox's cgroup, or, on cgroup v1, made the cgroup for the gate to
// join (Plan.Join: a thread moving itself skips a lock that costs ~10 ms
// a start; the backend checks the move once bubblewrap runs), and, for a
// sandbox with subordinate ids, written its user namespace's id maps
// (Map). It then joins the cgroup if it is to, sets the sandbox's
// rlimits, makes the sandbox's mount namespace with its disk and no other
// sandbox's in it (mounts.go) or mounts its memory disk, makes
// its network namespace with the host's limits in it (net.go), takes
// the sandbox's ids, and then becomes bubblewrap with execve, keeping its
// pid: every process of the sandbox starts inside its limits.
//
// One Go program does with system calls what a chain of small programs
// did before (sh, unshare, mount, mkdir, chown, setpriv): a backend that
// is not root starts a sandbox one exec and one id-mapping step away from
// bubblewrap instead of a dozen execs.
//
// The gate runs on the host, as the backend's user. This package imports
// only the standard library, x/sys, google/nftables (the network
// namespace's rules, net.go) and internal/cloexec, so that the runtime server's binary, which
// carries it, carries nothing of the host-side backend.
// Run inside a sandbox, gate mode can do nothing its caller could not:
// every privilege it uses comes from the namespaces the backend starts it
// in (Command).
package gate
