// Package agentsandbox is the Kubernetes backend of goruntime: each sandbox
// is a pod claimed from an agent-sandbox SandboxWarmPool (a SandboxClaim),
// reached through the sandbox-router with the agent-sandbox Go SDK
// (sigs.k8s.io/agent-sandbox/clients/go/sandbox, v1.0.3). The pod runs our
// runtime image (Dockerfile, manifests/), which speaks the legacy runtime
// contract on port 8888.
//
// # Lifecycle
//
// Open creates a claim on Options.WarmPool and waits for its sandbox to be
// ready; the sandbox's ID is the claim's name. Attach(id) reattaches to a
// claim by name. Sandbox.Disconnect drops the connection and keeps the
// claim; Sandbox.Close deletes the claim, and the controller deletes the
// pod. Backend.CloseAll closes every sandbox the backend still holds; the
// backend installs no signal handlers, so a main that wants its claims gone
// on SIGINT/SIGTERM does:
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	b, err := agentsandbox.New(ctx, opts)
//	...
//	defer b.CloseAll(context.WithoutCancel(ctx))
//
// # Connection modes
//
// With Options.APIURL the SDK sends requests straight to that router URL;
// with Options.GatewayName it discovers the router's address from a
// Gateway; otherwise it port-forwards to the sandbox-router-svc Service in
// Options.Namespace (the default; needs pods/portforward rights).
//
// # Commands
//
// Commands go to the sandboxd process API our runtime image serves in every
// pod (gRPC ProcessService on :9090, REST on :9091), reached per
// Options.Connectivity: a client-go port-forward to the pod (the default,
// as the SDK's own sandboxd runtime does), the pod IP, or the Sandbox's
// headless Service. Env, working directory and timeout travel as data;
// output streams as it is produced (ExecStream); ExecRequest.Stdin and
// ExecRequest.Signals reach the command. With ConnectivityRouter (always
// in Gateway mode) commands use the legacy contract through the router,
// with our server's additive timeout_seconds and env fields.
//
// # Claim lifetime
//
// Every claim carries ManagedByLabel and Options.Labels; ListClaims lists a
// namespace's claims by label selector. With Options.ClaimTTL a claim gets
// spec.lifecycle.shutdownTime, renewed while the sandbox is open here, so a
// claim whose process died is deleted by the controller after the TTL.
package agentsandbox
