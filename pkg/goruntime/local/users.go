package local

// Who uses a state directory. Every backend holds a shared flock on the
// state directory's users.lock from New to Close; the kernel drops it
// when the process exits, however it exits. Backend.Close tells from it
// whether it was the last backend of the directory (it then removes the
// spare disks, which only a backend claims from), and Cleanup takes it
// exclusively, so that no backend starts while it removes what the
// directory holds, and names the processes that hold it when it cannot.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// usersWait bounds how long New waits for a Cleanup (or a last Close's
// removal of the spare disks) that holds the state directory exclusively.
const usersWait = 30 * time.Second

// lockUsers takes a shared hold on dir's users.lock for a backend's life.
func lockUsers(dir string) (*os.File, error) {
	f, err := os.OpenFile(stateDir(dir).usersLock(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the state directory's users.lock: %w", err)
	}
	deadline := time.Now().Add(usersWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("state directory %s is held exclusively (a cleanup) by %s for over %v: %w",
				dir, describePIDs(lockHolders(f)), usersWait, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastUser reports whether the backend holding f is the state directory's
// only user now, and if so keeps it exclusively until f is closed. When
// it is not, the hold is given up (a failed conversion of a flock drops
// the shared lock): only Close calls it.
func lastUser(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// leave ends the backend's hold on the state directory. The last backend
// to leave removes the spare disks: each holds a loop device and two
// mounts on the host, and only a backend claims them. (Spare build
// caches, plain directories, stay for the next backend.) It holds the
// directory exclusively meanwhile, so a new backend waits for it rather
// than claim a disk being removed. After an exit without Close, the spare
// disks stay until a backend claims them or Cleanup removes them.
func (b *Backend) leave() error {
	f := b.users.Swap(nil)
	if f == nil {
		return nil
	}
	defer f.Close()
	if !b.host.diskQuota || !lastUser(f) {
		return nil
	}
	return b.disks.removeSpares()
}

// lockHolders returns the processes holding a flock on f's file, from
// /proc/locks (the process that took each lock; this one too, when one of
// its backends holds it).
func lockHolders(f *os.File) []int {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return nil
	}
	return flockHolders("/proc/locks", st.Dev, st.Ino)
}

// flockHolders parses a /proc/locks file for the FLOCK locks on the file
// dev/ino.
func flockHolders(locks string, dev, ino uint64) []int {
	fh, err := os.Open(locks)
	if err != nil {
		return nil
	}
	defer fh.Close()
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	var pids []int
	seen := map[int]bool{}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		// 1: FLOCK  ADVISORY  READ  1234 fd:00:5678 0 EOF
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != want {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil || seen[pid] {
			continue
		}
		seen[pid] = true
		pids = append(pids, pid)
	}
	return pids
}

// describePIDs names processes for an error: "process 12 (mcp-server)".
func describePIDs(pids []int) string {
	if len(pids) == 0 {
		return "another process"
	}
	var parts []string
	for _, pid := range pids {
		name := "?"
		if data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); err == nil {
			name = strings.TrimSpace(string(data))
		}
		parts = append(parts, fmt.Sprintf("process %d (%s)", pid, name))
	}
	return strings.Join(parts, ", ")
}
