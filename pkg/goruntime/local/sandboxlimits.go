package local

// A sandbox's own limits, as the host sets them: its cgroup's (memory,
// tasks, CPU), its rlimits, and the notes that say which one a command
// hit. The host's limits, which many sandboxes run into together, are
// hostlimits.go's; the limits set inside a sandbox's namespaces,
// internal/nslimits'.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/internal/gate"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/disk"
)

// cgroupLimits returns the cgroup limits of a sandbox under o; pooled
// starts it at the warm pool's CPU weight. A sandbox on a memory disk
// (storage.go) has its memory limit raised by the disk's size: the
// disk's files are charged to it, and a full disk must leave its
// processes the MemoryBytes they were promised. Its socket buffers stay
// bounded by MemoryBytes alone (cgroups.Limits.FilesBytes).
func (o Options) cgroupLimits(pooled, memoryDisk bool) cgroups.Limits {
	lim := cgroups.Limits{MemoryBytes: o.MemoryBytes, Processes: o.Processes + OwnTasks, CPUs: o.CPUs, Background: pooled}
	if memoryDisk {
		lim.FilesBytes = o.DiskBytes
	}
	return lim
}

// chargedMemory is the most memory a sandbox's cgroup is charged before
// its limit is hit: MemoryBytes, plus DiskBytes on a memory disk. What
// only the memory limit bounds (files held through mappings,
// fileTableProblem) is bounded by this.
func (o Options) chargedMemory(memoryDisk bool) int64 {
	lim := o.cgroupLimits(false, memoryDisk)
	return lim.MemoryBytes + lim.FilesBytes
}

// rlimits are the sandbox's per-process limits, which its gate sets
// before it becomes bubblewrap, so every sandbox process inherits them:
// the largest file it may write (RLIMIT_FSIZE) and the files it may have
// open (RLIMIT_NOFILE), soft and hard alike (gate.Rlimit) so that no
// process in the sandbox can raise them.
func (o Options) rlimits() []gate.Rlimit {
	return []gate.Rlimit{
		{Resource: unix.RLIMIT_FSIZE, Name: "file size", Value: uint64(o.FileSizeBytes)},
		{Resource: unix.RLIMIT_NOFILE, Name: "open-file", Value: uint64(o.OpenFiles)},
	}
}

// limitHit names the limit a finished command ran into, from the cgroup
// counters read before and after it and its result (the file size limit:
// goruntime.FileSizeLimitHit, whose text and exit status are the only
// signs; a forged one mislabels only the command's own result, nothing is
// killed), or the Limit res already carries (LimitOutput from the
// client's mapping), else "".
func limitHit(before, after cgroups.Counters, res *goruntime.ExecResult) goruntime.Limit {
	switch {
	case after.OOMKills > before.OOMKills:
		return goruntime.LimitMemory
	case after.PidsMax > before.PidsMax:
		return goruntime.LimitProcesses
	case goruntime.FileSizeLimitHit(res):
		return goruntime.LimitFileSize
	case res.StdoutTruncated, res.StderrTruncated:
		return goruntime.LimitOutput
	}
	return res.Limit
}

// limitWatch is what a command's limit outcome is derived from: the
// cgroup's counters before it and the samples of its disk
// (disk.Sampler).
type limitWatch struct {
	before cgroups.Counters
	disk   *disk.Sampler
}

// watchLimits starts watching the limits of the command about to run;
// finishExec (or end, on a failed call) stops it.
func (s *Sandbox) watchLimits() *limitWatch {
	var d *disk.Disk
	if s.meta.Disk != nil {
		seen := s.meta.Disk.Through(s.l.view)
		d = &seen
	}
	return &limitWatch{before: s.meta.Cgroup.Counters(), disk: disk.Sample(d)}
}

// end stops the disk's sampling; more calls do nothing.
func (w *limitWatch) end() { w.disk.End() }

