package backendflag

import (
	"flag"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/agentsandbox"
)

// TestAgentSandboxFlags: the agent-sandbox flags land in its Options.
func TestAgentSandboxFlags(t *testing.T) {
	var o agentsandbox.Options
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	registerAgentSandbox(fs, &o)
	err := fs.Parse([]string{"--warm-pool-name=p", "--namespace=ns", "--label=a=1", "--label=b.io/c=2",
		"--api-url=http://router:8080", "--ready-timeout=7s", "--max-exec-timeout=3m", "--kubeconfig=/k", "--snapshot-dir=/snapshots"})
	if err != nil {
		t.Fatal(err)
	}
	if o.WarmPool != "p" || o.Namespace != "ns" || o.Labels["a"] != "1" || o.Labels["b.io/c"] != "2" ||
		o.APIURL != "http://router:8080" || o.ReadyTimeout != 7*time.Second || o.MaxExecTimeout != 3*time.Minute ||
		o.Kubeconfig != "/k" || o.Mode() != "direct" || o.SnapshotDir != "/snapshots" {
		t.Fatalf("parsed options = %+v", o)
	}
	if err := fs.Parse([]string{"--label=novalue"}); err == nil {
		t.Error("--label without = accepted")
	}
}
