package local

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/procfs"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/hostuid"
)

// Host identities: when the backend runs as root, each live sandbox runs
// as a host uid of its own from Options.HostUIDBase..+HostUIDCount
// (internal/hostuid), leased machine-wide in hostUIDDir.

// hostUIDDir holds the uid leases.
const hostUIDDir = runRoot + "/uids"

// allocUID leases a free uid from the configured range to the sandbox in
// dir (hostuid.Alloc).
func (b *Backend) allocUID(dir string) (int, error) {
	uid, err := hostuid.Alloc(hostUIDDir, dir, b.opts.HostUIDBase, b.opts.HostUIDCount, sandboxAlive)
	if err != nil {
		return 0, fmt.Errorf("%w: close some, or raise Options.HostUIDCount (and keep the range, from Options.HostUIDBase, clear of real users)", err)
	}
	return uid, nil
}

// sandboxAlive reports whether the sandbox in dir, which leased its uid
// at leased, still holds it: its bubblewrap process runs, or it has no
// state file yet and leased it within 10 minutes (an opener that died
// while opening never writes one).
func sandboxAlive(dir string, leased time.Time) bool {
	data, err := os.ReadFile(layout{dir: dir}.meta())
	if err != nil {
		return time.Since(leased) <= 10*time.Minute
	}
	var m meta
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	return procfs.Alive(m.PID, m.StartTime)
}
