package goruntime

import (
	"archive/tar"
	"bytes"
	"fmt"
	"path"
	"time"
)

// Archive packs files into an uncompressed tar archive with regular-file
// entries only (no links), parents implied. Paths must pass ValidateFiles.
func Archive(files []File) ([]byte, error) {
	if err := ValidateFiles(files); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dirs := map[string]bool{}
	for _, f := range files {
		p := path.Clean(f.Path)
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, f := range files {
		mode := int64(f.Mode.Perm())
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     path.Clean(f.Path),
			Mode:     mode,
			Size:     int64(len(f.Data)),
			ModTime:  now,
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("archive %s: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("archive %s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	return buf.Bytes(), nil
}
