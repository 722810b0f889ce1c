package local

import "testing"

func TestDefaultOpenFiles(t *testing.T) {
	for _, c := range []struct {
		fileMax int64
		tasks   int
		want    int
	}{
		{0, 540, DefaultOpenFiles},                           // fs.file-max unreadable
		{1<<63 - 1, 540, DefaultOpenFiles},                   // systemd's LONG_MAX
		{2_466_112, 540, 285},                                // these machines: 2466112/16/540
		{2_466_112, 100, DefaultOpenFiles},                   // few tasks: the full default fits
		{100_000, 540, MinOpenFiles},                         // a tiny table: never below the floor
		{16 * 540 * DefaultOpenFiles, 540, DefaultOpenFiles}, // exactly the share
	} {
		if got := defaultOpenFiles(c.fileMax, c.tasks); got != c.want {
			t.Errorf("defaultOpenFiles(%d, %d) = %d, want %d", c.fileMax, c.tasks, got, c.want)
		}
	}
}