// finishExec completes the result of a command that Exec or ExecStream
// ran: it fills res.Limit (limitHit, then the disk's own counters), kills
// whatever a command that ran into the memory or process limit left
// behind, and appends the note on modules a sandbox without network
// cannot fetch.
func (s *Sandbox) finishExec(ctx context.Context, w *limitWatch, res *goruntime.ExecResult) {
	cg := &s.meta.Cgroup
	res.Limit = limitHit(w.before, cg.Counters(), res)
	res.DiskCounted = w.disk != nil
	if u, full := w.disk.Finish(); full && (res.Limit == "" || res.Limit == goruntime.LimitOutput) {
		res.Limit = goruntime.LimitDisk
		res.Stderr += s.b.opts.diskNote(u)
	}
	if res.Limit == goruntime.LimitMemory || res.Limit == goruntime.LimitProcesses {
		if err := cg.Kill(s.keep); err != nil {
			s.b.opts.Logger.WarnContext(ctx, "local sandbox: clean up after limit", "id", s.meta.ID, "err", err)
		}
		res.Stderr += s.b.opts.limitNote(res.Limit, s.b.host.memoryDisk)
	}
	if res.Limit == goruntime.LimitFileSize {
		res.Stderr += s.b.opts.limitNote(res.Limit, s.b.host.memoryDisk)
	}
	if !s.meta.Network && strings.Contains(res.Stderr, "file://"+modCacheRO+"/cache/download") {
		res.Stderr += fmt.Sprintf("\n[go-runtime-sandbox: this sandbox has no network; modules resolve only from the host's module cache (%s). "+
			"Run `go mod download <module>@<version>` on the host, let sandboxes download it (local.Options.AllowModules), "+
			"or open the sandbox with network access (local.Options.Network).]\n", s.b.host.modCache)
	}
}

// limitNote is the note appended to Stderr of a command that ran into the
// memory, process or file size limit: which limit, its value and where it
// is set. Files in /dev/shm count against the memory limit and outlive
// commands; on a memory disk, so do the disk's files: the limit the
// note states is the one the cgroup applies (chargedMemory); memoryDisk:
// the sandboxes' disks are in memory.
func (o Options) limitNote(l goruntime.Limit, memoryDisk bool) string {
	if l == goruntime.LimitFileSize {
		return fmt.Sprintf("\n[go-runtime-sandbox: the sandbox's file size limit was hit: no single file may grow past %d MiB (Options.FileSizeBytes); the write past it failed (EFBIG, \"file too large\") or SIGXFSZ ended the writer.]\n", o.FileSizeBytes>>20)
	}
	if l == goruntime.LimitProcesses {
		return fmt.Sprintf("\n[go-runtime-sandbox: the sandbox's process limit was hit: %d processes and threads at once (Options.Processes); what the command left running was killed.]\n", o.Processes)
	}
	if memoryDisk {
		return fmt.Sprintf("\n[go-runtime-sandbox: the sandbox's memory limit was hit: %s for its processes and their /dev/shm files (Options.MemoryBytes) and up to %s more while its disk is empty: "+
			"the disk is in memory (Options.DiskBytes), so its processes and the files on its disk share %s; what the command left running was killed.]\n",
			sizeText(o.MemoryBytes), sizeText(o.DiskBytes), sizeText(o.chargedMemory(true)))
	}
	return fmt.Sprintf("\n[go-runtime-sandbox: the sandbox's memory limit was hit: %d MiB for all its processes and its /dev/shm files (Options.MemoryBytes); what the command left running was killed.]\n", o.MemoryBytes>>20)
}

// diskNote is the note appended to a command's stderr when it ran the
// sandbox's disk out of bytes or inodes.
func (o Options) diskNote(u disk.Usage) string {
	if u.FreeInodes == 0 {
		return fmt.Sprintf("\n[go-runtime-sandbox: the sandbox's inode quota is used up: %d files and directories (Options.DiskInodes); delete files to go on.]\n", o.DiskInodes)
	}
	return fmt.Sprintf("\n[go-runtime-sandbox: the sandbox's disk quota is full: %d MiB (Options.DiskBytes) for /app, HOME with its caches and /tmp together; delete files to go on.]\n", o.DiskBytes>>20)
}

