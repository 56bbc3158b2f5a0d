# syntax=docker/dockerfile:1
# The terraseed image: the controller (/terraseed), the entrypoint of
# terraform run pods (/terraformer), terraform built from source at the pinned version and
# the Terraform providers in a filesystem mirror, so that runs never download anything.
#
#   docker build -t terraseed .             # the providers the embedded templates require
#   docker build --build-arg EXTRA_PROVIDERS="example/thing@1.2.3 hashicorp/random@3.6.3" .
#
# test/image parses this file and checks its rules; keep the version pins in step with
# test/tools/versions.env (the test compares them).

FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -ldflags="-s -w" -o /out/terraseed ./cmd/terraseed && \
    go build -ldflags="-s -w" -o /out/terraformer ./cmd/terraformer

# terraform 1.5.7 is the last MPL release; built from source through the module proxy.
FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS terraform
ARG TERRAFORM_VERSION=1.5.7
ENV CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
RUN GOBIN=/out go install -ldflags="-s -w" github.com/hashicorp/terraform@v${TERRAFORM_VERSION} && \
    /out/terraform version

# The providers: every provider the embedded templates require (their required_providers,
# at the versions they pin), and EXTRA_PROVIDERS. build/providers derives the list: HashiCorp's
# providers come as their signed release archives, the others are built from their Go module.
FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS providers
ARG EXTRA_PROVIDERS=""
WORKDIR /src
COPY go.mod go.sum ./
COPY build build
COPY templates templates
RUN go run ./build/providers mirror -out=/mirror -extra="${EXTRA_PROVIDERS}" templates

FROM gcr.io/distroless/static-debian12:nonroot@sha256:d093aa3e30dbadd3efe1310db061a14da60299baff8450a17fe0ccc514a16639
COPY --from=build /out/terraseed /terraseed
COPY --from=build /out/terraformer /terraformer
COPY --from=terraform /out/terraform /usr/local/bin/terraform
COPY --from=providers /mirror /opt/terraseed/plugins
COPY build/terraformrc /etc/terraseed/terraformrc
# The controller (--terraform, --plugin-mirror) and the terraformer (--plugin-mirror) read
# these as their defaults.
ENV TF_CLI_CONFIG_FILE=/etc/terraseed/terraformrc \
    TERRASEED_TERRAFORM=/usr/local/bin/terraform \
    TERRASEED_PROVIDER_MIRROR=/opt/terraseed/plugins \
    TERRAFORM_PROVIDER_MIRROR=/opt/terraseed/plugins
USER 65532:65532
ENTRYPOINT ["/terraseed"]
CMD ["run"]
