#!/usr/bin/env bash
# build-images.sh builds the container images the end-to-end node runs,
# without a registry or Docker, and caches them as docker-archive tars that
# the node imports with `ctr images import`:
#
#   base      stand-ins for the Dockerfile's FROM images, made locally:
#             debian:<suite>-slim from `debootstrap --variant=minbase <suite>`
#             and golang:<go>-<suite> = that plus this machine's Go toolchain
#             (which must be the Dockerfile's GO_VERSION) and CA bundle.
#   pause     the pod sandbox image: test/e2e/images/pause, static, on scratch.
#   router    the agent-sandbox sandbox-router binary (build-tools.sh) on scratch.
#   runtime   `buildah bud --pull=never` of the repository's Dockerfile, unchanged.
#   mcp-server the same Dockerfile's `mcp-server` target (manifests/mcp-server);
#             its build stage is the runtime's, so it reuses those layers.
#
# Every image is keyed by what goes into it (suite and Go version; the pause
# source; the router binary; the Dockerfile and every file of its build
# context) and rebuilt only when that changes. buildah's storage (layers,
# the base images) lives in the cache too, never in /var/lib/containers.
#
# Usage: test/e2e/build-images.sh ROUTER_BINARY
#   prints one line per image: NAME TAR REF BUILD_SECONDS SIZE_MB
#        test/e2e/build-images.sh --base
#   makes (or finds cached) only the base stand-ins and prints nothing; run.sh
#   runs this beside the tool builds, which it does not need
# Env:   E2E_CACHE_DIR   cache root (see lib.sh)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=/dev/null
source "$here/lib.sh"

router_bin="${1:?usage: build-images.sh ROUTER_BINARY | --base}"
cache="$(e2e_cache_root)"
images="$cache/images"
store="$cache/buildah"
mkdir -p "$images" "$store"
policy="$store/policy.json"
echo '{"default":[{"type":"insecureAcceptAnything"}]}' >"$policy"
bah=(buildah --root "$store/storage" --runroot "$store/run" --storage-driver overlay)

log() { echo "build-images: $*" >&2; }

# The Dockerfile's ARG defaults name the base images.
go_version="$(sed -n 's/^ARG GO_VERSION=//p' "$repo/Dockerfile")"
suite="$(sed -n 's/^ARG DEBIAN=//p' "$repo/Dockerfile")"
[[ -n $go_version && -n $suite ]] || { log "Dockerfile has no ARG GO_VERSION= / ARG DEBIAN= defaults"; exit 1; }
debian_ref="docker.io/library/debian:$suite-slim"
golang_ref="docker.io/library/golang:$go_version-$suite"

has_image() { "${bah[@]}" inspect --type image "$1" >/dev/null 2>&1; }

# export_image REF TAR: writes REF as a docker-archive tar, atomically.
export_image() {
	local ref="$1" tar="$2"
	rm -f "$tar.tmp"
	"${bah[@]}" push --quiet --signature-policy "$policy" "$ref" "docker-archive:$tar.tmp:$ref" >&2
	mv "$tar.tmp" "$tar"
}

