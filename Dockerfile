# The go-runtime-sandbox runtime image: what runs in every agent-sandbox pod
# (manifests/base). sandbox-podserver (sandbox-server with the sandboxd
# process API in the same process, cmd/sandbox-podserver) serves the
# runtime contract on :8888 and the sandboxd API when SANDBOXD_GRPC_ADDR /
# SANDBOXD_REST_ADDR are set;
# commands run with the Go toolchain, tar, coreutils and CA certificates at
# hand. There is no git: modules come through GOPROXY (see "No git" below).
#
#   docker build -t go-runtime-sandbox:dev .
#
# Needs BuildKit (docker's default builder) or buildah: the server build
# uses a cache mount.
#
# Runs as UID 1000 and works with a read-only root filesystem when /app,
# /tmp and /cache are writable volumes (emptyDirs in manifests/base; its
# seed-cache init container copies this image's /cache into the volume).
#
# Layers, largest first, and what changes them: the Debian base; the Go
# toolchain (GO_VERSION); the seeded build cache (the toolchain and the
# seed programs in pkg/goruntime/local/internal/seed/_seed); sandbox-podserver
# (any source file), last, so a source edit rebuilds only the server and
# that layer.

ARG GO_VERSION=1.26.8
ARG DEBIAN=trixie

# --- toolchain: the Go tree as commands in a pod use it --------------------
# /usr/local/go without what no go command in a pod reads: the Go tree's own
# tests (test/, *_test.go and testdata/ of the standard library), API lists
# (api/, read only by the release checks), doc/ and misc/, and the sources
# under src/cmd. Of src/cmd only the packages of the tools the go command
# builds from source on first use are kept (go tool test2json, which the
# go-aware session runs; covdata, which go test -cover runs; pprof, trace,
# addr2line, nm, objdump, buildid, pack). The compiler, linker, assembler,
# vet, cover, fix, cgo and preprofile are prebuilt in pkg/tool and stay;
# bin/go and bin/gofmt stay (go doc is part of bin/go).
FROM golang:${GO_VERSION}-${DEBIAN} AS toolchain
RUN cd /usr/local/go \
 && mkdir -p /out/go \
 && tar -c --exclude=./src/cmd --exclude=./test --exclude=./api --exclude=./doc --exclude=./misc \
      --exclude=testdata --exclude='*_test.go' . | tar -x -C /out/go \
 && go list -deps -f '{{.Dir}}{{range .EmbedFiles}} {{.}}{{end}}' \
      cmd/test2json cmd/covdata cmd/pprof cmd/trace cmd/addr2line cmd/nm cmd/objdump cmd/buildid cmd/pack \
    | grep "^$PWD/src/cmd/" \
    | while read -r dir embeds; do \
        find "$dir" -maxdepth 1 -type f ! -name '*_test.go'; \
        for e in $embeds; do echo "$dir/$e"; done; \
      done \
    | sed "s|^$PWD/||" > /tmp/cmd-files \
 && printf '%s\n' src/cmd/go.mod src/cmd/go.sum src/cmd/vendor/modules.txt >> /tmp/cmd-files \
 && tar -c -T /tmp/cmd-files | tar -x -C /out/go

# --- go: Debian with that toolchain and the environment commands see -------
FROM debian:${DEBIAN}-slim AS go
COPY --from=toolchain /out/go /usr/local/go
# The toolchain never downloads another one; caches live under /cache (a
# volume in the pod), module files stay writable so /app can be wiped.
# CGO is off: there is no C compiler (so no go test -race either), and the
# seeded cache below is keyed on it.
ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    GOTOOLCHAIN=local \
    CGO_ENABLED=0 \
    GOFLAGS=-modcacherw \
    GOPATH=/cache/gopath \
    GOCACHE=/cache/go-build \
    GOMODCACHE=/cache/mod \
    SANDBOX_BASE_DIR=/app

