package gate

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// mountDisk mounts d in the gate's mount namespace, whose mounts unshare
// made private (Command): nothing reaches the namespace the backend is
// in. Every mount but the binds is nosuid and nodev.
func mountDisk(d Disk) error {
	opts := fmt.Sprintf("mode=%04o,%s", d.Mode, d.Options)
	if err := unix.Mount("sandbox-disk", d.Dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount the sandbox's disk (tmpfs %s) on %s: %w", opts, d.Dir, err)
	}
	on := func(name string) string { return filepath.Join(d.Dir, name) }
	for _, dir := range d.Dirs {
		// Chmod too: Mkdir's mode passes through the umask.
		if err := os.Mkdir(on(dir), os.FileMode(d.Mode)); err != nil {
			return fmt.Errorf("lay out the sandbox's disk: %w", err)
		}
		if err := os.Chmod(on(dir), os.FileMode(d.Mode)); err != nil {
			return fmt.Errorf("lay out the sandbox's disk: %w", err)
		}
	}
	o := d.Overlay
	opts = fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", o.Lower, on(o.Upper), on(o.Work))
	if err := unix.Mount("sandbox-cache", on(o.Target), "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount the build cache's overlay (%s) on %s: %w", opts, on(o.Target), err)
	}
	for _, f := range d.Files {
		if err := os.WriteFile(on(f.Name), []byte(f.Data), 0o666); err != nil {
			return fmt.Errorf("write the sandbox's disk: %w", err)
		}
	}
	if d.Owner > 0 {
		own := append([]string{}, d.Own...)
		for _, f := range d.Files {
			own = append(own, f.Name)
		}
		for _, name := range own {
			if err := os.Lchown(on(name), d.Owner, d.Owner); err != nil {
				return fmt.Errorf("give the sandbox its disk: %w", err)
			}
		}
	}
	for _, b := range d.Binds {
		if fi, err := os.Stat(b.Src); err != nil {
			return fmt.Errorf("stage %s on the sandbox's disk: %w", b.Src, err)
		} else if !fi.IsDir() {
			if err := os.WriteFile(on(b.Name), nil, 0o600); err != nil {
				return fmt.Errorf("stage %s on the sandbox's disk: %w", b.Src, err)
			}
		}
		if err := unix.Mount(b.Src, on(b.Name), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("stage %s on the sandbox's disk at %s: %w", b.Src, b.Name, err)
		}
	}
	return nil
}
