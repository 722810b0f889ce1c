package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// The rootless helper: the body of TestRootlessLimits's process of uid
// 65533. It prints, one a line:
//
//	held NAME                 an attack of rootlessBattery the protections withstood
//	breach NAME: FINDING      one way they did not (continued on lines starting with a tab)
//	note NAME: TEXT           what an attack measured
//	somaxconn N               the sandbox's listen queue cap
//	ptys max=N                its devpts instance's cap
//	tcp4|tcp6 OK REFUSED OTHER FIRST-ERROR   what connFlood's connects did
//	disk SIZE USED FREE       df -m of /app once a disk fill stopped (MiB)
//	disk OUTCOME              the disk fill's outcome
//	inodes OUTCOME            a fill of empty files'
//	memory OUTCOME            a memory bomb's outcome
//	processes OUTCOME         a fork bomb's
//	"COMMAND": ERROR          a limit's command that got no result
//	time STEP SECONDS         how long each step took

// rootlessOpenFiles is the helper's open-file limit per process.
const rootlessOpenFiles = 512

// rootlessTarget is what the battery attacks: the helper's backend, two
// of its sandboxes (attacker, armed by armAttacker, and victim), the
// hostile server's binary, and files of the helper's own uid holding
// secret.
type rootlessTarget struct {
	opts             local.Options // b's
	b                *local.Backend
	attacker, victim *goruntime.Session
	hostile          []byte
	secret           string
	secretFiles      []string
}

// open opens another sandbox; the caller closes it.
func (r *rootlessTarget) open() (*goruntime.Session, error) {
	return goruntime.Open(context.Background(), r.b, goruntime.Options{})
}

// revive replaces the attacker or the victim with a new sandbox (the
// attacker armed) if an attack that broke through took it down, so the
// attacks after it still run; it reports the ones it replaced.
func (r *rootlessTarget) revive() ([]string, error) {
	var replaced []string
	for _, s := range []struct {
		name string
		s    **goruntime.Session
	}{{"attacker", &r.attacker}, {"victim", &r.victim}} {
		if _, err := (*s.s).Sandbox().Exec(context.Background(), goruntime.ExecRequest{Command: "true"}); !errors.Is(err, goruntime.ErrSandboxGone) {
			continue
		}
		(*s.s).Close(context.Background())
		n, err := r.open()
		if err != nil {
			return replaced, err
		}
		*s.s = n
		if s.name == "attacker" {
			if f := armAttacker(n); len(f) > 0 {
				return replaced, fmt.Errorf("arm the attacker: %s", strings.Join(f, "; "))
			}
		}
		replaced = append(replaced, s.name)
	}
	return replaced, nil
}

// rootlessAttack is one attack of the battery as the helper runs it.
type rootlessAttack struct {
	name string
	run  func(r *rootlessTarget) findings
}

// rootlessBattery is the attacker battery the helper runs, in order, and
// the parent expects held: the root tests' attack functions. After
// socket-symlink the victim's server cannot be dialled again, so nothing
// follows it on the victim.
func rootlessBattery() []rootlessAttack {
	var list []rootlessAttack
	add := func(name string, run func(r *rootlessTarget) findings) {
		list = append(list, rootlessAttack{name, run})
	}
	add("server-is-pid1", func(r *rootlessTarget) findings { return serverIsPID1(r.attacker) })
	add("kill-server", func(r *rootlessTarget) findings { return killServerAttacks(r.attacker) })
	add("forge-fault-signal", func(r *rootlessTarget) findings { return forgeFaultAttacks(r.attacker) })
	add("server-memory", func(r *rootlessTarget) findings { return serverMemoryAttacks(r.attacker) })
	if runtime.GOARCH == "amd64" {
		add("seccomp", func(r *rootlessTarget) findings { return seccompAttacks(r.attacker) })
	}
	add("nested-userns", func(r *rootlessTarget) findings { return nestedUsernsAttacks(r.attacker, "operation not permitted") })
	add("open-files", func(r *rootlessTarget) findings { return openFilesAttack(r.attacker, rootlessOpenFiles) })
	add("write-outside-app", func(r *rootlessTarget) findings { return writeOutsideAttack(r.attacker) })
	add("read-through-symlink", func(r *rootlessTarget) findings { return symlinkReadAttack(r.attacker) })
	add("upload-through-symlink", func(r *rootlessTarget) findings { return symlinkUploadAttack(r.attacker) })
	add("host-files", func(r *rootlessTarget) findings { return hostFilesAttack(r.attacker, r.secret, r.secretFiles...) })
	add("host-processes", func(r *rootlessTarget) findings { return hostProcessAttack(r.attacker) })
	add("network", func(r *rootlessTarget) findings { return networkAttack(r.attacker) })
	add("other-sandbox", func(r *rootlessTarget) findings { return otherSandboxAttack(r.victim, r.attacker) })
	add("socket-symlink", func(r *rootlessTarget) findings { return socketSymlinkAttack(r.b, r.victim) })
	add("hostile-memory", func(r *rootlessTarget) findings {
		s, err := r.open()
		if err != nil {
			return findings{fmt.Sprintf("open: %v", err)}
		}
		defer s.Close(context.Background())
		sb, f := armHostile(r.b, s, r.hostile)
		if sb == nil {
			return f
		}
		return hostileMemoryAttack(sb, func(format string, args ...any) {
			fmt.Printf("note hostile-memory: "+format+"\n", args...)
		})
	})
	add("hostile-silence", rootlessSilence)
	return list
}

