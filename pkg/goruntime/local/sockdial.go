package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/internal/contract"
)

// Dialling a sandbox's runtime server. Its sockets live in the sandbox's
// run directory, which is the sandbox's /run/sandbox: its commands can
// delete them and put something else there. connect(2) follows symlinks,
// so a plain dial of the path would let a sandbox point the host (often
// root) at any unix socket on the host, another sandbox's server among
// them, and send it the owner's requests and files. So the host opens the
// path without following a symlink, checks that it holds a socket owned by
// the sandbox's host uid, and connects through the descriptor it checked
// (/proc/self/fd/N), never through the path again. A socket the sandbox
// made itself passes the checks: it can only be the sandbox's own code
// answering its own owner, whose answers every read bounds
// (pkg/goruntime/internal/contract).

// client returns the runtime contract client of the sandbox's server,
// whose socket (in l) is owned by host uid uid and which caps each output
// stream at outputBytes.
func (l layout) client(uid int, outputBytes int64) *contract.Client {
	return contract.New(func(ctx context.Context) (net.Conn, error) {
		return dialSandboxSocket(ctx, l.socket(), uid)
	}, outputBytes)
}

// errNotServerSocket is wrapped by dialSandboxSocket when the path is not
// a socket of the sandbox's.
var errNotServerSocket = errors.New("not the sandbox's runtime server socket")

// dialSandboxSocket connects to the unix socket at path, which must be a
// socket (not a symlink to one) owned by uid.
func dialSandboxSocket(ctx context.Context, path string, uid int) (net.Conn, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return nil, fmt.Errorf("%s is a symlink: %w", path, errNotServerSocket)
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		return nil, fmt.Errorf("%s is not a socket (mode %#o): %w", path, st.Mode, errNotServerSocket)
	case int(st.Uid) != uid:
		return nil, fmt.Errorf("%s belongs to uid %d, not the sandbox's %d: %w", path, st.Uid, uid, errNotServerSocket)
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}

// listenUnix listens on a unix socket at path. A path too long for a
// socket address (a memory disk's, reached through /proc/<pid>/root) is
// reached through a descriptor of its directory instead.
func listenUnix(path string) (net.Listener, error) {
	if len(path) < len(unix.RawSockaddrUnix{}.Path)-1 {
		return net.Listen("unix", path)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	ln, err := net.Listen("unix", "/proc/self/fd/"+strconv.Itoa(int(dir.Fd()))+"/"+filepath.Base(path))
	if err != nil {
		return nil, err
	}
	// Its name is only good while dir is open: Close must not unlink
	// through it.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	return ln, nil
}

// serverUID is the host uid a sandbox's runtime server runs as: its own
// host uid, or (0) the caller's.
func serverUID(hostUID int) int {
	if hostUID > 0 {
		return hostUID
	}
	return os.Geteuid()
}
