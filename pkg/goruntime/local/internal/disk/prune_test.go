package disk

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestOrphanMounts reads a mountinfo and loop devices' backing files:
// only our disks (directly under the mount points' directory, a hex id,
// on a loop device) whose image was deleted are orphans.
func TestOrphanMounts(t *testing.T) {
	dir := t.TempDir()
	sys := filepath.Join(dir, "block")
	for loop, backing := range map[string]string{
		"loop1": "/state/disks/aaaaaaaaaaaaaaaa.img (deleted)\n",
		"loop2": "/state/disks/bbbbbbbbbbbbbbbb.img\n",
		"loop3": "/tmp/other.img (deleted)\n",
		"loop4": "/state/disks/dddddddddddddddd.img (deleted)\n",
	} {
		if err := os.MkdirAll(filepath.Join(sys, loop, "loop"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, loop, "loop", "backing_file"), []byte(backing), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mi := filepath.Join(dir, "mountinfo")
	lines := "" +
		"30 1 7:1 / /run/go-runtime-sandbox/disks/aaaaaaaaaaaaaaaa rw,nosuid,nodev shared:1 - ext4 /dev/loop1 rw,discard\n" +
		"31 30 0:50 / /run/go-runtime-sandbox/disks/aaaaaaaaaaaaaaaa/home/.cache rw - overlay overlay rw,lowerdir=/x\n" +
		"32 1 7:2 / /run/go-runtime-sandbox/disks/bbbbbbbbbbbbbbbb rw shared:2 - ext4 /dev/loop2 rw\n" +
		"33 1 7:3 / /mnt/other rw - ext4 /dev/loop3 rw\n" +
		"34 1 7:4 / /run/go-runtime-sandbox/disks/not-an-id rw - ext4 /dev/loop4 rw\n" +
		"35 1 7:4 / /run/go-runtime-sandbox/disks/dddddddddddddddd rw - ext4 /dev/loop4 rw\n" +
		"36 1 0:5 / /run/go-runtime-sandbox/disks/eeeeeeeeeeeeeeee rw - tmpfs tmpfs rw\n" +
		"garbage\n"
	if err := os.WriteFile(mi, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	got := orphanMounts(mi, sys, "/run/go-runtime-sandbox/disks")
	want := []string{"/run/go-runtime-sandbox/disks/aaaaaaaaaaaaaaaa", "/run/go-runtime-sandbox/disks/dddddddddddddddd"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("orphanMounts = %q, want %q", got, want)
	}
}
