# syntax=docker/dockerfile:1
# tfsbridge image: one static binary on distroless, running as nonroot.
#   docker build -t ghcr.io/tfsbridge/tfsbridge:dev .
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
# Static (no cgo) so it runs on distroless/static; -trimpath and -s -w keep
# build paths and debug tables out of the image.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags='-s -w' -o /out/tfsbridge ./cmd/tfsbridge

# No shell, no package manager, CA certificates and tzdata only.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tfsbridge /tfsbridge
# nonroot is uid/gid 65532; the Kubernetes manifests set it numerically.
USER nonroot:nonroot
# extproc gRPC (--grpc-addr), metrics/health (--metrics-addr), proxy (--http-addr).
EXPOSE 9002 9090 8501
ENTRYPOINT ["/tfsbridge"]
CMD ["extproc"]
