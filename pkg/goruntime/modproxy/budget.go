package modproxy

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Every version the proxy downloads stays in the host's module cache (its
// zip, and the tree the go command extracts from it, about three times
// the zip), which sandboxes share with the host's own go command and
// which nothing else bounds: an allowlist of broad patterns would let
// sandboxes grow it without end. So the proxy keeps an account of what
// its downloads added (Config.MaxDownloadBytes); once it is spent, a
// version not yet in the cache is refused with a message naming the
// setting, while cached versions are still served. The account covers
// the proxy's life: a new proxy (a restarted server) starts a new one.
// Fetches running at once when it runs out may overshoot it by what they
// download (at most MaxFetches versions).

// budget is the account of the bytes the proxy's downloads added.
type budget struct {
	max     int64
	setting string // how a refusal names the setting

	mu    sync.Mutex
	spent int64
}

// check refuses a download of mod@version once the budget is spent.
func (b *budget) check(mod, version string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spent < b.max {
		return nil
	}
	return fmt.Errorf("module proxy: %s@%s is not in the module cache, and this proxy's download budget is spent "+
		"(%d MiB downloaded of %d MiB, %s); modules already in the cache are still served. Raise the budget, or restart the server to start a new one",
		mod, version, b.spent>>20, b.max>>20, b.setting)
}

// charge adds what downloading the version escMod@escVer put in modCache
// to the account.
func (b *budget) charge(modCache, escMod, escVer string) {
	n := treeBytes(filepath.Join(modCache, filepath.FromSlash(escMod)+"@"+escVer))
	matches, _ := filepath.Glob(filepath.Join(modCache, "cache", "download", filepath.FromSlash(escMod), "@v", escVer+".*"))
	for _, m := range matches {
		if fi, err := os.Lstat(m); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	b.mu.Lock()
	b.spent += n
	b.mu.Unlock()
}

// treeBytes is the size of the regular files under dir (0 if none).
func treeBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