# --- base images -----------------------------------------------------------
build_base() {
	local host_go
	host_go="$(go env GOVERSION)"
	if [[ $host_go != "go$go_version" ]]; then
		log "the Dockerfile builds on Go $go_version but this machine has $host_go; the golang stand-in copies this machine's toolchain, so install Go $go_version"
		exit 1
	fi
	local marker="$store/base-$suite-$go_version.done"
	if [[ -f $marker ]] && has_image "$debian_ref" && has_image "$golang_ref"; then
		log "base images $debian_ref, $golang_ref cached"
		return
	fi
	local start rootfs ctr mnt
	start=$(date +%s)
	rootfs="$store/.rootfs-$$"
	rm -rf "$rootfs"
	log "debootstrap --variant=minbase $suite (1-3 min)"
	debootstrap --variant=minbase "$suite" "$rootfs" http://deb.debian.org/debian >"$store/debootstrap.log" 2>&1 ||
		{ log "debootstrap failed; see $store/debootstrap.log"; tail -20 "$store/debootstrap.log" >&2; rm -rf "$rootfs"; exit 1; }
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs/debootstrap"
	ctr="$("${bah[@]}" from scratch)"
	mnt="$("${bah[@]}" mount "$ctr")"
	cp -a "$rootfs/." "$mnt/"
	"${bah[@]}" umount "$ctr" >/dev/null
	rm -rf "$rootfs"
	"${bah[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd bash "$ctr"
	"${bah[@]}" commit --quiet "$ctr" "$debian_ref" >/dev/null
	"${bah[@]}" rm "$ctr" >/dev/null
	log "$debian_ref made in $(($(date +%s) - start)) s"

	# golang: the toolchain where the official image has it, and CA
	# certificates so the build stage's `go mod download` can verify TLS.
	ctr="$("${bah[@]}" from --pull=never "$debian_ref")"
	mnt="$("${bah[@]}" mount "$ctr")"
	cp -a "$(go env GOROOT)" "$mnt/usr/local/go"
	mkdir -p "$mnt/etc/ssl/certs" "$mnt/go/bin"
	cp /etc/ssl/certs/ca-certificates.crt "$mnt/etc/ssl/certs/ca-certificates.crt"
	"${bah[@]}" umount "$ctr" >/dev/null
	"${bah[@]}" config --env GOLANG_VERSION="$go_version" --env GOTOOLCHAIN=local --env GOPATH=/go \
		--env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--workingdir /go --cmd bash "$ctr"
	"${bah[@]}" commit --quiet "$ctr" "$golang_ref" >/dev/null
	"${bah[@]}" rm "$ctr" >/dev/null
	touch "$marker"
	log "base images made in $(($(date +%s) - start)) s"
}

# scratch_image NAME BIN REF TAR USER: an image of the one static binary
# BIN on scratch, run as USER, written to TAR unless it is there; prints the
# image's line.
scratch_image() {
	local name="$1" bin="$2" ref="$3" tar="$4" user="$5" start ctr
	if [[ ! -f $tar ]]; then
		start=$(date +%s)
		ctr="$("${bah[@]}" from scratch)"
		"${bah[@]}" copy --quiet "$ctr" "$bin" "/$name" >/dev/null
		"${bah[@]}" config --entrypoint "[\"/$name\"]" --user "$user" "$ctr"
		"${bah[@]}" commit --quiet "$ctr" "$ref" >/dev/null
		"${bah[@]}" rm "$ctr" >/dev/null
		export_image "$ref" "$tar"
		echo "$(($(date +%s) - start))" >"$tar.seconds"
		log "$name image $ref built"
	fi
	echo "${name#sandbox-} $tar $ref $(cat "$tar.seconds") $(du -m "$tar" | cut -f1)"
}

