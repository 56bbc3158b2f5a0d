# syntax=docker/dockerfile:1
# Builds the terraseed binaries. The image that ships to seeds (terraform and the provider
# mirror baked in, non-root, distroless) is built from the same stages.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -ldflags="-s -w" -o /out/infrastructure-controller ./cmd/infrastructure-controller

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/infrastructure-controller /infrastructure-controller
USER 65532:65532
ENTRYPOINT ["/infrastructure-controller"]
