package local

import "github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local/internal/cgroups"

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
