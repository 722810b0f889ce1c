# go-runtime-sandbox — the two commands a fresh machine needs:
#   make demo   installs what the local backend needs, then runs the demo
#   make test   installs what the tests need, then runs every test (unit,
#               race, corpus, end-to-end on a real one-node Kubernetes
#               cluster: kubelet, containerd, our image; needs root)
# As a user other than root both ask sudo once, naming what for, and only
# when something is missing (scripts/host-setup.sh: packages, host
# settings, the user's cgroups); make test then runs every test but the
# end-to-end one, which needs root throughout and says how to run it.
# `make help` lists every target.

GO       ?= go
FLOW     ?= all
# Extra flags for the demo, e.g. DEMO_FLAGS=--live (scripts/demo.sh).
DEMO_FLAGS ?=
# Flags for cmd/bench, e.g. BENCH_FLAGS=--sections=rootless (as root; docs/benchmarks.md).
BENCH_FLAGS ?=
# The longest one package's tests may run: a bound for a hang, not a
# speed target. cmd/mcp-server's alone passed 30 minutes on a 2-CPU
# machine at load 50-70.
TEST_TIMEOUT ?= 90m
# Packages whose tests are cheap enough to run again under -race.
RACE_PKGS ?= ./pkg/goruntime/ ./pkg/goruntime/agentsandbox/ ./internal/server/pathsafe/ ./internal/server/ ./internal/server/processapi/ ./internal/client/processclient/ ./internal/frontend/mcpserver/ ./internal/frontend/backendflag/ ./internal/frontend/sessions/ ./internal/playground/ ./pkg/goruntime/goruntimetest/

.PHONY: playground help deps build demo test unit race e2e e2e-full e2e-root cluster cluster-down bench bench-go vet lint

help: ## list targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-9s %s\n", $$1, $$2}'

deps: ## install system packages (bubblewrap, etcd-server, shellcheck) via apt, the host settings sandboxes need and a user's cgroups (scripts/host-setup.sh; sudo once when not root)
	GO='$(GO)' bash scripts/host-setup.sh

build: ## build every binary into bin/ (static: CGO_ENABLED=0, see docs/local-backend.md "Which server runs"), saying what it downloads and compiles as it goes
	CGO_ENABLED=0 GO='$(GO)' bash scripts/go-build.sh -o bin/ ./cmd/...

demo: ## install bubblewrap and uidmap (apt), the host settings and a user's cgroups (sudo once when not root), then run the demo's two flows in a local sandbox
	FLOW='$(FLOW)' DEMO_FLAGS='$(DEMO_FLAGS)' GO='$(GO)' bash scripts/demo.sh

vet: ## go vet every package
	$(GO) vet ./...

# The local backend's tests (pkg/goruntime/local) run against a fresh, empty
# state directory of their own (LOCAL_TEST_STATE_DIR; its seed build costs
# ~25 s), removed afterwards, disks unmounted: a test that needs what an
# earlier run left in the state directory fails here, not first on a new
# machine. The other packages use the default state directory.
unit: ## go test every package (includes real-bubblewrap tests and the corpus); the local backend's on a fresh state directory
	bash scripts/fresh-state-dir.sh LOCAL_TEST_STATE_DIR $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

race: ## the cheap packages again under the race detector
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -race $(RACE_PKGS)

# The e2e builds and starts a one-node cluster here (containerd, the
# kubelet, mounts, network namespaces, cgroups, /var/cache): root from
# start to end, not one step of it. As another user it refuses before
# asking anything and names the command (E2E_AS_ROOT); sudo's PATH has no
# go, hence the env.
E2E_AS_ROOT = sudo env "PATH=$$PATH" make e2e
e2e-root:
	@if [ "$$(id -u)" -ne 0 ]; then \
		echo 'e2e: needs root: it builds and starts a one-node Kubernetes cluster on this machine (containerd, kubelet, mounts, network namespaces, cgroups, /var/cache/go-runtime-sandbox/e2e). Run it as root: $(E2E_AS_ROOT)' >&2; \
		exit 1; \
	fi

