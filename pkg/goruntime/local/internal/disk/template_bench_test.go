package disk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkNewDisk compares a new disk made from the template (Make:
// sparse copy, loop attach and mount from this process) with one made as
// before (mkfs.ext4 and mount -o loop), each unmounted and deleted after,
// untimed. As root.
func BenchmarkNewDisk(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("making a disk image needs root")
	}
	dir := b.TempDir()
	seed := filepath.Join(dir, "seed")
	if err := os.MkdirAll(seed, 0o755); err != nil {
		b.Fatal(err)
	}
	sp := Spec{Images: filepath.Join(dir, "images"), Mounts: filepath.Join(dir, "mounts"), Bytes: 4 << 30, Inodes: 200_000, Seed: seed,
		Layout: Layout{Dirs: []string{"etc", "app", "home", "home/cache"}, Public: []string{"etc"}, Cache: "home/cache"}}
	ctx := context.Background()
	if _, err := ensureTemplate(ctx, sp); err != nil {
		b.Fatal(err)
	}
	b.Run("template", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			d, err := Make(ctx, fmt.Sprintf("%016x", i), sp)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_ = d.Remove()
			b.StartTimer()
		}
	})
	b.Run("mkfs", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			img, mnt := filepath.Join(dir, fmt.Sprintf("m%d.img", i)), filepath.Join(dir, fmt.Sprintf("m%d", i))
			if err := os.Mkdir(mnt, 0o700); err != nil {
				b.Fatal(err)
			}
			if err := makeFS(ctx, img, mnt, sp.Bytes, sp.Inodes); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_ = Disk{Image: img, Dir: mnt}.Remove()
			b.StartTimer()
		}
	})
}
