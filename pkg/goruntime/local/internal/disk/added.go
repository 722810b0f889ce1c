package disk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CacheAdded lists the regular files the sandbox added to the seed's
// build cache: those of the overlay's upper directory, as paths relative
// to GOCACHE ("ab/abcd…-d"), read from the host as d's disk is reached
// (Through). It follows no symlink and reads only names, so what a
// sandbox put there decides nothing but which names the caller then
// reads as the sandbox. ok is false when d has no such directory (no
// disk, or an older layout).
func (d Disk) CacheAdded() (files []string, ok bool, err error) {
	upper, err := openDir(unix.AT_FDCWD, filepath.Join(d.Dir, d.cacheUpper()))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("list the build cache's additions: %w", err)
	}
	defer upper.Close()
	subs, err := upper.ReadDir(-1)
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
		// Opened relative to upper and never through a symlink: the
		// sandbox can swap a directory for a link between the listing
		// and this open (a link to a host directory would list its
		// names as root). Such an entry is no longer a directory: skip it.
		dir, err := openDir(int(upper.Fd()), sub.Name())
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("list the build cache's additions: %w", err)
		}
		entries, err := dir.ReadDir(-1)
		dir.Close()
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

// openDir opens the directory name relative to the directory at, refusing
// a symlink in its last element.
func openDir(at int, name string) (*os.File, error) {
	fd, err := unix.Openat(at, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}
