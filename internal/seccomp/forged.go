package seccomp

import (
	"fmt"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
)

// ForgedFaultPolicy returns a deny list the runtime server installs on
// itself, and so on every command it starts, when it runs as a sandbox's
// init (internal/server, --init): every call is allowed except sending a
// fault signal (FaultSignals) with a caller-made siginfo, and any signal
// number above maxSignal (a 32-bit signal with high bits set would
// otherwise slip past the 64-bit comparisons), which fail with EPERM. It
// holds where the sandbox's own filter (Policy) does not: a local sandbox
// with seccomp relaxed, a pod under the RuntimeDefault profile.
func ForgedFaultPolicy() (bpfseccomp.Policy, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return bpfseccomp.Policy{}, fmt.Errorf("seccomp: %w", err)
	}
	var deny []bpfseccomp.NameWithConditions
	for _, c := range signalSenders {
		if _, ok := info.SyscallNames[c.name]; !ok {
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
	return bpfseccomp.Policy{DefaultAction: bpfseccomp.ActionAllow,
		Syscalls: []bpfseccomp.SyscallGroup{{NamesWithCondtions: deny, Action: bpfseccomp.ActionErrno}}}, nil
}
