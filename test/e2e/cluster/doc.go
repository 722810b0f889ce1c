// Package cluster brings up a real Kubernetes control plane on this machine
// without containers, for the end-to-end tests: etcd, kube-apiserver, the
// agent-sandbox controller (with extensions) and sandbox-router as child
// processes, and a process node (package processnode) in-process standing
// in for the kubelet, scheduler and garbage collector.
//
// Every component listens on 127.0.0.1 on ports picked at start; pod IPs
// come from 127.77.0.0/16.
package cluster
