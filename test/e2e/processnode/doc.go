// Package processnode is a stand-in for a kubelet in the end-to-end
// harness. It registers a Node, binds every Pending pod to it (there is no
// scheduler either), runs each pod's runtime container as a local
// sandbox-server process on its own loopback address (127.x.y.z), probes
// readiness as the pod spec says, reports pod status, and stops the process
// when the pod is deleted. Because no kube-controller-manager runs, it also
// does the garbage collector's part: dependents whose owners are gone are
// deleted (see gc.go).
//
// What it does not do: pull or look at images, run the container's command,
// isolate the process (no namespaces, cgroups or network policy), mount
// volumes, or run liveness and startup probes.
package processnode
