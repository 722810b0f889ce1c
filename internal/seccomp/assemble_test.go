package seccomp

import (
	"encoding/binary"
	"fmt"
	"sort"
	"testing"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// policies are the three policies this package builds.
var policies = []struct {
	name string
	make func() (bpfseccomp.Policy, error)
}{{"Policy", Policy}, {"ForgedFaultPolicy", ForgedFaultPolicy}, {"GuardedInitPolicy", GuardedInitPolicy}}

// TestAssembleMatchesPolicy: for each policy, the assembled program
// answers every call as the policy says (resolvedPolicy.eval: groups in order,
// first match, 64-bit comparisons). The inputs are every call number with
// zero arguments, and for each call with conditions, each of its first
// three arguments set to values from the policy itself (each condition's
// value and its neighbours, each call number the policy names, in the
// low word and in the high word) with the others from a small set. The
// call numbers are the values that caught go-seccomp-bpf's assembler,
// which compared the next rule's call number against the last argument it
// had loaded: kill(200, SIGKILL) under GuardedInitPolicy met tkill's rule
// (EPERM), and socket((56<<32)|AF_VSOCK, …) under Policy met clone's
// (allowed).
func TestAssembleMatchesPolicy(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range policies {
		t.Run(pc.name, func(t *testing.T) {
			p, err := pc.make()
			if err != nil {
				t.Fatal(err)
			}
			insns, err := Assemble(p)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := bpf.Assemble(insns)
			if err != nil {
				t.Fatal(err)
			}
			named, conditional, values := policyNumbers(t, p, info)
			policy := resolve(p, info)
			var in seccompData
			in.arch = uint32(info.ID)
			wrong := 0
			check := func() {
				got, err := runSeccomp(raw, in.bytes())
				if err != nil {
					t.Fatal(err)
				}
				if want := policy.eval(in.nr, in.args); got != want && wrong < 10 {
					wrong++
					t.Errorf("call %d%#x: the program answers %#x, the policy %#x", in.nr, in.args[:3], got, want)
				}
			}
			for nr := range uint32(600) {
				in.nr, in.args = nr, [6]uint64{}
				check()
			}
			// Each call number the policy names, with the other
			// arguments 0; the condition values and the conditional
			// calls' numbers with the others from a small set.
			try := func(lows, others []uint64) {
				for _, nr := range conditional {
					in.nr = uint32(nr)
					for arg := range 3 {
						for _, lo := range lows {
							for _, hi := range append([]uint64{0}, conditional...) {
								for _, a := range others {
									for _, b := range others {
										in.args = [6]uint64{}
										in.args[(arg+1)%3], in.args[(arg+2)%3] = a, b
										in.args[arg] = hi<<32 | lo&0xffffffff
										check()
									}
								}
							}
						}
					}
				}
			}
			try(named, []uint64{0})
			try(append(values, conditional...), []uint64{0, 1, 9, 10, 11})
			// Another architecture gets EPERM whatever the policy's
			// default (the init policies' is to allow); an x32 call
			// ENOSYS.
			eperm := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EPERM)
			for _, foreign := range []uint32{uint32(info.ID) ^ 1, uint32(arch.I386.ID), uint32(arch.ARM.ID)} {
				if foreign == uint32(info.ID) {
					continue
				}
				for _, nr := range []uint32{0, 20, unix.SYS_KILL, 178} {
					in.nr, in.args, in.arch = nr, [6]uint64{1, 9}, foreign
					if got, _ := runSeccomp(raw, in.bytes()); got != eperm {
						t.Errorf("call %d from architecture %#x: %#x, want EPERM (%#x)", nr, foreign, got, eperm)
					}
				}
			}
			if info.ID == arch.X86_64.ID {
				in.arch, in.nr = uint32(info.ID), unix.SYS_KILL|uint32(arch.X32.SeccompMask)
				if got, _ := runSeccomp(raw, in.bytes()); got != uint32(errnoENOSYS) {
					t.Errorf("an x32 call: %#x, want ENOSYS", got)
				}
			}
		})
	}
}

// TestAssembleRefusesMalformed: what go-seccomp-bpf refused, Assemble
// refuses too.
func TestAssembleRefusesMalformed(t *testing.T) {
	cond := bpfseccomp.ArgumentConditions{{Argument: 0, Operation: bpfseccomp.Equal, Value: 1}}
	for _, tc := range []struct {
		name   string
		groups []bpfseccomp.SyscallGroup
	}{
		{"unknown call", []bpfseccomp.SyscallGroup{{Names: []string{"no_such_call"}, Action: bpfseccomp.ActionAllow}}},
		{"a name twice", []bpfseccomp.SyscallGroup{{Names: []string{"read", "read"}, Action: bpfseccomp.ActionAllow}}},
		{"with and without conditions", []bpfseccomp.SyscallGroup{{Names: []string{"kill"},
			NamesWithCondtions: []bpfseccomp.NameWithConditions{{Name: "kill", Conditions: cond}}, Action: bpfseccomp.ActionAllow}}},
		{"argument 6", []bpfseccomp.SyscallGroup{{NamesWithCondtions: []bpfseccomp.NameWithConditions{{Name: "kill",
			Conditions: bpfseccomp.ArgumentConditions{{Argument: 6, Operation: bpfseccomp.Equal, Value: 1}}}}, Action: bpfseccomp.ActionAllow}}},
		{"no groups", nil},
	} {
		if _, err := Assemble(bpfseccomp.Policy{DefaultAction: bpfseccomp.ActionErrno, Syscalls: tc.groups}); err == nil {
			t.Errorf("%s: assembled, want an error", tc.name)
		}
	}
}

