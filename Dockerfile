# syntax=docker/dockerfile:1
# tfsbridge image: one static binary on distroless, running as nonroot (65532).
#   docker build -t ghcr.io/tfsbridge/tfsbridge:dev .
# Releases stamp the version (the release workflow, .github/workflows/release.yaml):
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) -t ghcr.io/tfsbridge/tfsbridge:0.1.0 .
# deploy/dockerfile_test.go checks this file against the manifests.

# Build on the host's platform and cross-compile (no emulation for arm64).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
# What "tfsbridge version" prints: the context has no .git, so the toolchain
# cannot stamp the revision itself.
ARG VERSION=dev
ARG REVISION=unknown
# Static (no cgo) so it runs on distroless/static; -trimpath and -s -w keep
# build paths and debug tables out of the image.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false \
      -ldflags="-s -w -X github.com/tfsbridge/tfsbridge/internal/buildinfo.version=${VERSION} -X github.com/tfsbridge/tfsbridge/internal/buildinfo.revision=${REVISION}" \
      -o /out/tfsbridge ./cmd/tfsbridge

# No shell, no package manager, CA certificates and tzdata only.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="tfsbridge" \
      org.opencontainers.image.description="TensorFlow Serving REST clients in front of Open Inference Protocol (v2) servers" \
      org.opencontainers.image.source="https://github.com/tfsbridge/tfsbridge" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/tfsbridge /tfsbridge
# distroless's nonroot, by number: the kubelet can only check runAsNonRoot
# against a numeric USER, so a pod with runAsNonRoot and no runAsUser starts
# (a named user fails with "image has non-numeric user"). The manifests set
# the same uid explicitly too.
USER 65532:65532
# extproc gRPC (--grpc-addr), metrics/health (--metrics-addr), proxy (--http-addr).
EXPOSE 9002 9090 8501
ENTRYPOINT ["/tfsbridge"]
CMD ["extproc"]
