#!/usr/bin/env bash
# Installs the system packages go-runtime-sandbox needs on a Debian/Ubuntu
# machine. Idempotent: packages already present are skipped, and apt-get
# update runs only when something is missing.
#
# Usage: scripts/install-deps.sh             every package below (make test)
#        scripts/install-deps.sh bubblewrap  only the named ones (make demo)
#        scripts/install-deps.sh --missing [PACKAGE...]
#                                            print the missing ones, install
#                                            nothing (scripts/host-setup.sh)
# make demo and make deps run it through scripts/host-setup.sh, which asks
# sudo once for it and the rest of the host's one-time setup.
set -euo pipefail

print_missing=0
if [ "${1:-}" = --missing ]; then
	print_missing=1
	shift
fi

# One package per line; say who needs it.
packages=(
	bubblewrap # pkg/goruntime/local: the local backend's sandbox (bwrap)
	e2fsprogs # pkg/goruntime/local: mkfs.ext4 for each sandbox's disk (disk quota)
	mount # pkg/goruntime/local: mount -o loop for each sandbox's disk
	util-linux # pkg/goruntime/local: unshare (2.38+: --keep-caps) for a user's gates, nsenter and mount for a sandbox's pty cap
	uidmap # pkg/goruntime/local: newuidmap, newgidmap: a user's sandboxes run as subordinate ids of their own
	etcd-server # test/e2e: the store behind the end-to-end kube-apiserver
	runc # test/e2e: the node's default OCI runtime (containerd's runc shim)
	containernetworking-plugins # test/e2e: CNI bridge, host-local, loopback, portmap
	buildah # test/e2e: builds the Dockerfile (and the pause and router images) without Docker
	debootstrap # test/e2e: the debian/golang base-image stand-ins (no registry here)
	iptables # test/e2e: the kubelet's and CNI plugins' rules
	iproute2 # test/e2e: the run's network namespace (ip link/addr/route)
	util-linux # test/e2e: unshare (the run's PID/network/mount namespaces), flock
	dbus-daemon # pkg/goruntime/local/internal/cgroups tests: the private bus a fake user systemd answers on (TestJoinSystemdScope)
	chromium # cmd/playground: the browser its test drives (chromedp, headless)
	shellcheck # make lint: scripts/*.sh (scripts/run-test-kind.sh)
	python3-fastapi # make bench: upstream agent-sandbox's Python runtime, the baseline of cmd/bench
	python3-uvicorn # make bench: serves it
	python3-multipart # make bench: its /upload (FastAPI's UploadFile)
)

if [ "$#" -gt 0 ]; then
	for want in "$@"; do
		case " ${packages[*]} " in
		*" $want "*) ;;
		*)
			echo "install-deps: unknown package $want (known: ${packages[*]})" >&2
			exit 2
			;;
		esac
	done
	packages=("$@")
fi

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ "$print_missing" = 1 ]; then
	if [ "${#missing[@]}" -gt 0 ]; then
		echo "${missing[*]}"
	fi
	exit 0
fi
if [ "${#missing[@]}" -eq 0 ]; then
	echo "install-deps: all packages present: ${packages[*]}"
	exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
	echo "install-deps: installing ${missing[*]} needs root: asking sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
