# shellcheck shell=bash
# lib.sh: helpers the e2e scripts share (sourced, not run).

# e2e_cache_root prints (and creates) the directory built tools and images
# are cached in: $E2E_CACHE_DIR, else /var/cache/go-runtime-sandbox/e2e when
# writable (it survives CI's fresh clones), else <repo>/.cache/e2e.
e2e_cache_root() {
	local root="${E2E_CACHE_DIR:-}"
	if [[ -z $root ]]; then
		root=/var/cache/go-runtime-sandbox/e2e
		if ! mkdir -p "$root" 2>/dev/null || [[ ! -w $root ]]; then
			root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.cache/e2e"
		fi
	fi
	mkdir -p "$root"
	echo "$root"
}
