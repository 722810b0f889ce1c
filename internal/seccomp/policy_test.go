package seccomp

import (
	"encoding/binary"
	"slices"
	"testing"

	moby "github.com/moby/profiles/seccomp"
	"golang.org/x/sys/unix"
)

// dockerNoCaps evaluates Docker's default profile for an amd64 container
// without capabilities: for each call it allows, the argument conditions
// (nil: unconditional).
func dockerNoCaps(t *testing.T) map[string][]moby.Syscall {
	t.Helper()
	p := moby.DefaultProfile()
	if p.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Fatalf("Docker's default action is %s, this test expects SCMP_ACT_ERRNO", p.DefaultAction)
	}
	rules := map[string][]moby.Syscall{}
	for _, s := range p.Syscalls {
		if s.Action != "SCMP_ACT_ALLOW" {
			continue
		}
		if inc := s.Includes; inc != nil {
			if len(inc.Caps) > 0 || (len(inc.Arches) > 0 && !slices.Contains(inc.Arches, "amd64")) {
				continue
			}
		}
		if ex := s.Excludes; ex != nil && slices.Contains(ex.Arches, "amd64") {
			continue
		}
		for _, n := range s.Names {
			rules[n] = append(rules[n], *s)
		}
	}
	return rules
}

// TestPolicyWithinDockerDefault: every call our policy allows, Docker's
// default profile for a container without capabilities allows too, and
// where Docker allows a call only for some arguments, so do we, for no
// more of them.
func TestPolicyWithinDockerDefault(t *testing.T) {
	docker := dockerNoCaps(t)
	allowed, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 200 {
		t.Fatalf("only %d calls allowed; the policy lost its families", len(allowed))
	}
	for _, name := range allowed {
		rules, ok := docker[name]
		if !ok {
			t.Errorf("%s: allowed here, refused by Docker's default profile", name)
			continue
		}
		unconditional := false
		for _, r := range rules {
			if len(r.Args) == 0 {
				unconditional = true
			}
		}
		switch name {
		case "socket":
			for _, d := range SocketDomains {
				if !dockerAllowsValue(rules, uint64(d)) {
					t.Errorf("socket domain %d: allowed here, not by Docker", d)
				}
			}
		case "personality":
			for _, v := range Personalities {
				if !dockerAllowsValue(rules, v) {
					t.Errorf("personality %#x: allowed here, not by Docker", v)
				}
			}
		case "clone":
			var mask uint64
			for _, r := range rules {
				for _, a := range r.Args {
					if a.Op == "SCMP_CMP_MASKED_EQ" && a.Index == 0 && a.ValueTwo == 0 {
						mask |= a.Value
					}
				}
			}
			if mask&^uint64(namespaceFlags) != 0 {
				t.Errorf("clone: Docker refuses flags %#x, we refuse only %#x", mask, uint64(namespaceFlags))
			}
		default:
			if !unconditional {
				t.Errorf("%s: allowed here without conditions, by Docker only with %+v", name, rules)
			}
		}
	}
	for _, refused := range []string{"clone3", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
		"bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd", "io_uring_setup",
		"init_module", "finit_module", "kexec_load", "reboot", "ptrace", "process_vm_readv", "open_by_handle_at",
		"fsopen", "fsmount", "move_mount", "open_tree", "swapon", "acct", "quotactl", "lookup_dcookie", "syslog",
		"name_to_handle_at", "modify_ldt", "io_submit", "mq_open"} {
		if slices.Contains(allowed, refused) {
			t.Errorf("%s is allowed; it must be refused", refused)
		}
	}
}

func dockerAllowsValue(rules []moby.Syscall, v uint64) bool {
	for _, r := range rules {
		if len(r.Args) == 0 {
			return true
		}
		ok := true
		for _, a := range r.Args {
			switch a.Op {
			case "SCMP_CMP_EQ":
				ok = ok && v == a.Value
			case "SCMP_CMP_LT":
				ok = ok && v < a.Value
			default:
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestProgramShape: the program is whole sock_filter records, starts by
// checking the architecture and ends in a return.
func TestProgramShape(t *testing.T) {
	prog, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) == 0 || len(prog)%8 != 0 {
		t.Fatalf("program of %d bytes, want a positive multiple of 8", len(prog))
	}
	if n := len(prog) / 8; n > 4096 {
		t.Fatalf("%d instructions; the kernel takes at most 4096", n)
	}
	first := binary.NativeEndian.Uint16(prog[0:2])
	if first != unix.BPF_LD|unix.BPF_W|unix.BPF_ABS || binary.NativeEndian.Uint32(prog[4:8]) != 4 {
		t.Errorf("first instruction %#x k=%d, want a load of the architecture (offset 4)", first, binary.NativeEndian.Uint32(prog[4:8]))
	}
	last := binary.NativeEndian.Uint16(prog[len(prog)-8:])
	if last&0x07 != unix.BPF_RET {
		t.Errorf("last instruction %#x is not a return", last)
	}
}
