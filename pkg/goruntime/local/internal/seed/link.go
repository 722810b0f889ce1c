package seed

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// How a sandbox's build cache is made from the seed when it has no disk
// of its own (a disk shows the seed through an overlay instead).

// Populate fills dst (a sandbox's empty GOCACHE) from the seed, or from
// its extra seed when that is complete (WithExtra): hard links when
// running as root, copies otherwise (see the package comment).
func Populate(seed, dst string) error {
	seed = WithExtra(seed)
	link := os.Geteuid() == 0
	err := filepath.WalkDir(seed, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(seed, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			if rel == "." {
				return os.MkdirAll(target, 0o755)
			}
			return os.Mkdir(target, 0o755)
		}
		if rel == ".complete" {
			return nil
		}
		if link {
			if err := os.Link(p, target); err == nil {
				return nil
			} else if !errors.Is(err, syscall.EXDEV) {
				return err
			}
		}
		return copyFile(p, target)
	})
	if err != nil {
		return fmt.Errorf("seed build cache %s: %w", dst, err)
	}
	// Go trims its cache when trim.txt is older than a day; a fresh stamp
	// keeps a new sandbox from trimming (and so losing) the seed at once.
	stamp := strconv.FormatInt(time.Now().Unix(), 10) + "\n"
	if err := os.WriteFile(filepath.Join(dst, "trim.txt"), []byte(stamp), 0o644); err != nil {
		return fmt.Errorf("seed build cache %s: %w", dst, err)
	}
	return nil
}

// copyFile copies src to dst with its permission bits: the cache holds
// executables too (the tools go tool builds, such as test2json, which go
// test -json runs from there).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
