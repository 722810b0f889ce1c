// Package optionflag names, per backend, the front ends' flag for each
// Options field a backend's error or report names: the words a user of
// cmd/demo, cmd/mcp-server or cmd/sandbox-check reads in place of the
// library's. It imports no backend, so a program that only reports (such
// as sandbox-check) does not link one it does not use.
package optionflag

import "regexp"

// Flag names the tables share with package backendflag, which registers
// them.
const (
	// LocalWarmPool is the local backend's warm pool size.
	LocalWarmPool = "local-warm-pool-size"
	// SandboxWarmPool is the agent-sandbox backend's warm pool name.
	SandboxWarmPool = "warm-pool-name"
	// SnapshotPerOwner is the local backend's per-owner share of the
	// snapshot store.
	SnapshotPerOwner = "snapshot-per-owner-mb"
)

// The backends' errors and reports name the Options field to change
// ("Options.MemoryBytes", "local.Options.AllowModules",
// "Options.Connectivity=in-cluster-pod-ip"); a user of a front end sets a
// flag instead. These tables say which, per backend ("WarmPool" is a count
// for one and a pool's name for the other); backendflag's
// TestExplainNamesRegisteredFlags holds them to the flags it registers.
var (
	Local = map[string]string{
		"StateDir":              "--state-dir",
		"Network":               "--sandbox-network",
		"MemoryBytes":           "--memory-mb",
		"MemoryBudgetBytes":     "--memory-budget-mb",
		"Processes":             "--processes",
		"CPUs":                  "--cpus",
		"CPUWeight":             "--cpu-weight",
		"WarmPool":              "--" + LocalWarmPool,
		"DiskBytes":             "--disk-mb",
		"FileSizeBytes":         "--file-size-mb",
		"OpenFiles":             "--open-files",
		"Connections":           "--connections",
		"ModuleDownloadBytes":   "--module-download-mb",
		"DiskInodes":            "--disk-inodes",
		"AllowModules":          "--allow-modules",
		"Relax.Seccomp":         "--relax=seccomp",
		"Relax.NestedUserns":    "--relax=userns",
		"Relax.HostUID":         "--relax=hostuid",
		"Relax.DiskQuota":       "--relax=disk",
		"Relax.FileTable":       "--relax=filetable",
		"Relax.Connections":     "--relax=connections",
		"SnapshotBytes":         "--snapshot-mb",
		"SnapshotBytesPerOwner": "--" + SnapshotPerOwner,
	}
	AgentSandbox = map[string]string{
		"WarmPool":         "--" + SandboxWarmPool,
		"Namespace":        "--namespace",
		"Labels":           "--labels",
		"ClaimTTL":         "--claim-ttl",
		"Connectivity":     "--connectivity",
		"APIURL":           "--api-url",
		"GatewayName":      "--gateway-name",
		"GatewayNamespace": "--gateway-namespace",
		"Kubeconfig":       "--kubeconfig",
		"ReadyTimeout":     "--ready-timeout",
		"MaxExecTimeout":   "--max-exec-timeout",
		"SnapshotDir":      "--snapshot-dir",
		"SnapshotBytes":    "--snapshot-mb",
	}
)

// optionsRE matches a backend's name for one of its settings: an Options
// field, or a field of one of its structs (Options.Relax.Seccomp).
var optionsRE = regexp.MustCompile(`\b(?:local\.|agentsandbox\.)?Options\.([A-Z][A-Za-z]*(?:\.[A-Z][A-Za-z]*)?)`)

// Text returns s with each Options field it names replaced by the flag
// that sets it: the agent-sandbox backend's when agentSandbox is set, else
// the local backend's. Unknown fields stay as they are.
func Text(s string, agentSandbox bool) string {
	names := Local
	if agentSandbox {
		names = AgentSandbox
	}
	return optionsRE.ReplaceAllStringFunc(s, func(m string) string {
		if flag, ok := names[optionsRE.FindStringSubmatch(m)[1]]; ok {
			return flag
		}
		return m
	})
}
