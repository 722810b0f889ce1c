package disk

// Loop devices a state directory's images hold. Remove unmounts a disk and
// the kernel frees its loop device (autoclear) once no mount namespace
// holds the file system; one that stays attached (a mount made by hand, a
// mount namespace that outlived its sandbox, a mount that failed midway)
// is found here by its backing file.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// LoopDevices lists the loop devices (under sysBlock, /sys/block) whose
// backing file is in images, deleted or not: "/dev/loop7".
func LoopDevices(sysBlock, images string) []string {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return nil
	}
	prefix := filepath.Clean(images) + "/"
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(sysBlock, e.Name(), "loop", "backing_file"))
		if err != nil {
			continue // not attached
		}
		backing := strings.TrimSuffix(strings.TrimSpace(string(data)), " (deleted)")
		if strings.HasPrefix(backing, prefix) {
			out = append(out, "/dev/"+e.Name())
		}
	}
	return out
}

// Detach detaches the loop device dev from its backing file. While a
// mount still holds it, the kernel only marks it to be freed when that
// mount goes (autoclear); the error is then nil too.
func Detach(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("detach loop device %s: %w", dev, err)
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("detach loop device %s: %w", dev, err)
	}
	return nil
}

// Images lists the IDs of the disk images in images.
func Images(images string) []string {
	entries, err := os.ReadDir(images)
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".img"); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// ErrNoLoopDevice is wrapped by Make's error when the host has no loop
// device left for a new disk: the kernel's loop driver would make no more
// (its max_loop parameter, when given), a container's /dev holds no free
// one, or Spec.MaxLoops is reached.
var ErrNoLoopDevice = errors.New("no free loop device")

// attachedLoops counts the loop devices under sysBlock attached to a
// backing file, whoever attached them.
func attachedLoops(sysBlock string) int {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "loop") {
			if _, err := os.Stat(filepath.Join(sysBlock, e.Name(), "loop", "backing_file")); err == nil {
				n++
			}
		}
	}
	return n
}

// noLoopDevice is the error for a disk that found no loop device: what
// ran out and what to raise or free.
func noLoopDevice(detail string) error {
	return fmt.Errorf("%w (%s; %d attached on this host): free some (sandbox-check --cleanup frees a state directory's; losetup -a lists them), "+
		"or raise the limit: the loop driver's max_loop (modprobe loop max_loop=N, or loop.max_loop=N on the kernel command line), "+
		"or, in a container, pass it more /dev/loopN devices", ErrNoLoopDevice, detail, attachedLoops("/sys/block"))
}

// loopFailure reports whether mount's output says it found no loop device
// (util-linux: "failed to setup loop device", "could not find any free
// loop device").
func loopFailure(out string) bool {
	o := strings.ToLower(out)
	return strings.Contains(o, "loop device")
}
