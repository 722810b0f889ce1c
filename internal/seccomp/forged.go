package seccomp

import (
	"fmt"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
)

// ForgedFaultPolicy returns a deny list the runtime server installs on
// itself, and so on every command it starts, when it runs as a sandbox's
// init (internal/server, --init): every call of this architecture (Assemble
// refuses the calls of any other) is allowed except sending a
// fault signal (FaultSignals) with a caller-made siginfo, and any signal
// number above maxSignal (a 32-bit signal with high bits set would
// otherwise slip past the 64-bit comparisons), and asking for a fault
// signal on a descriptor's I/O readiness (fcntl F_SETSIG: the kernel
// sends it with si_code SI_SIGIO, which the Go runtime takes for a real
// fault, to whatever process F_SETOWN named, PID 1 included), which fail
// with EPERM. It holds where the sandbox's own filter (Policy) does not:
// a local sandbox with seccomp relaxed, a pod under the RuntimeDefault
// profile.
func ForgedFaultPolicy() (bpfseccomp.Policy, error) {
	return initPolicy(false)
}

// GuardedInitPolicy is ForgedFaultPolicy plus every call by which a
// process of the sandbox could signal PID 1 at all, each failing with
// EPERM: kill, rt_sigqueueinfo, tgkill and rt_tgsigqueueinfo naming PID 1
// (or its thread group) with any signal but 0 (the existence check);
// tkill, which names a thread alone, with any signal but 0 (glibc and the
// Go runtime use tgkill); F_SETSIG with any signal (the default SIGIO
// stays), since F_SETOWN may name PID 1; and joining PID 1's process
// group (setpgid to group 1), from which kill(0, sig) would reach it.
// pidfd_send_signal, whose target a filter cannot see, fails with ENOSYS
// for every signal: programs then fall back to kill (the Go runtime tests
// it once, at its first process operation). The Linux kernel itself drops
// a signal from inside a pid namespace that its init does not handle,
// SIGKILL and SIGSTOP among them; gVisor delivers it (a command's
// kill -9 1, or kill -34 1, ends the init), hence this policy. The
// runtime server loads it with --init-guard, as the init of a pod.
func GuardedInitPolicy() (bpfseccomp.Policy, error) {
	return initPolicy(true)
}

// fSETSIG is fcntl's F_SETSIG command (not in x/sys/unix).
const fSETSIG = 10

// lowWord matches argument arg whose low 32 bits are v (not 0), whatever
// its high bits: the kernel reads a pid, a signal number and fcntl's
// command and F_SETSIG argument as 32-bit values. BitsSet is true when
// any of its bits is set, so each bit of v is a condition of its own.
func lowWord(arg uint32, v uint32) bpfseccomp.ArgumentConditions {
	var conds bpfseccomp.ArgumentConditions
	for b := uint32(1); b != 0; b <<= 1 {
		if v&b != 0 {
			conds = append(conds, bpfseccomp.Condition{Argument: arg, Operation: bpfseccomp.BitsSet, Value: uint64(b)})
		}
	}
	return append(conds, bpfseccomp.Condition{Argument: arg, Operation: bpfseccomp.BitsNotSet, Value: uint64(^v)})
}

// lowNonZero matches argument arg whose low 32 bits are not 0.
func lowNonZero(arg uint32) bpfseccomp.ArgumentConditions {
	return bpfseccomp.ArgumentConditions{{Argument: arg, Operation: bpfseccomp.BitsSet, Value: 0xffffffff}}
}

func initPolicy(guard bool) (bpfseccomp.Policy, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return bpfseccomp.Policy{}, fmt.Errorf("seccomp: %w", err)
	}
	var deny []bpfseccomp.NameWithConditions
	has := func(name string) bool { _, ok := info.SyscallNames[name]; return ok }
	for _, f := range FaultSignals {
		deny = append(deny, bpfseccomp.NameWithConditions{Name: "fcntl",
			Conditions: append(lowWord(1, fSETSIG), lowWord(2, uint32(f))...)})
	}
	if guard {
		deny = append(deny, bpfseccomp.NameWithConditions{Name: "fcntl",
			Conditions: append(lowWord(1, fSETSIG), lowNonZero(2)...)})
		// Calls that name PID 1 (or its thread group) in argument 0 and
		// the signal in sigArg; tkill names a thread only.
		for _, c := range []struct {
			name   string
			sigArg uint32
			pid1   bool
		}{{"kill", 1, true}, {"rt_sigqueueinfo", 1, true}, {"tgkill", 2, true}, {"rt_tgsigqueueinfo", 2, true}, {"tkill", 1, false}} {
			if !has(c.name) {
				continue
			}
			conds := lowNonZero(c.sigArg)
			if c.pid1 {
				conds = append(conds, lowWord(0, 1)...)
			}
			deny = append(deny, bpfseccomp.NameWithConditions{Name: c.name, Conditions: conds})
		}
		deny = append(deny, bpfseccomp.NameWithConditions{Name: "setpgid", Conditions: lowWord(1, 1)})
	}
	for _, c := range signalSenders {
		// Under guard, pidfd_send_signal is refused whole (below); a call
		// in two groups would take the first group's answer only.
		if !has(c.name) || guard && c.name == "pidfd_send_signal" {
			continue
		}
		sig := uint32(c.sigArg)
		deny = append(deny, bpfseccomp.NameWithConditions{Name: c.name,
			Conditions: bpfseccomp.ArgumentConditions{{Argument: sig, Operation: bpfseccomp.GreaterThan, Value: maxSignal}}})
		for _, f := range FaultSignals {
			conds := bpfseccomp.ArgumentConditions{{Argument: sig, Operation: bpfseccomp.Equal, Value: uint64(f)}}
			if c.name == "pidfd_send_signal" {
				conds = append(conds, bpfseccomp.Condition{Argument: pidfdInfoArg, Operation: bpfseccomp.NotEqual, Value: 0})
			}
			deny = append(deny, bpfseccomp.NameWithConditions{Name: c.name, Conditions: conds})
		}
	}
	groups := []bpfseccomp.SyscallGroup{{NamesWithCondtions: deny, Action: bpfseccomp.ActionErrno}}
	if guard && has("pidfd_send_signal") {
		groups = append(groups, bpfseccomp.SyscallGroup{Names: []string{"pidfd_send_signal"}, Action: errnoENOSYS})
	}
	return bpfseccomp.Policy{DefaultAction: bpfseccomp.ActionAllow, Syscalls: groups}, nil
}
