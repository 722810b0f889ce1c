package disk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CacheAdded lists the regular files the sandbox added to the seed's
// build cache: those of the overlay's upper directory, as paths relative
// to GOCACHE ("ab/abcd…-d"), read from the host as d's disk is reached
// (Through). It follows no symlink and reads only names, so what a
// sandbox put there decides nothing but which names the caller then
// reads as the sandbox. ok is false when d has no such directory (no
// disk, or an older layout).
func (d Disk) CacheAdded() (files []string, ok bool, err error) {
	upper := filepath.Join(d.Dir, overlayUpper)
	subs, err := os.ReadDir(upper)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("list the build cache's additions: %w", err)
	}
	for _, sub := range subs {
		if !sub.IsDir() {
			if sub.Type().IsRegular() {
				files = append(files, sub.Name())
			}
			continue
		}
		entries, err := os.ReadDir(filepath.Join(upper, sub.Name()))
		if err != nil {
			return nil, false, fmt.Errorf("list the build cache's additions: %w", err)
		}
		for _, e := range entries {
			if e.Type().IsRegular() {
				files = append(files, sub.Name()+"/"+e.Name())
			}
		}
	}
	return files, true, nil
}
