#!/usr/bin/env bash
# Runs `go build -v ARGS...` and says what it downloads and compiles as it
# goes, so that a first build (empty module cache and build cache: minutes
# on 2 busy cores) has no silent stretch: the go command's own lines
# ("go: downloading MODULE VERSION", errors) pass through as they come;
# the packages it compiles (what -v prints, one import path a line) are
# summed up in one line at most every 5 s, and when the go command prints
# nothing for 5 s (a large package, a slow download) a line says how long
# it has been and what came last. make build, make demo and
# scripts/host-setup.sh build through it.
#
# Usage: scripts/go-build.sh [BUILD FLAG...] PACKAGE...
# Env:   GO  the go command (default go)
# Exits with the go command's status.
set -uo pipefail

every=5 # seconds at most between two lines of ours
now() { echo "${EPOCHREALTIME/./}"; } # microseconds
start=$(now)
"${GO:-go}" build -v "$@" 2>&1 | {
	n=0 last="" told=$start partial=""
	take() {
		if [[ $1 =~ ^[A-Za-z0-9._~/+-]+$ ]]; then
			n=$((n + 1)) last=$1
		else
			echo "$1"
			last=$1
			told=$(now)
		fi
	}
	while :; do
		# Wait for the next line at most until the next summary is due.
		left=$((every * 1000000 - ($(now) - told)))
		if ((left < 100000)); then
			left=100000
		fi
		line=""
		if IFS= read -r -t "$((left / 1000000)).$(printf %06d $((left % 1000000)))" line; then
			take "$partial$line"
			partial=""
		elif [ $? -gt 128 ]; then
			partial+=$line # a line cut by the timeout: the rest follows
		else
			if [ -n "$partial$line" ]; then
				take "$partial$line"
			fi
			break
		fi
		if (($(now) - told >= every * 1000000)); then
			echo "go build: $n packages compiled, $((($(now) - start) / 1000000))s${last:+ (latest: $last)}"
			told=$(now)
		fi
	done
	echo "go build: $n packages compiled in $((($(now) - start) / 1000000))s"
}
exit "${PIPESTATUS[0]}"