// policyNumbers returns the call numbers p names (sorted), those it names
// with conditions, and each condition's value with its neighbours, low
// words only.
func policyNumbers(t *testing.T, p bpfseccomp.Policy, info *arch.Info) (named, conditional, values []uint64) {
	t.Helper()
	set := func(m map[uint64]bool) []uint64 {
		var out []uint64
		for v := range m {
			out = append(out, v)
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out
	}
	n, c, v := map[uint64]bool{}, map[uint64]bool{}, map[uint64]bool{0: true, 1: true, 64: true, 65: true, 0xffffffff: true}
	for _, g := range p.Syscalls {
		for _, name := range g.Names {
			n[uint64(info.SyscallNames[name])] = true
		}
		for _, nc := range g.NamesWithCondtions {
			n[uint64(info.SyscallNames[nc.Name])] = true
			c[uint64(info.SyscallNames[nc.Name])] = true
			for _, cond := range nc.Conditions {
				lo := cond.Value & 0xffffffff
				v[lo], v[(lo+1)&0xffffffff], v[(lo-1)&0xffffffff] = true, true, true
			}
		}
	}
	return set(n), set(c), set(v)
}

// resolvedPolicy is a policy with its names turned into call numbers.
type resolvedPolicy struct {
	groups []resolvedGroup
	def    uint32
}

type resolvedGroup struct {
	names map[uint32]bool
	conds []resolvedRule
	ret   uint32
}

type resolvedRule struct {
	nr    uint32
	conds bpfseccomp.ArgumentConditions
}

func resolve(p bpfseccomp.Policy, info *arch.Info) resolvedPolicy {
	r := resolvedPolicy{def: retValue(p.DefaultAction)}
	for _, g := range p.Syscalls {
		rg := resolvedGroup{names: map[uint32]bool{}, ret: retValue(g.Action)}
		for _, name := range g.Names {
			rg.names[uint32(info.SyscallNames[name])] = true
		}
		for _, nc := range g.NamesWithCondtions {
			rg.conds = append(rg.conds, resolvedRule{uint32(info.SyscallNames[nc.Name]), nc.Conditions})
		}
		r.groups = append(r.groups, rg)
	}
	return r
}

// eval is what the policy says of call nr with args: the first group
// with a matching rule gives its action, else the default.
func (r resolvedPolicy) eval(nr uint32, args [6]uint64) uint32 {
	for _, g := range r.groups {
		if g.names[nr] {
			return g.ret
		}
		for _, c := range g.conds {
			if c.nr == nr && holds(c.conds, args) {
				return g.ret
			}
		}
	}
	return r.def
}

func holds(conds bpfseccomp.ArgumentConditions, args [6]uint64) bool {
	for _, c := range conds {
		a, v := args[c.Argument], c.Value
		var ok bool
		switch c.Operation {
		case bpfseccomp.Equal:
			ok = a == v
		case bpfseccomp.NotEqual:
			ok = a != v
		case bpfseccomp.GreaterThan:
			ok = a > v
		case bpfseccomp.GreaterOrEqual:
			ok = a >= v
		case bpfseccomp.LessThan:
			ok = a < v
		case bpfseccomp.LessOrEqual:
			ok = a <= v
		case bpfseccomp.BitsSet:
			ok = a&v != 0
		case bpfseccomp.BitsNotSet:
			ok = a&v == 0
		}
		if !ok {
			return false
		}
	}
	return true
}

// seccompData is struct seccomp_data.
type seccompData struct {
	nr, arch uint32
	args     [6]uint64
}

func (d seccompData) bytes() []byte {
	b := make([]byte, 64)
	binary.NativeEndian.PutUint32(b[0:], d.nr)
	binary.NativeEndian.PutUint32(b[4:], d.arch)
	for i, a := range d.args {
		binary.NativeEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// runSeccomp runs a classic-BPF seccomp program as the kernel does, for
// the instructions a seccomp program may hold that Assemble emits: 32-bit
// absolute loads of seccomp_data (in this machine's byte order: x/net/bpf's
// VM reads packets, big-endian), conditional jumps against a constant,
// unconditional jumps and constant returns.
func runSeccomp(prog []bpf.RawInstruction, data []byte) (uint32, error) {
	var a uint32
	for pc := 0; pc < len(prog); {
		in := prog[pc]
		switch in.Op {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if int(in.K)+4 > len(data) || in.K%4 != 0 {
				return 0, fmt.Errorf("instruction %d: load at %d", pc, in.K)
			}
			a = binary.NativeEndian.Uint32(data[in.K:])
			pc++
		case unix.BPF_JMP | unix.BPF_JA:
			pc += 1 + int(in.K)
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K,
			unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var ok bool
			switch in.Op & 0xf0 {
			case unix.BPF_JEQ:
				ok = a == in.K
			case unix.BPF_JGT:
				ok = a > in.K
			case unix.BPF_JGE:
				ok = a >= in.K
			case unix.BPF_JSET:
				ok = a&in.K != 0
			}
			if ok {
				pc += 1 + int(in.Jt)
			} else {
				pc += 1 + int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K, nil
		default:
			return 0, fmt.Errorf("instruction %d: opcode %#x", pc, in.Op)
		}
	}
	return 0, fmt.Errorf("ran off the end of the program")
}
