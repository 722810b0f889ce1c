package seccomp

import (
	"encoding/binary"
	"fmt"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Assemble compiles p into a classic-BPF seccomp program for the
// architecture this binary runs on. It replaces go-seccomp-bpf's own
// Policy.Assemble (and LoadFilter, which calls it), whose programs are
// wrong for any policy with argument conditions (v1.6.0, and its main
// branch as of December 2026): when a call's argument check fails, that
// assembler jumps on to compare the next rule's call number while the
// accumulator still holds the argument it loaded last. Under
// GuardedInitPolicy, kill(200, SIGKILL) thus met tkill's rule (tkill is
// call 200 on amd64) and failed with EPERM, and kill(424, …) met
// pidfd_send_signal's and failed with ENOSYS, so a process whose pid was
// 200 or 424 could not kill itself (docs/e2e.md, "signal_kill in a runc
// pod"). In the allow list (Policy) the same slip let refused calls
// through: socket((56<<32)|AF_VSOCK, …) met clone's rule (56) and was
// allowed.
//
// Semantics, which TestAssembleMatchesPolicy checks against a plain
// evaluation of the policy: the groups are tried in order, and within a
// group its unconditional names and then each of its NamesWithCondtions
// entries; the first that matches gives its group's action (ActionErrno
// means EPERM, as in go-seccomp-bpf). An entry matches when its call
// number matches and all its conditions hold, each comparing the whole
// 64-bit argument. Nothing matches: p.DefaultAction. A call from another
// architecture (seccomp_data.arch not this binary's: i386 through int
// 0x80 on amd64, AArch32 on arm64) fails with EPERM whatever the policy
// (foreignArchAction); on amd64, an x32 call gets ENOSYS.
//
// Layout: every rule is a block that only jumps forward inside itself,
// so no jump is ever long:
//
//	jeq nr, 0, <past the block>
//	<each condition: load the argument's words, compare; a failure jumps to the reload>
//	ret action
//	ld nr                          ; the reload: A is the call number again
//
// An unconditional rule is "jeq nr, 0, 1; ret action". A call runs one
// jeq per rule before its own, as with go-seccomp-bpf's chain.
func Assemble(p bpfseccomp.Policy) ([]bpf.Instruction, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: archOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: retValue(foreignArchAction)},
		loadNr,
	}
	if info.ID == arch.X86_64.ID {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: uint32(arch.X32.SeccompMask), SkipFalse: 1},
			bpf.RetConstant{Val: uint32(errnoENOSYS)})
	}
	for gi, g := range p.Syscalls {
		ret := retValue(g.Action)
		seen := map[uint32]bool{} // unconditional names of this group
		for _, name := range g.Names {
			nr, err := callNumber(info, name)
			if err != nil {
				return nil, fmt.Errorf("seccomp: group %d: %w", gi, err)
			}
			if seen[nr] {
				return nil, fmt.Errorf("seccomp: group %d names %s twice", gi, name)
			}
			seen[nr] = true
			prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1}, bpf.RetConstant{Val: ret})
		}
		for _, nc := range g.NamesWithCondtions {
			nr, err := callNumber(info, nc.Name)
			if err != nil {
				return nil, fmt.Errorf("seccomp: group %d: %w", gi, err)
			}
			if seen[nr] {
				// Its conditions could never decide anything.
				return nil, fmt.Errorf("seccomp: group %d names %s both with and without conditions", gi, nc.Name)
			}
			block, err := conditionalRule(nr, nc.Conditions, ret)
			if err != nil {
				return nil, fmt.Errorf("seccomp: group %d, %s: %w", gi, nc.Name, err)
			}
			prog = append(prog, block...)
		}
	}
	prog = append(prog, bpf.RetConstant{Val: retValue(p.DefaultAction)})
	if len(prog) > bpfMaxInsns {
		return nil, fmt.Errorf("seccomp: the program has %d instructions, the kernel takes at most %d", len(prog), bpfMaxInsns)
	}
	return prog, nil
}

// Offsets in struct seccomp_data: nr (int), arch (u32), instruction
// pointer (u64), then the six arguments (u64 each).
const (
	nrOffset   = 0
	archOffset = 4
	argsOffset = 16
)

// foreignArchAction answers every call from another architecture: EPERM.
// A policy's rules name this architecture's call numbers, which mean other
// calls in another table (kill is 62 on amd64, 37 on i386), so a deny list
// (the init policies, whose default is to allow) would let every i386
// call through: a command under --init-guard could signal PID 1, or
// crash it with rt_sigqueueinfo(1, SIGSEGV) (docs/e2e.md). Programs built
// for another architecture (GOARCH=386) therefore run under none of this
// package's filters; under Policy (a local sandbox) they never did.
const foreignArchAction = bpfseccomp.ActionErrno

// bpfMaxInsns is the kernel's limit on a classic-BPF program (BPF_MAXINSNS).
const bpfMaxInsns = 4096

var loadNr = bpf.LoadAbsolute{Off: nrOffset, Size: 4}

// retValue is the filter's return value for a: ActionErrno alone means
// EPERM, as in go-seccomp-bpf.
func retValue(a bpfseccomp.Action) uint32 {
	if a == bpfseccomp.ActionErrno {
		return uint32(a) | uint32(unix.EPERM)
	}
	return uint32(a)
}

