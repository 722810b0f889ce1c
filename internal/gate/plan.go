package gate

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// Env is the environment variable that puts the runtime server's binary
// into gate mode (Requested); Command sets it, and the gate removes it
// before it execs bubblewrap.
const Env = "GORUNTIME_SANDBOX_GATE"

// Requested reports whether this process was started as a gate.
func Requested(getenv func(string) string) bool { return getenv(Env) == "1" }

// Plan is what a gate does, in this order: leave every descriptor it
// inherited but Pass and WaitFD to itself, wait for its release, join
// the cgroups, set the rlimits, make the mount namespace, mount the
// disk, make the network namespace, take the ids, become the command.
type Plan struct {
	// WaitFD is a descriptor the gate reads one line from before doing
	// anything else, then closes: its release, written once the backend
	// has put it into the sandbox's cgroup (or made the cgroup for it to
	// Join). 0: no wait.
	WaitFD int `json:"wait_fd,omitempty"`
	// Pass are the descriptors above standard error the command is
	// handed (bubblewrap's lifeline and seccomp program). Every other
	// descriptor the gate inherited is marked close-on-exec before it does
	// anything else: what the program that opened the sandbox held
	// without the flag (a directory, a file, a socket its own launcher
	// left it) never reaches the sandbox.
	Pass []int `json:"pass,omitempty"`
	// Join are files the gate writes "0" to right after its release,
	// each moving the gate's own thread (the one that becomes Command)
	// into one of the sandbox's cgroups: cgroup v1 tasks files
	// (cgroups.Cgroup.ThreadFiles). Empty: the backend moved the gate
	// itself before the release. The backend checks the move once the
	// command runs; a write that fails ends the gate.
	Join []string `json:"join,omitempty"`
	// Rlimits are set, soft and hard alike, so that no process of the
	// sandbox can raise them.
	Rlimits []Rlimit `json:"rlimits,omitempty"`
	// Mounts is the mount namespace of a sandbox whose disk the backend
	// mounted on the host (mounts.go; nil: the gate's own). It needs
	// root's capabilities.
	Mounts *Mounts `json:"mounts,omitempty"`
	// Disk is a memory disk to mount first (nil: none). A gate with a
	// disk runs in a user and mount namespace of its own (UserNS).
	Disk *Disk `json:"disk,omitempty"`
	// Net is the sandbox's network namespace, made with its limits in it
	// (net.go); the command runs in it. nil: the gate's own. It needs
	// the capabilities of root, or of a user namespace of the gate's own.
	Net *Net `json:"net,omitempty"`
	// UID and GID are the ids the gate takes, with no supplementary
	// groups, before it becomes Command; 0: it keeps its own.
	UID int `json:"uid,omitempty"`
	GID int `json:"gid,omitempty"`
	// Command is what the gate becomes: an absolute path, then the
	// arguments (Command[0] the first of them, as execve takes them).
	Command []string `json:"command"`
}

// Rlimit is a resource limit (a unix.RLIMIT_* resource) set to Value.
type Rlimit struct {
	Resource int    `json:"resource"`
	Name     string `json:"name"` // for errors: "open-file"
	Value    uint64 `json:"value"`
}

// Disk is a memory disk: a tmpfs, laid out, with an overlay on it. Names
// are relative to Dir.
type Disk struct {
	// Dir is the mount point, an absolute path.
	Dir string `json:"dir"`
	// Options are the tmpfs's size and inode options ("size=N,nr_inodes=M").
	Options string `json:"options"`
	// Mode is the mode of the tmpfs's root and of every one of Dirs.
	Mode uint32 `json:"mode"`
	// Dirs are made on the disk, parents first.
	Dirs []string `json:"dirs"`
	// Overlay is mounted once Dirs are made.
	Overlay Overlay `json:"overlay"`
	// Files are written once the overlay is mounted.
	Files []File `json:"files,omitempty"`
	// Owner is the uid and gid (one number) Own and Files are given to;
	// 0: they stay the gate's.
	Owner int      `json:"owner,omitempty"`
	Own   []string `json:"own,omitempty"`
	// Binds are bound onto the disk, last.
	Binds []Bind `json:"binds,omitempty"`
}

// Overlay is an overlay mount on a disk: Lower an absolute path, the rest
// names on the disk.
type Overlay struct {
	Lower  string `json:"lower"`
	Upper  string `json:"upper"`
	Work   string `json:"work"`
	Target string `json:"target"`
}

// File is a file written on a disk.
type File struct {
	Name string `json:"name"`
	Data string `json:"data"`
}

// Bind binds Src, an absolute path on the host, at Name on a disk. A Src
// that is not a directory gets an empty file made for it; a directory
// must be among the disk's Dirs.
type Bind struct {
	Src  string `json:"src"`
	Name string `json:"name"`
}

// Args are the gate's command-line arguments that hand it p.
func (p Plan) Args() ([]string, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode the gate's plan: %w", err)
	}
	return []string{"--plan", string(b)}, nil
}

// validate refuses a plan the gate could not carry out as meant: a
// relative command or disk, a name that leaves its disk.
func (p Plan) validate() error {
	if len(p.Command) == 0 || !filepath.IsAbs(p.Command[0]) {
		return fmt.Errorf("gate plan: the command must start with an absolute path, not %q", p.Command)
	}
	for _, fd := range p.Pass {
		if fd < 3 || fd == p.WaitFD {
			return fmt.Errorf("gate plan: pass descriptor %d: want one above standard error, other than the release's", fd)
		}
	}
	for _, f := range p.Join {
		if !filepath.IsAbs(f) || filepath.Base(f) != "tasks" {
			return fmt.Errorf("gate plan: cgroup file %q: want an absolute path to a v1 tasks file", f)
		}
	}
	if p.UID < 0 || p.GID < 0 || (p.UID == 0) != (p.GID == 0) {
		return fmt.Errorf("gate plan: ids %d:%d: both or neither must be set", p.UID, p.GID)
	}
	if p.Mounts != nil {
		if p.Disk != nil {
			return fmt.Errorf("gate plan: a memory disk's gate has a mount namespace of its own already")
		}
		if err := p.Mounts.validate(); err != nil {
			return err
		}
	}
	d := p.Disk
	if d == nil {
		return nil
	}
	if !filepath.IsAbs(d.Dir) || !filepath.IsAbs(d.Overlay.Lower) {
		return fmt.Errorf("gate plan: the disk %q and the overlay's lower directory %q must be absolute", d.Dir, d.Overlay.Lower)
	}
	names := append(append([]string{}, d.Dirs...), d.Own...)
	names = append(names, d.Overlay.Upper, d.Overlay.Work, d.Overlay.Target)
	for _, f := range d.Files {
		names = append(names, f.Name)
	}
	for _, b := range d.Binds {
		if !filepath.IsAbs(b.Src) {
			return fmt.Errorf("gate plan: bind source %q must be absolute", b.Src)
		}
		names = append(names, b.Name)
	}
	for _, n := range names {
		if !filepath.IsLocal(n) {
			return fmt.Errorf("gate plan: %q is not a name on the disk", n)
		}
	}
	return nil
}
