#!/usr/bin/env bash
# The host's one-time setup for the local backend: the one step of make demo
# and make deps that needs root. It says what needs root and why, then asks
# sudo once for all of it (as root it just does it), and asks nothing when
# nothing is missing. Idempotent.
#
#   packages      the Debian packages named (default: every one in
#                 scripts/install-deps.sh), installed with apt-get
#   fs.file-max   the host's open-file table, when it is too small for
#                 sandboxes (sandbox-check: file-table). A sandbox can hold
#                 files through memory mappings, which RLIMIT_NOFILE does
#                 not count; only its memory limit bounds them (~2.8 million
#                 for 1 GiB). A table sized from RAM by the kernel (about
#                 2.5 million on a 24 GiB machine without systemd) would let
#                 one sandbox fill it, and then no other process without
#                 CAP_SYS_ADMIN could open a file. systemd raises it to the
#                 largest value at every boot (since v240); this does the
#                 same on hosts without it, now and in /etc/sysctl.d.
#   cgroups       for a user other than root on a cgroup v1 host: a cgroup
#                 group of the user's own in the memory, pids and cpu
#                 hierarchies, so that its sandboxes get memory, task and
#                 CPU limits (until reboot: make demo asks again after one).
#
# cmd/sandbox-check, built here as the caller, decides the last two
# (--setup-needed) and root takes them (--setup-user=$USER): the code for
# them is local.Setup, in one place.
#
# Usage: scripts/host-setup.sh [PACKAGE...]
# Env:   GO             the go command (default go)
#        SANDBOX_CHECK  keep the sandbox-check built here at this path
#                       (scripts/demo.sh asks it more afterwards)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"

# Run as root by the caller's one sudo: install the packages missing, then
# (setup=1) the settings and cgroups sandbox-check names.
if [ "${1:-}" = --as-root ]; then
	check=$2 user=$3 setup=$4
	shift 4
	if [ "$#" -gt 0 ]; then
		bash "$here/install-deps.sh" "$@"
	fi
	if [ "$setup" = 1 ]; then
		"$check" --setup-user="$user"
	fi
	exit
fi

user=$(id -un)
list=$(bash "$here/install-deps.sh" --missing "$@") # fails on an unknown package
read -r -a missing <<<"$list"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/host-setup.XXXXXXXX")
trap 'rm -rf "$tmp"' EXIT
check=${SANDBOX_CHECK:-$tmp/sandbox-check}
echo "host-setup: building cmd/sandbox-check, which says what this host needs (minutes with an empty Go build cache; its progress follows)"
(cd "$repo" && bash "$here/go-build.sh" -buildvcs=false -o "$check" ./cmd/sandbox-check)
needs=$("$check" --setup-needed)

if [ "${#missing[@]}" -eq 0 ] && [ -z "$needs" ]; then
	if [ "$(id -u)" -eq 0 ]; then
		echo "host-setup: nothing to do: the packages are present and the host settings in place"
	else
		echo "host-setup: nothing needs root: the packages are present, and the host settings and the cgroups root can give $user are in place"
	fi
	exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
	echo "host-setup: setting up:"
else
	echo "host-setup: needs root once, for:"
fi
if [ "${#missing[@]}" -gt 0 ]; then
	echo "  - installing ${missing[*]} (apt-get)"
fi
while IFS= read -r line; do
	if [ -n "$line" ]; then
		echo "  - $line"
	fi
done <<<"$needs"
setup=0
if [ -n "$needs" ]; then
	setup=1
fi

if [ "$(id -u)" -eq 0 ]; then
	bash "$0" --as-root "$check" "$user" "$setup" "${missing[@]}"
	exit
fi
# by_root says what root runs instead when sudo cannot: only the steps
# needed, with the sandbox-check built here kept in bin/ (make build's
# directory), so that root needs no Go.
by_root() {
	local steps=() joined
	if [ "${#missing[@]}" -gt 0 ]; then
		steps+=("bash $(printf %q "$repo/scripts/install-deps.sh") ${missing[*]}")
	fi
	if [ "$setup" = 1 ]; then
		local kept="$repo/bin/sandbox-check"
		if [ "$check" != "$kept" ]; then
			mkdir -p "$repo/bin" && cp "$check" "$kept"
		fi
		steps+=("$(printf %q "$kept") --setup-user=$user")
	fi
	joined=$(printf ' && %s' "${steps[@]}")
	echo "have root run: ${joined:4}"
}
if ! command -v sudo >/dev/null; then
	echo "host-setup: sudo is not installed: have root install it and add you to sudoers (apt-get install sudo; adduser $user sudo; log in again), or $(by_root)" >&2
	exit 1
fi
echo "host-setup: asking sudo once for these ($user must be in sudoers: adduser $user sudo)"
if ! sudo -- bash "$here/host-setup.sh" --as-root "$check" "$user" "$setup" "${missing[@]}"; then
	echo "host-setup: sudo did not run the setup, so sandboxes here lack what is listed above: $(by_root)" >&2
	exit 1
fi