// rootlessSilence runs hostileSilenceAttack for every call at once, each
// against a sandbox of its own (each waits out a deadline), of a backend
// of its own whose file call deadlines are short, as in
// TestHostileServerNeverAnswers.
func rootlessSilence(r *rootlessTarget) findings {
	var f findings
	b, err := local.New(r.opts)
	if err != nil {
		f.add("new: %v", err)
		return f
	}
	defer b.Close(context.Background())
	local.SetFileCallDeadlines(b, 2*time.Second, time.Second)
	type armed struct {
		name string
		sb   goruntime.Sandbox
	}
	var targets []armed
	for name := range silentCalls {
		s, err := goruntime.Open(context.Background(), b, goruntime.Options{})
		if err != nil {
			f.add("open: %v", err)
			return f
		}
		defer s.Close(context.Background())
		sb, armf := armHostile(b, s, r.hostile)
		if sb == nil {
			return append(f, armf...)
		}
		targets = append(targets, armed{name, sb})
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, tg := range targets {
		wg.Go(func() {
			found := hostileSilenceAttack(tg.sb, tg.name)
			mu.Lock()
			f = append(f, found...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return f
}

// rootlessHelper opens two sandboxes with a 64 MiB, 10,000-inode disk
// (a memory disk: storage.go), a 256 MiB memory limit, 128 processes, 512
// open files per process and a cap of 256 connections; runs the attacker
// battery; and
// prints what the limits did, last, since a limit that does not hold can
// take the sandbox with it.
func rootlessHelper(ctx context.Context, opts local.Options) int {
	if os.Geteuid() == 0 {
		fmt.Fprintln(os.Stderr, "rootless helper: running as root")
		return 2
	}
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "rootless helper: %s: %v\n", what, err)
		return 1
	}
	start := time.Now()
	opts.MemoryBytes = 256 << 20
	opts.DiskBytes, opts.DiskInodes = 64<<20, 10000
	opts.Processes = 128
	opts.OpenFiles = rootlessOpenFiles
	opts.Connections = 256
	opts.WarmPool = -1
	b, err := local.New(opts)
	if err != nil {
		return fail("new", err)
	}
	defer b.Close(context.Background())
	hostile, err := os.ReadFile(os.Getenv("LOCAL_TEST_HOSTILE"))
	if err != nil {
		return fail("the hostile server", err)
	}
	r := &rootlessTarget{opts: opts, b: b, hostile: hostile, secret: fmt.Sprintf("secret-%d", time.Now().UnixNano())}
	// Files of this uid that no sandbox may read: one in HOME, one in
	// the temporary directory, both 0600.
	for _, dir := range []string{os.Getenv("HOME"), os.TempDir()} {
		file := filepath.Join(dir, ".rootless-"+r.secret)
		if err := os.WriteFile(file, []byte(r.secret), 0o600); err != nil {
			return fail("secret file", err)
		}
		defer os.Remove(file)
		r.secretFiles = append(r.secretFiles, file)
	}
	defer func() {
		for _, s := range []*goruntime.Session{r.attacker, r.victim} {
			if s != nil {
				s.Close(context.Background())
			}
		}
	}()
	for _, s := range []**goruntime.Session{&r.attacker, &r.victim} {
		if *s, err = r.open(); err != nil {
			return fail("open", err)
		}
	}
	if err := printOwner(ctx, r.victim); err != nil {
		return fail("whose files", err)
	}
	printFirstGoTest(ctx, b)
	if f := armAttacker(r.attacker); len(f) > 0 {
		return fail("arm the attacker", fmt.Errorf("%s", strings.Join(f, "; ")))
	}
	fmt.Printf("time open %.1f\n", time.Since(start).Seconds())

	for _, a := range rootlessBattery() {
		step := time.Now()
		found := a.run(r)
		for _, finding := range found {
			fmt.Printf("breach %s: %s\n", a.name, strings.ReplaceAll(finding, "\n", "\n\t"))
		}
		if len(found) == 0 {
			fmt.Println("held", a.name)
		} else {
			replaced, err := r.revive()
			if len(replaced) > 0 {
				fmt.Printf("note %s: took the %s down; the next attacks run in new sandboxes\n", a.name, strings.Join(replaced, " and the "))
			}
			if err != nil {
				return fail("replace a sandbox an attack took down", err)
			}
		}
		fmt.Printf("time %s %.1f\n", a.name, time.Since(step).Seconds())
	}

	// Its memory disk outlives a Disconnect: a new backend in this
	// process attaches by ID and finds the files, through the sandbox's
	// mount namespace.
	step := time.Now()
	if err := reattach(ctx, r); err != nil {
		fmt.Println("attach:", err)
	} else {
		fmt.Println("attach ok")
	}
	fmt.Printf("time attach %.1f\n", time.Since(step).Seconds())

	step = time.Now()
	for _, req := range []goruntime.Request{
		{Command: `echo somaxconn $(cat /proc/sys/net/core/somaxconn); echo ptys $(grep -o 'max=[0-9]*' /proc/self/mountinfo)`},
		{Files: []goruntime.File{{Path: "flood/main.go", Data: []byte(connFlood)}}, Command: "cd flood && go run main.go"},
		{Command: diskFill},
		{Command: inodeFill},
		{Command: emptyDisk},
		{Command: memoryBomb, Timeout: time.Minute},
		{Command: forkBomb, Timeout: 20 * time.Second},
	} {
		res, err := r.attacker.Execute(ctx, req)
		if err != nil {
			fmt.Printf("%q: %v\n", req.Command, err)
			continue
		}
		fmt.Print(res.Stdout)
		switch req.Command {
		case diskFill:
			fmt.Println("disk", res.Outcome)
		case inodeFill:
			fmt.Println("inodes", res.Outcome)
		case memoryBomb:
			fmt.Println("memory", res.Outcome)
		case forkBomb:
			fmt.Println("processes", res.Outcome)
		default:
			if res.ExitCode != 0 {
				fmt.Printf("%q: exit %d: %s\n", req.Command, res.ExitCode, res.Stderr)
			}
		}
	}
	fmt.Printf("time limits %.1f\n", time.Since(step).Seconds())
	if os.Getenv("LOCAL_TEST_ROOTLESS_MODULES") != "" {
		if err := rootlessModules(ctx, opts); err != nil {
			fmt.Println("modules:", err)
		} else {
			fmt.Println("modules ok")
		}
	}
	fmt.Printf("time total %.1f\n", time.Since(start).Seconds())
	return 0
}

// diskFill writes past a 64 MiB disk quota and reports df's view of it
// (the memory limit, 256 MiB, is out of its reach). The disk stays full
// until the next command: the label comes from the disk's counters
// after the command (or at a sample while it ran).
const diskFill = "dd if=/dev/zero of=/app/fill bs=1M count=100; echo disk $(df -m /app | tail -1 | tr -s ' ' | cut -d' ' -f2-4)"

// inodeFill empties the disk diskFill filled, then makes more empty
// files than it has inodes; emptyDisk removes them, so that the memory
// bomb after it runs on an empty disk.
const (
	inodeFill = "rm /app/fill && mkdir /tmp/many && cd /tmp/many && seq 12000 | xargs touch"
	emptyDisk = "rm -rf /tmp/many"
)

// reattach writes a file in the attacker sandbox, disconnects from it,
// attaches to it by ID from a second backend on the same state directory
// and reads the file back; r.attacker is the attached session after it.
func reattach(ctx context.Context, r *rootlessTarget) error {
	if _, err := r.attacker.Execute(ctx, goruntime.Request{Files: []goruntime.File{{Path: "kept.txt", Data: []byte(r.secret)}}, Command: "true"}); err != nil {
		return err
	}
	id := r.attacker.ID()
	if err := r.attacker.Disconnect(ctx); err != nil {
		return err
	}
	b2, err := local.New(r.opts)
	if err != nil {
		return err
	}
	// b2 stays open: the session is its sandbox's from now on (the
	// helper's exit ends both).
	s, err := goruntime.Attach(ctx, b2, id, goruntime.Options{})
	if err != nil {
		return err
	}
	r.attacker = s
	res, err := s.Execute(ctx, goruntime.Request{Command: "cat kept.txt"})
	if err != nil {
		return err
	}
	if res.Stdout != r.secret {
		return fmt.Errorf("kept.txt after attach: %q, want %q", res.Stdout, r.secret)
	}
	return nil
}
