package local

// host is what New found on this host and fixed for every sandbox: the
// bubblewrap, Go and server binaries, the protections (protect.go) and
// where bubblewrap binds from (stage.go). Its methods make a sandbox's
// command line (bwrap.go), find Go (findGo), set up and check the
// protections, and lease a sandbox's host ids (idleases.go).
type host struct {
	opts *Options // the backend's

	bwrap     string
	goroot    string
	modCache  string
	hostProxy string
	hostSumDB string
	server    string
	childMode bool // server is this program, re-executed (ServeIfChild)
	// processAPI is the server's process API companion
	// (server.ProcessAPIName next to server); empty in childMode, where
	// the re-executed program serves the API itself.
	processAPI string

	// Protections (protect.go), fixed by New.
	layers          // seccomp filter and nested user namespace block
	hostUID bool    // each sandbox runs as a host uid of its own (idleases.go)
	subIDs  *subIDs // not root: each sandbox runs as subordinate ids of its own (idleases.go); nil: as the caller
	// Where bubblewrap binds Go, the module cache and the server from:
	// their own paths, or stagings a sandbox uid can reach (stage.go).
	bindGoroot, bindModCache, bindServer, bindProcessAPI string
	diskQuota                                            bool // each sandbox gets a disk of its own (sparedisk.go)
	memoryDisk                                           bool // ... a memory disk, as the backend is not root (storage.go)

	modules *moduleProxies // the backend's (modules.go)
}