# --- seed: the build cache a pod starts from -------------------------------
# The packages the local backend's seed holds too (pkg/goruntime/local/
# internal/seed): what go run of a hello world compiles, about 45 common standard
# packages (seed/main.go), what go test, go test -cover and go vet of a
# small module compile, and go tool test2json, so a pod's first hello world
# links in ~0.5 s instead of compiling for ~6 s; and a build of
# cmd/test2json that the runtime stage installs read-only and names in
# $GORUNTIME_TEST2JSON (pkg/goruntime's Test2jsonEnv), so that the per-test
# results of a pod's first go test build nothing (~350 ms otherwise), as a
# local sandbox's take the seed's. Not all of std: a package
# outside that list compiles on its first use. Built with the environment
# above and this toolchain at this path, so the cache keys match what
# commands in the pod compute (the keys do not depend on the user).
FROM go AS seed
COPY pkg/goruntime/local/internal/seed/_seed/ /tmp/seedsrc/
RUN cd /tmp/seedsrc/hello && go run main.go \
 && cd /tmp/seedsrc/seed && go mod init seed \
 && go build -o /dev/null . \
 && go test -count=1 -short . \
 && go test -count=1 -short -cover . \
 && go vet . \
 && go tool test2json </dev/null \
 && go build -o /out/test2json cmd/test2json \
 && go clean -testcache

# --- build: the server, static ---------------------------------------------
FROM golang:${GO_VERSION}-${DEBIAN} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The compile cache survives between builds (BuildKit and buildah keep
# cache mounts on the build host), so a source edit recompiles only the
# packages it touched.
RUN --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/sandbox-podserver ./cmd/modproxy

# --- mcp-server: the MCP front end as a Kubernetes Deployment ---------------
# A separate target (buildah bud --target mcp-server, docker build --target
# mcp-server): the static mcp-server on scratch with the CA bundle, as
# manifests/mcp-server runs it with --backend=agent-sandbox. No shell, no
# toolchain: it runs no code itself (the sandboxes do), so the image holds
# one file besides the certificates. UID 65532, nothing written to its
# root file system (the Deployment mounts it read-only).
FROM build AS mcp-build
RUN --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/mcp-server ./cmd/mcp-server

FROM scratch AS mcp-server
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=mcp-build /out/mcp-server /mcp-server
USER 65532:65532
EXPOSE 8931 9464
ENTRYPOINT ["/mcp-server"]
CMD ["--help"]

# --- runtime ---------------------------------------------------------------
FROM go AS runtime
# No git: the go command fetches modules through GOPROXY (the default
# https://proxy.golang.org, or the one set in the pod), which needs only
# the CA bundle. What needs git fails with the go command's own error
# (`exec: "git": executable file not found in $PATH`): a module the proxy
# does not serve (GOPROXY=direct, GOPRIVATE/GONOPROXY patterns, the
# ",direct" fallback after a 404) and git commands a program runs. VCS
# stamping (-buildvcs=auto, the default) is skipped without git. git with
# its perl is ~100 MB; an image that needs it installs it on top
# (docs/kubernetes.md). tar and coreutils (timeout: the agent-sandbox
# backend wraps commands in it) are in the Debian base.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt

RUN groupadd --gid 1000 gopher \
 && useradd --uid 1000 --gid 1000 --create-home --home-dir /home/gopher --shell /bin/sh gopher \
 && mkdir -p /app /cache \
 && chown 1000:1000 /app /cache

COPY --from=seed --chown=1000:1000 /cache/ /cache/
# Root's and on the read-only root file system: out of the commands' reach,
# unlike a build under the writable /cache.
COPY --from=seed /out/test2json /usr/local/lib/go-runtime-sandbox/test2json
ENV GORUNTIME_TEST2JSON=/usr/local/lib/go-runtime-sandbox/test2json

# Last, so a change to the server's source rebuilds only this layer, not
# the toolchain and the seeded cache above. The pod's server serves the
# sandboxd process API itself rather than through the sandbox-processapi
# companion: as PID 1 with --init, the API every command goes through is
# then out of the commands' reach, where a companion could be killed or
# stopped by them (docs/sandbox-server.md, "On Kubernetes").
COPY --from=build /out/sandbox-podserver /usr/local/bin/
# The module allowlist proxy, run from this image by manifests/modproxy
# (its own Deployment: sandboxes never run it).
COPY --from=build /out/modproxy /usr/local/bin/

USER 1000:1000
WORKDIR /app
EXPOSE 8888 9090 9091
# In a pod the server runs with --init (manifests/base), which ignores
# SIGTERM from anyone, since it cannot tell kubelet's from a command's. The
# container runtime sends this signal instead when kubelet stops the
# container (containerd and CRI-O read it from the image), and SIGKILL from
# outside the pid namespace ends its init at once: a deleted pod goes
# within its grace period, with nothing lost (its volumes are emptyDirs).
STOPSIGNAL SIGKILL
ENTRYPOINT ["/usr/local/bin/sandbox-podserver"]
CMD ["--addr=:8888"]
