// Package metricfamily writes metrics in the Prometheus text format with
// github.com/VictoriaMetrics/metrics, the one metrics library of this
// repository: it is chosen for the runtime server, where
// prometheus/client_golang's protobuf-based model would add ~2 MiB to
// every idle sandbox (docs/benchmarks.md, "Idle RSS"), and the host's
// front ends use it too rather than keep a second library. A Family is one
// metric name with its HELP and TYPE lines, its series in a set of their
// own so that they are written under those lines.
package metricfamily

import (
	"fmt"
	"io"
	"slices"
	"strings"

	vm "github.com/VictoriaMetrics/metrics"
)

// Family is one metric name: its help, its type (counter, gauge,
// histogram) and its series.
type Family struct {
	Name, Help, Kind string
	Set              *vm.Set
}

// New returns an empty family.
func New(name, help, kind string) *Family {
	return &Family{Name: name, Help: help, Kind: kind, Set: vm.NewSet()}
}

// Write writes the family's HELP and TYPE lines and its series.
func (f *Family) Write(w io.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", f.Name, f.Help, f.Name, f.Kind)
	f.Set.WritePrometheus(w)
}

// Sample is the name of the family's series with labels, given as
// name, value pairs and written in name order, e.g.
// Sample("tool", "x", "outcome", "ok") -> name{outcome="ok",tool="x"};
// no labels: the bare name.
func (f *Family) Sample(labels ...string) string {
	if len(labels) < 2 {
		return f.Name
	}
	pairs := make([]string, 0, len(labels)/2)
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, labels[i]+`="`+labels[i+1]+`"`)
	}
	slices.Sort(pairs)
	return f.Name + "{" + strings.Join(pairs, ",") + "}"
}

// ContentType is the Content-Type of the Prometheus text format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"
