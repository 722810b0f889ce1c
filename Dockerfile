# The go-runtime-sandbox runtime image: what runs in every agent-sandbox pod
# (manifests/base). sandbox-server serves the runtime contract on :8888 (and
# the sandboxd API when SANDBOXD_GRPC_ADDR / SANDBOXD_REST_ADDR are set);
# commands run with the Go toolchain, tar, git and CA certificates at hand.
#
#   docker build -t go-runtime-sandbox:dev .
#
# Runs as UID 1000 and works with a read-only root filesystem when /app,
# /tmp and /cache are writable volumes (emptyDirs in manifests/base; its
# seed-cache init container copies this image's /cache into the volume).

ARG GO_VERSION=1.26.8
ARG DEBIAN=trixie

# --- build: the server, static -------------------------------------------
FROM golang:${GO_VERSION}-${DEBIAN} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags="-s -w" -o /out/sandbox-server ./cmd/sandbox-server

# --- runtime ---------------------------------------------------------------
FROM debian:${DEBIAN}-slim AS runtime
# tar and coreutils (timeout: the agent-sandbox backend wraps commands in
# it) are essential packages, listed to say they are needed.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git tar coreutils \
 && rm -rf /var/lib/apt/lists/*

COPY --from=build /usr/local/go /usr/local/go

# The toolchain never downloads another one; caches live under /cache (a
# volume in the pod), module files stay writable so /app can be wiped.
# CGO is off: there is no C compiler, and the prebuilt cache below is keyed
# on it.
ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    GOTOOLCHAIN=local \
    CGO_ENABLED=0 \
    GOFLAGS=-modcacherw \
    GOPATH=/cache/gopath \
    GOCACHE=/cache/go-build \
    GOMODCACHE=/cache/mod \
    SANDBOX_BASE_DIR=/app

RUN groupadd --gid 1000 gopher \
 && useradd --uid 1000 --gid 1000 --create-home --home-dir /home/gopher --shell /bin/sh gopher \
 && mkdir -p /app /cache \
 && chown 1000:1000 /app /cache

USER 1000:1000
# Prebuild the standard library (and what go vet and go test of a small
# module need) into the build cache, so a pod's first hello world links in
# ~0.5 s instead of compiling for ~6 s. Done as UID 1000 with the env above,
# so the cache keys match what commands in the pod compute.
RUN mkdir /tmp/seed && cd /tmp/seed \
 && printf 'module seed\n\ngo 1.26\n' > go.mod \
 && printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n' > main.go \
 && printf 'package main\n\nimport "testing"\n\nfunc TestSeed(t *testing.T) {}\n' > main_test.go \
 && go build std \
 && go build -o /dev/null . && go vet . && go test . \
 && go clean -testcache \
 && cd / && rm -rf /tmp/seed

# Last, so a change to the server's source rebuilds only this layer, not
# the toolchain and the seeded cache above.
COPY --from=build /out/sandbox-server /usr/local/bin/sandbox-server

WORKDIR /app
EXPOSE 8888 9090 9091
ENTRYPOINT ["/usr/local/bin/sandbox-server"]
CMD ["--addr=:8888"]
