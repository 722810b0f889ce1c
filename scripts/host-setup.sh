#!/usr/bin/env bash
# The one-time host settings the local backend needs, applied as root
# (with sudo when not root). Idempotent: a setting already in place is left
# alone, and nothing is written when nothing is missing.
#
#   fs.file-max   The host's open-file table. A sandbox can hold files
#                 through memory mappings, which RLIMIT_NOFILE does not
#                 count; only its memory limit bounds them (~2.8 million
#                 for 1 GiB). A table sized from RAM by the kernel (about
#                 2.5 million on a 24 GiB machine without systemd) would let
#                 one sandbox fill it, and then no other process without
#                 CAP_SYS_ADMIN could open a file. systemd raises it to the
#                 largest value at every boot (since v240); this does the
#                 same on hosts without it, now and in /etc/sysctl.d.
#
# Usage: scripts/host-setup.sh        (make demo and make deps run it)
# go run ./cmd/sandbox-check shows whether the host needs it (file-table).
set -euo pipefail

want=9223372036854775807
conf=/etc/sysctl.d/60-go-runtime-sandbox.conf

cur=$(cat /proc/sys/fs/file-max)
if [ "$cur" = "$want" ]; then
	echo "host-setup: fs.file-max already $want"
	exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
echo "host-setup: raising fs.file-max from $cur to $want, as systemd does at every boot, so that no sandbox can fill the host's open-file table (kept in $conf)"
echo "fs.file-max = $want" | $sudo tee "$conf" >/dev/null
$sudo sysctl -q -w "fs.file-max=$want"
