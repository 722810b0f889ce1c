#!/usr/bin/env bash
# Runs a command with a fresh, empty state directory for the local backend,
# as a new machine has, then removes it with everything the backend left
# there. make unit runs the local backend's tests this way, so a test that
# needs what an earlier run left in the state directory fails every time.
#
# Usage: scripts/fresh-state-dir.sh VAR command [args...]
#   VAR is the environment variable the command reads the state directory
#   from (the local backend's tests: LOCAL_TEST_STATE_DIR). It names a path
#   that does not exist yet, so the backend makes it, as on a fresh machine.
# The exit status is the command's.
set -euo pipefail

if [ "$#" -lt 2 ]; then
	echo "usage: $0 VAR command [args...]" >&2
	exit 2
fi
var=$1
shift

tmp=$(mktemp -d "${TMPDIR:-/tmp}/go-runtime-sandbox-fresh.XXXXXXXX")

# The last backend to close unmounts its spare disks, but a process that
# exits without closing its backend (a test that failed or was killed)
# leaves them mounted under /run/go-runtime-sandbox/disks, their images in
# the state directory: unmount each loop-mounted disk whose image is under
# $tmp before removing it (sandbox-check --cleanup does the same and more,
# but would have to be built first). A lazy unmount takes the disk's submounts (its build
# cache overlay) along, and the loop device frees itself (mount -o loop
# sets autoclear).
cleanup() {
	local rc=$? dev back mp n=0
	trap - EXIT INT TERM
	if command -v losetup >/dev/null; then
		while read -r dev back; do
			case $back in
			"$tmp"/*) ;;
			*) continue ;;
			esac
			while read -r mp; do
				[ -n "$mp" ] || continue
				if umount -l "$mp" && rmdir "$mp"; then
					n=$((n + 1))
				else
					echo "fresh-state-dir: could not unmount and remove $mp ($dev, $back)" >&2
				fi
			done < <(findmnt -rn -o TARGET -S "$dev" || true)
		done < <(losetup -l -n --raw -O NAME,BACK-FILE 2>/dev/null || true)
	fi
	# A user other than root cannot empty the seed's read-only directories.
	chmod -R u+w "$tmp" 2>/dev/null || true
	rm -rf "$tmp"
	echo "fresh-state-dir: unmounted $n disks of $tmp/state and removed it"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "fresh-state-dir: $var=$tmp/state (empty; removed afterwards)"
env "$var=$tmp/state" "$@"
