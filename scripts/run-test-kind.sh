#!/usr/bin/env bash
# run-test-kind.sh: the Kubernetes quick start in one go. It builds the
# runtime image and the sandbox-router (from the agent-sandbox v1.0.3 module
# source), creates a kind cluster, installs the agent-sandbox controller with
# extensions, applies manifests/router and manifests/base (template
# go-runtime, warm pool go-runtime-pool), runs the demo's two flows with
# --backend=agent-sandbox, reattaches once, and cleans up on exit (also on
# Ctrl-C): claims first, then the cluster if this script created it.
#
# Needs docker, kind, kubectl, go and network access to GitHub (the
# controller's release manifest) and the Docker registries.
#
# Env:
#   KIND_CLUSTER_NAME   cluster to create or reuse (default go-runtime-sandbox)
#   NAMESPACE           namespace of the router, warm pool and claims (default default)
#   IMAGE               runtime image tag (default go-runtime-sandbox:dev)
#   ROUTER_IMAGE        router image tag (default sandbox-router-go:v1.0.3)
#   AGENT_SANDBOX_VERSION  controller release (default v1.0.3)
#   AGENT_SANDBOX_MANIFEST  controller manifest URL or file (default: that release's sandbox-with-extensions.yaml)
#   KEEP_CLUSTER=1      keep the cluster (and what is in it) at the end
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

cluster="${KIND_CLUSTER_NAME:-go-runtime-sandbox}"
ns="${NAMESPACE:-default}"
image="${IMAGE:-go-runtime-sandbox:dev}"
router_image="${ROUTER_IMAGE:-sandbox-router-go:v1.0.3}"
version="${AGENT_SANDBOX_VERSION:-v1.0.3}"
manifest="${AGENT_SANDBOX_MANIFEST:-https://github.com/kubernetes-sigs/agent-sandbox/releases/download/${version}/sandbox-with-extensions.yaml}"
keep="${KEEP_CLUSTER:-0}"

say() { printf '\n==> %s\n' "$*" >&2; }
die() {
	printf 'run-test-kind: %s\n' "$*" >&2
	exit 1
}

missing=()
for tool in docker kind kubectl go; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
	die "missing ${missing[*]}: install Docker (https://docs.docker.com/engine/install/), kind (https://kind.sigs.k8s.io/docs/user/quick-start/#installation), kubectl and Go, then run again"
fi
docker info >/dev/null 2>&1 || die "docker is installed but the daemon does not answer (is it running, and may this user use it?)"

created_cluster=0
kubeconfig="$(mktemp "${TMPDIR:-/tmp}/kind-kubeconfig.XXXXXX")"
kctx="kind-${cluster}"
k() { kubectl --context "$kctx" "$@"; }

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	rm -f "$kubeconfig"
	if [ "$keep" = 1 ]; then
		say "KEEP_CLUSTER=1: leaving cluster ${cluster} (kubectl --context ${kctx})"
		exit "$rc"
	fi
	if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
		say "cleanup: deleting claims made by go-runtime-sandbox in ${ns}"
		k delete sandboxclaims -n "$ns" -l app.kubernetes.io/managed-by=go-runtime-sandbox \
			--ignore-not-found --wait=false >/dev/null 2>&1 || true
		if [ "$created_cluster" = 1 ]; then
			say "cleanup: deleting kind cluster ${cluster}"
			kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "building the runtime image ${image}"
docker build -t "$image" .

say "building the sandbox-router image ${router_image} from the agent-sandbox module"
modsrc="$(go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)"
if [ -z "$modsrc" ] || [ ! -d "$modsrc/sandbox-router" ]; then
	die "agent-sandbox module source not found (run: go mod download sigs.k8s.io/agent-sandbox)"
fi
docker build -t "$router_image" -f "$modsrc/sandbox-router/Dockerfile" "$modsrc"

if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
	say "reusing kind cluster ${cluster}"
else
	say "creating kind cluster ${cluster}"
	created_cluster=1
	kind create cluster --name "$cluster" --wait 120s
fi
kind load docker-image --name "$cluster" "$image" "$router_image"

say "installing agent-sandbox ${version} (controller with extensions)"
k apply --server-side -f "$manifest"
k wait --for=condition=Established --timeout=120s \
	crd/sandboxes.agents.x-k8s.io crd/sandboxclaims.extensions.agents.x-k8s.io \
	crd/sandboxtemplates.extensions.agents.x-k8s.io crd/sandboxwarmpools.extensions.agents.x-k8s.io
k -n agent-sandbox-system rollout status deployment/agent-sandbox-controller --timeout=300s

say "installing the sandbox-router, template go-runtime and warm pool go-runtime-pool in ${ns}"
k create namespace "$ns" --dry-run=client -o yaml | k apply -f - >/dev/null
k apply -n "$ns" -k manifests/router
k apply -n "$ns" --server-side -k manifests/base
k -n "$ns" rollout status deployment/sandbox-router --timeout=180s
replicas="$(k -n "$ns" get sandboxwarmpool go-runtime-pool -o jsonpath='{.spec.replicas}')"
if ! k -n "$ns" wait --for=jsonpath='{.status.readyReplicas}'="$replicas" sandboxwarmpool/go-runtime-pool --timeout=300s; then
	k -n "$ns" get sandboxwarmpool,sandboxes,pods -o wide >&2 || true
	die "warm pool go-runtime-pool did not get ${replicas} ready sandboxes (docs/kubernetes.md, Troubleshooting)"
fi

kind get kubeconfig --name "$cluster" >"$kubeconfig"
demo=(go run ./cmd/demo --backend=agent-sandbox --kubeconfig="$kubeconfig" --namespace="$ns" --warm-pool-name=go-runtime-pool)

say "demo: both flows in a claimed sandbox"
"${demo[@]}" --flow=all

say "demo: keep a sandbox, then reattach to it by claim name"
out="$("${demo[@]}" --flow=smoke --keep 2>&1 | tee /dev/stderr)"
claim="$(printf '%s\n' "$out" | sed -n 's/.*reattach with --claim=\([a-z0-9.-]*\).*/\1/p' | tail -n 1)"
[ -n "$claim" ] || die "demo --keep printed no claim name"
"${demo[@]}" --flow=smoke --claim="$claim"

say "done: both flows and a reattach passed on ${cluster}"