# --- pause -----------------------------------------------------------------
build_pause() {
	local key tar bin
	key="$( { cat "$here/images/pause/main.go"; go env GOVERSION; } | sha256sum | cut -c1-12)"
	tar="$images/pause-$key.tar"
	bin="$store/.pause-$$"
	[[ -f $tar ]] || (cd "$repo" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' -o "$bin" ./test/e2e/images/pause)
	scratch_image pause "$bin" "localhost/go-runtime-sandbox-e2e/pause:$key" "$tar" 65535:65535
	rm -f "$bin"
}

# --- router ----------------------------------------------------------------
# The tag manifests/router names; the binary is the v1.0.3 module's.
build_router() {
	local key
	key="$(sha256sum <"$router_bin" | cut -c1-12)"
	scratch_image sandbox-router "$router_bin" docker.io/library/sandbox-router-go:v1.0.3 "$images/router-$key.tar" 65532:65532
}

# --- runtime (the Dockerfile) ----------------------------------------------
# context_files lists what `COPY . .` can see: tracked and untracked files
# minus what .dockerignore drops, plus its exception (the seed programs;
# approximated: more files only means a rebuild that was not needed).
context_files() {
	git -C "$repo" ls-files -co --exclude-standard |
		awk '/^pkg\/goruntime\/local\/internal\/seed\/_seed\// || !/^(\.git|\.cache|\.ci|bin|docs|manifests|scripts|test)\/|_test\.go$|(^|\/)testdata\/|\.test$|\.out$/' |
		LC_ALL=C sort
}

# context_key: what a build of the Dockerfile depends on.
context_key() {
	{
		echo "$suite $go_version"
		cat "$repo/Dockerfile" "$repo/.dockerignore"
		(cd "$repo" && context_files | while read -r f; do [[ -f $f ]] && sha256sum "$f"; done)
	} | sha256sum | cut -c1-16
}

build_runtime() {
	local key ref tar start
	key="$1"
	ref="docker.io/library/go-runtime-sandbox:dev"
	tar="$images/runtime-$key.tar"
	if [[ ! -f $tar ]]; then
		start=$(date +%s)
		log "buildah bud of $repo/Dockerfile (cold: 5-12 min; after a source edit: ~1 min)"
		"${bah[@]}" bud --pull=never --network host --layers --isolation oci \
			--signature-policy "$policy" -f "$repo/Dockerfile" -t "$ref" "$repo" >"$store/bud.log" 2>&1 ||
			{ log "buildah bud failed; see $store/bud.log"; tail -30 "$store/bud.log" >&2; exit 1; }
		local built=$(($(date +%s) - start))
		export_image "$ref" "$tar"
		# The uncompressed layers, as the archive holds them.
		du -m "$tar" | cut -f1 >"$tar.mb"
		echo "$built" >"$tar.seconds"
		# Keep the newest few runtime tars; each is ~400 MB.
		find "$images" -maxdepth 1 -name 'runtime-*.tar' -printf '%T@ %p\n' | sort -rn | tail -n +4 | cut -d' ' -f2- |
			while read -r old; do rm -f "$old" "$old.seconds" "$old.mb"; done
		log "runtime image $ref built in $built s ($(cat "$tar.mb") MB)"
	fi
	echo "runtime $tar $ref $(cat "$tar.seconds") $(cat "$tar.mb")"
}

# The mcp-server target: built after the runtime, from the same cached
# build stage. The tag is the one manifests/mcp-server names.
build_mcp() {
	local key="$1" ref tar start
	ref="docker.io/library/go-runtime-sandbox-mcp:dev"
	tar="$images/mcp-server-$key.tar"
	if [[ ! -f $tar ]]; then
		start=$(date +%s)
		"${bah[@]}" bud --pull=never --network host --layers --isolation oci --target mcp-server \
			--signature-policy "$policy" -f "$repo/Dockerfile" -t "$ref" "$repo" >"$store/bud-mcp.log" 2>&1 ||
			{ log "buildah bud --target mcp-server failed; see $store/bud-mcp.log"; tail -30 "$store/bud-mcp.log" >&2; exit 1; }
		local built=$(($(date +%s) - start))
		export_image "$ref" "$tar"
		du -m "$tar" | cut -f1 >"$tar.mb"
		echo "$built" >"$tar.seconds"
		find "$images" -maxdepth 1 -name 'mcp-server-*.tar' -printf '%T@ %p\n' | sort -rn | tail -n +4 | cut -d' ' -f2- |
			while read -r old; do rm -f "$old" "$old.seconds" "$old.mb"; done
		log "mcp-server image $ref built in $built s ($(cat "$tar.mb") MB)"
	fi
	echo "mcp-server $tar $ref $(cat "$tar.seconds") $(cat "$tar.mb")"
}

build_base
[[ $router_bin == --base ]] && exit 0
build_pause
build_router
key="$(context_key)"
build_runtime "$key"
build_mcp "$key"
