package backendflag

import (
	"regexp"
)

// The backends' errors and reports name the Options field to change
// ("Options.MemoryBytes", "local.Options.AllowModules",
// "Options.Connectivity=in-cluster-pod-ip"); a user of a front end sets a
// flag instead. These tables say which, per backend ("WarmPool" is a count
// for one and a pool's name for the other). TestExplainNamesRegisteredFlags
// holds them to the flags Register adds.
var (
	localFlagOf = map[string]string{
		"StateDir":              "--state-dir",
		"Network":               "--sandbox-network",
		"MemoryBytes":           "--memory-mb",
		"MemoryBudgetBytes":     "--memory-budget-mb",
		"Processes":             "--processes",
		"CPUs":                  "--cpus",
		"CPUWeight":             "--cpu-weight",
		"WarmPool":              "--" + localWarmPoolFlag,
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
		"SnapshotBytesPerOwner": "--" + snapshotOwnerFlag,
	}
	agentSandboxFlagOf = map[string]string{
		"WarmPool":         "--" + sandboxWarmPoolFlag,
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

// Explain returns err with each Options field its text names replaced by
// the flag that sets it, for the backend f names (unknown fields stay as
// they are; a zero Flags explains the local backend's). The result wraps err: errors.Is and errors.As see what they
// saw before. nil stays nil.
func (f *Flags) Explain(err error) error {
	if err == nil {
		return nil
	}
	msg := f.ExplainText(err.Error())
	if msg == err.Error() {
		return err
	}
	return &explained{msg: msg, err: err}
}

// ExplainText is Explain for a message that is not an error (a
// protection's fix in a report).
func (f *Flags) ExplainText(s string) string {
	names := localFlagOf
	if f.Backend == AgentSandbox {
		names = agentSandboxFlagOf
	}
	return optionsRE.ReplaceAllStringFunc(s, func(m string) string {
		field := optionsRE.FindStringSubmatch(m)[1]
		if flag, ok := names[field]; ok {
			return flag
		}
		return m
	})
}

// explained is an error whose text names flags instead of Options fields.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }
