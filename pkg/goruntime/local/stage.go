package local

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/hostuid"
)

// runRoot holds what the sandboxes' host uids must reach by path, since
// bubblewrap, started as such a uid, resolves every bind source itself:
// the mount points of sandbox disks (disks/), read-only stagings of paths
// the caller keeps in directories others cannot enter (ro/, e.g. a module
// cache under /root or a server binary under a private temporary
// directory), and the uid leases (uids/, root-only). Each directory on
// the way is mode 0711: enterable, not listable.
const runRoot = "/run/go-runtime-sandbox"

// stageBinds sets where Go, the module cache and the server are bound
// from. As the caller's own uid, that is their own paths. As sandbox host
// uids, a path that some uid cannot reach is bound read-only under
// runRoot/ro/ once and reused by every sandbox (and every backend) after.
func (h *host) stageBinds() error {
	h.bindGoroot, h.bindModCache, h.bindServer, h.bindProcessAPI = h.goroot, h.modCache, h.server, h.processAPI
	if !h.hostUID {
		return nil
	}
	stagings := filepath.Join(runRoot, "ro")
	if err := os.MkdirAll(stagings, 0o711); err != nil {
		return fmt.Errorf("create %s: %w", runRoot, err)
	}
	for _, d := range []string{runRoot, stagings} {
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	hostuid.UnstageDeleted(stagings)
	var err error
	if h.bindGoroot, err = hostuid.Stage(stagings, h.goroot); err != nil {
		return err
	}
	if h.modCache != "" {
		if h.bindModCache, err = hostuid.Stage(stagings, h.modCache); err != nil {
			return err
		}
	}
	if h.bindServer, err = hostuid.Stage(stagings, h.server); err != nil {
		return err
	}
	if h.processAPI != "" {
		if h.bindProcessAPI, err = hostuid.Stage(stagings, h.processAPI); err != nil {
			return err
		}
	}
	return nil
}
