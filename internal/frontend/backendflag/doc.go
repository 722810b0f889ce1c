// Package backendflag gives front ends (cmd/mcp-server, cmd/demo, the
// smoke commands) one spelling of the flags that choose and configure a
// goruntime backend: --backend=local|agent-sandbox, the local backend's
// flags (--state-dir, --sandbox-network, --memory-mb, --processes, --cpus,
// --cpu-weight, --local-warm-pool-size, --disk-mb, --file-size-mb, --open-files,
// --connections, --module-download-mb, --disk-inodes, --relax) and the agent-sandbox backend's connection flags
// (agentsandbox.go: --warm-pool-name, --namespace, --api-url, --kubeconfig,
// ...). --local-warm-pool and --warm-pool are deprecated aliases of the
// two warm-pool flags. The libraries under pkg/ take no flags: their
// Options are filled here, and the Options fields their errors name are
// translated back to these flags here (explain.go).
//
// Mains that may use the local backend must call local.ServeIfChild first
// thing: the local backend re-executes the running binary as the runtime
// server inside bubblewrap when no sandbox-server binary is next to it.
package backendflag