func callNumber(info *arch.Info, name string) (uint32, error) {
	n, ok := info.SyscallNames[name]
	if !ok {
		return 0, fmt.Errorf("no system call %s on %s", name, info.Name)
	}
	return uint32(n) | uint32(info.SeccompMask), nil
}

// littleEndian: where an argument's low word sits in seccomp_data.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// argWords returns the offsets of argument i's high and low 32 bits.
func argWords(i uint32) (hi, lo uint32) {
	off := argsOffset + 8*i
	if littleEndian {
		return off + 4, off
	}
	return off, off + 4
}

// Jump targets inside a rule block, resolved once its length is known.
const (
	toNext = -1 // the next condition (or the ret, after the last)
	toFail = -2 // the reload at the block's end
)

type jump struct {
	cond     bpf.JumpTest // JumpEqual, JumpGreaterThan, JumpGreaterOrEqual or JumpBitsSet
	val      uint32
	yes, not int // toNext, toFail, or 0: the next instruction
}

// conditionalRule is one rule block: call nr with all of conds holding
// returns ret; otherwise the block ends with A reloaded with the call
// number.
func conditionalRule(nr uint32, conds bpfseccomp.ArgumentConditions, ret uint32) ([]bpf.Instruction, error) {
	if problems := conds.Validate(); len(problems) > 0 {
		return nil, fmt.Errorf("%v", problems)
	}
	type item struct {
		ins  bpf.Instruction
		j    *jump
		next int // for a jump: the index of the next condition's first instruction
	}
	var body []item
	for _, c := range conds {
		if c.Argument > 5 {
			return nil, fmt.Errorf("argument %d: a call has six (0-5)", c.Argument)
		}
		hiOff, loOff := argWords(c.Argument)
		hi, lo := uint32(c.Value>>32), uint32(c.Value)
		var code []any // bpf.LoadAbsolute or jump
		ldHi, ldLo := bpf.LoadAbsolute{Off: hiOff, Size: 4}, bpf.LoadAbsolute{Off: loOff, Size: 4}
		switch c.Operation {
		case bpfseccomp.Equal:
			code = []any{ldHi, jump{bpf.JumpEqual, hi, 0, toFail}, ldLo, jump{bpf.JumpEqual, lo, toNext, toFail}}
		case bpfseccomp.NotEqual:
			code = []any{ldHi, jump{bpf.JumpEqual, hi, 0, toNext}, ldLo, jump{bpf.JumpEqual, lo, toFail, toNext}}
		case bpfseccomp.GreaterThan, bpfseccomp.GreaterOrEqual:
			last := bpf.JumpGreaterThan
			if c.Operation == bpfseccomp.GreaterOrEqual {
				last = bpf.JumpGreaterOrEqual
			}
			code = []any{ldHi, jump{bpf.JumpGreaterThan, hi, toNext, 0}, jump{bpf.JumpEqual, hi, 0, toFail},
				ldLo, jump{last, lo, toNext, toFail}}
		case bpfseccomp.LessThan, bpfseccomp.LessOrEqual:
			// a < v: not (a >= v); a <= v: not (a > v).
			last := bpf.JumpGreaterOrEqual
			if c.Operation == bpfseccomp.LessOrEqual {
				last = bpf.JumpGreaterThan
			}
			code = []any{ldHi, jump{bpf.JumpGreaterThan, hi, toFail, 0}, jump{bpf.JumpEqual, hi, 0, toNext},
				ldLo, jump{last, lo, toFail, toNext}}
		case bpfseccomp.BitsSet: // any bit of the value set
			code = []any{ldHi, jump{bpf.JumpBitsSet, hi, toNext, 0}, ldLo, jump{bpf.JumpBitsSet, lo, toNext, toFail}}
		case bpfseccomp.BitsNotSet: // no bit of the value set
			code = []any{ldHi, jump{bpf.JumpBitsSet, hi, toFail, 0}, ldLo, jump{bpf.JumpBitsSet, lo, toFail, toNext}}
		default:
			return nil, fmt.Errorf("unknown operation %q", c.Operation)
		}
		next := 1 + len(body) + len(code) // 1: the block's leading jeq
		for _, x := range code {
			switch x := x.(type) {
			case jump:
				body = append(body, item{j: &x, next: next})
			case bpf.LoadAbsolute:
				body = append(body, item{ins: x})
			}
		}
	}
	// Block: [0] jeq nr; [1..n] body; [n+1] ret; [n+2] reload.
	n := len(body)
	fail, end := n+2, n+3
	skip := func(from, to int) (uint8, error) {
		d := to - from - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("a jump of %d instructions (conditions too many for one rule)", d)
		}
		return uint8(d), nil
	}
	out := make([]bpf.Instruction, 0, end)
	s, err := skip(0, end)
	if err != nil {
		return nil, err
	}
	out = append(out, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: s})
	for i, it := range body {
		at := 1 + i
		if it.j == nil {
			out = append(out, it.ins)
			continue
		}
		target := func(t int) int {
			switch t {
			case toNext:
				return it.next
			case toFail:
				return fail
			}
			return at + 1
		}
		yes, err := skip(at, target(it.j.yes))
		if err != nil {
			return nil, err
		}
		not, err := skip(at, target(it.j.not))
		if err != nil {
			return nil, err
		}
		out = append(out, bpf.JumpIf{Cond: it.j.cond, Val: it.j.val, SkipTrue: yes, SkipFalse: not})
	}
	return append(out, bpf.RetConstant{Val: ret}, loadNr), nil
}