e2e: e2e-root deps ## end-to-end on a real one-node cluster: kubelet, containerd (runc, gVisor), our image, agent-sandbox v1.0.3 (root)
	bash test/e2e/run.sh

e2e-full: e2e-root deps ## the e2e with every flow under gVisor too, a 30-claim benchmark and the full claims burst (30 at 5/s, 20 at once) (~15 min warm; root)
	E2E_FULL=1 E2E_CLAIMS=30 E2E_TIMEOUT=50m bash test/e2e/run.sh

# make cluster: the e2e's cluster, left running for trying the
# agent-sandbox backend by hand (no Docker or kind needed); it prints the
# kubeconfig and the commands. Root, like the e2e (test/e2e/cluster.sh
# refuses otherwise and names the command).
cluster: ## bring up the e2e's one-node cluster (kubelet, containerd with runc and gVisor, agent-sandbox v1.0.3, our image, router, warm pool) and leave it running; prints the KUBECONFIG to use (root)
	bash test/e2e/cluster.sh up

cluster-down: ## stop the cluster make cluster started and undo what it changed on the host (root)
	bash test/e2e/cluster.sh down

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.7.0

lint: deps ## gofmt, staticcheck, shellcheck the scripts, render every kustomize overlay
	@# The corpus's testdata holds badly formatted and broken Go on purpose.
	@unformatted=$$(git ls-files '*.go' | grep -v '/testdata/' | xargs "$$($(GO) env GOROOT)/bin/gofmt" -l); \
	if [ -n "$$unformatted" ]; then echo "lint: not gofmt-formatted (run gofmt -w): $$unformatted" >&2; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags e2e ./test/e2e/...
	shellcheck -x scripts/*.sh test/e2e/*.sh .ci/run
	@# kubectl from PATH, else the one the e2e harness builds from pinned sources.
	kubectl=$$(command -v kubectl || echo "$$(bash test/e2e/build-tools.sh)/kubectl"); \
	for o in manifests/base manifests/router manifests/mcp-server manifests/modproxy manifests/snapshot-store manifests/snapshot-store/local-pv manifests/overlays/*/; do \
		echo "kustomize $$o"; "$$kubectl" kustomize "$$o" >/dev/null || exit 1; \
	done

# As a user other than root, make test runs every test but the e2e and
# ends by saying so (e2e-root's reason and command).
test: deps vet unit race lint ## run every test (as a user other than root: all but the e2e, which needs root)
	@if [ "$$(id -u)" -eq 0 ]; then \
		$(MAKE) --no-print-directory e2e; \
	else \
		echo 'make test: every test but the end-to-end one ran. The e2e needs root (a Kubernetes node on this machine): $(E2E_AS_ROOT)'; \
	fi

# Flags for cmd/playground, e.g. PLAYGROUND_FLAGS=--addr=0.0.0.0:8090 (docs/playground.md).
PLAYGROUND_FLAGS ?=
playground: ## install bubblewrap (as make demo does), then serve the web playground on the local backend and print its URL
	GO='$(GO)' bash scripts/host-setup.sh bubblewrap uidmap
	$(GO) run ./cmd/playground $(PLAYGROUND_FLAGS)

bench: ## side-by-side benchmark vs bare host and upstream runtimes: a table of ratios (docs/benchmarks.md)
	GO='$(GO)' bash scripts/host-setup.sh bubblewrap python3-fastapi python3-uvicorn python3-multipart
	$(GO) run ./cmd/bench $(BENCH_FLAGS)
	@# The web playground: page load to ready, and Run → first output byte against MCP run_go_code (docs/playground.md).
	$(GO) test -run='^$$' -bench=. -benchtime=20x ./cmd/playground/

bench-go: ## the packages' go test benchmarks (runtime server, sandboxd, local backend, MCP vs library)
	$(GO) test -run='^$$' -bench=. -benchtime=20x ./internal/server/ ./internal/client/processclient/ ./pkg/goruntime/local/ ./cmd/mcp-server/
