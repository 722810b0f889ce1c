package goruntime

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"time"
)

// Archive packs files into an uncompressed tar archive with regular-file
// entries only (no links), parents implied. Paths must pass ValidateFiles.
func Archive(files []File) ([]byte, error) {
	var buf bytes.Buffer
	if err := WriteArchive(&buf, files); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteArchive writes the archive Archive returns to w as it goes, so a
// large upload is never held in memory twice. It checks files with
// ValidateFiles before writing anything; other errors are w's, wrapped
// with the file being written.
func WriteArchive(w io.Writer, files []File) error {
	if err := ValidateFiles(files); err != nil {
		return err
	}
	return writeArchive(w, files)
}

// writeArchive is WriteArchive for files already checked with
// ValidateFiles where they entered (Session.Execute).
func writeArchive(w io.Writer, files []File) error {
	tw := tar.NewWriter(w)
	now := time.Now()
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
			return fmt.Errorf("archive %s: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return fmt.Errorf("archive %s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return nil
}