// fileTableShare is how much of the host's open-file table one sandbox may
// take at most by default: 1/fileTableShare of fs.file-max.
const fileTableShare = 16

// defaultOpenFiles is Options.OpenFiles's default for a host whose
// open-file table holds fileMax files and sandboxes of tasks tasks each:
// DefaultOpenFiles, or less where tasks*DefaultOpenFiles would pass
// 1/fileTableShare of the table, but never below MinOpenFiles. Threads
// share their process's descriptor table, so tasks*OpenFiles bounds the
// descriptors a sandbox holds. fileMax <= 0 (unknown) gives
// DefaultOpenFiles.
func defaultOpenFiles(fileMax int64, tasks int) int {
	if fileMax <= 0 || tasks <= 0 {
		return DefaultOpenFiles
	}
	n := fileMax / fileTableShare / int64(tasks)
	return int(max(MinOpenFiles, min(DefaultOpenFiles, n)))
}

// hostFileMax returns fs.file-max, the size of the host's open-file
// table, or 0 when it cannot be read.
func hostFileMax() int64 {
	data, err := os.ReadFile("/proc/sys/fs/file-max")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// mappedFileBytes is the least kernel memory, charged to the sandbox's
// memory cgroup, that one open file costs when a process holds it through
// a memory mapping rather than a descriptor (open, mmap, close: a struct
// file and a vm_area_struct). RLIMIT_NOFILE does not count such files, so
// a sandbox's memory limit is what bounds them: chargedMemory /
// mappedFileBytes. Measured on the development machines (kernel 6.18):
// 406 bytes; the figure here is lower, so the bound errs towards more
// files. TestMappedFilesShare keeps it honest: a sandbox that held more
// files per byte fails it.
const mappedFileBytes = 384

// fileTableSandboxes is how many sandboxes at their memory limit, each
// holding every file that memory pays for, the host's open-file table
// must hold: one sandbox may take at most a quarter of it.
const fileTableSandboxes = 4

// systemdFileMax is the fs.file-max systemd sets at every boot (since
// v240): as large as the kernel takes, leaving memory (charged to each
// process's cgroup) as the only bound on open files.
const systemdFileMax = "9223372036854775807"

// fileTableProblem says why a host whose open-file table holds fileMax
// files (fs.file-max) cannot run sandboxes charged memoryBytes
// (chargedMemory): one of them
// could fill a quarter of the table or more with files held through
// mappings, and then every process on the host without CAP_SYS_ADMIN,
// other sandboxes' servers among them, fails to open a file. nil when the
// table is large enough or its size is unknown.
func fileTableProblem(memoryBytes, fileMax int64) *Protection {
	need := fileTableSandboxes * (memoryBytes / mappedFileBytes)
	if fileMax <= 0 || fileMax >= need {
		return nil
	}
	return &Protection{Name: ProtFileTable, Status: StatusUnavailable, Required: true,
		Detail: fmt.Sprintf("fs.file-max is %d, but one sandbox within its %d MiB memory limit can hold %d open files (mapped files are not counted by RLIMIT_NOFILE), "+
			"more than a quarter of the host's table: it would keep every other process from opening files",
			fileMax, memoryBytes>>20, memoryBytes/mappedFileBytes),
		Fix: fmt.Sprintf("raise it as systemd does at every boot: %s (sysctl fs.file-max=%s, kept in /etc/sysctl.d); "+
			"or lower the memory limit to at most %d MiB (Options.MemoryBytes, with Options.DiskBytes when the disk is in memory); or relax it (Options.Relax.FileTable)",
			SetupCommand(callerName()), systemdFileMax, fileMax/fileTableSandboxes*mappedFileBytes>>20)}
}

// groupCPUWeight is the CPU weight every sandbox start gives the group
// of all sandboxes (cgroups.Limits.GroupWeight): Options.CPUWeight, else
// the calling process's own weight (cgroups.CallerWeight), read now so
// that a renice of the caller applies to the sandboxes started after it.
func (o Options) groupCPUWeight() int {
	if o.CPUWeight > 0 {
		return o.CPUWeight
	}
	return cgroups.CallerWeight()
}
