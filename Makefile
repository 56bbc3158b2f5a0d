# Everything a developer or CI needs: `make run` and `make test` set up the rest.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

include test/tools/versions.env

TOOLS_CACHE ?= $(or $(TERRASEED_TOOLS_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/terraseed/tools)
export TERRASEED_TOOLS_CACHE := $(TOOLS_CACHE)
export KUBEBUILDER_ASSETS := $(TOOLS_CACHE)/kube-$(KUBERNETES_VERSION)-etcd-$(ETCD_VERSION)
export TERRASEED_TERRAFORM := $(TOOLS_CACHE)/terraform-$(TERRAFORM_VERSION)/terraform
export TERRASEED_TOFU := $(TOOLS_CACHE)/opentofu-$(OPENTOFU_VERSION)/tofu
export TERRASEED_PROVIDER_MIRROR := $(TOOLS_CACHE)/provider-mirror
export TERRASEED_NODE_BINARIES := $(TOOLS_CACHE)/node-$(KUBERNETES_VERSION)
# The hashicorp/aws provider is not among the pinned tools: no source the set-up reaches
# serves it. Where the machine keeps it in a filesystem mirror, the aws templates' tests run
# terraform validate with it; elsewhere they say so and check the configuration without it.
AWS_PROVIDER_MIRROR ?= $(if $(wildcard /opt/tf-plugins/registry.terraform.io/hashicorp/aws),/opt/tf-plugins)
export TERRASEED_AWS_PROVIDER_MIRROR ?= $(AWS_PROVIDER_MIRROR)
CONTROLLER_GEN := $(TOOLS_CACHE)/controller-gen-$(CONTROLLER_TOOLS_VERSION)/controller-gen
HELM := $(TOOLS_CACHE)/helm-$(HELM_VERSION)/helm
STATICCHECK := $(TOOLS_CACHE)/staticcheck-$(STATICCHECK_VERSION)/staticcheck
export CONTROLLER_GEN HELM STATICCHECK

GO_TEST_FLAGS ?= -count=1 -timeout 45m

.PHONY: all
all: build

.PHONY: help
help: ## List the targets and what each does.
	@awk 'BEGIN { FS = ":[^#]*## " } /^[a-zA-Z_-]+:.*## / { gsub(/\$$\$$/, "$$", $$2); printf "  %-12s %s\n", $$1, $$2 }' $(firstword $(MAKEFILE_LIST))

# The tools each target uses (test/tools/bootstrap.sh names them); a target sets up only
# its own. Every tool is `make tools`.
RUN_TOOLS := terraform kubectl-provider control-plane

.PHONY: tools
tools: ## Set up every pinned tool in the cache (seconds when cached).
	@bash test/tools/bootstrap.sh

.PHONY: run-tools
run-tools: ## Set up only the tools `make run` uses: terraform, the kubectl provider, kube-apiserver and etcd.
	@bash test/tools/bootstrap.sh $(RUN_TOOLS)

.PHONY: time-first-run
time-first-run: ## Time the first `make run` on empty caches in a scratch directory (COLD_MODULES=1: the Go module cache too).
	bash test/tools/time-first-run.sh

.PHONY: env
env: ## Print the environment the tests use, for `eval "$$(make -s env)"`.
	@echo "export KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS)"
	@echo "export TERRASEED_TERRAFORM=$(TERRASEED_TERRAFORM)"
	@echo "export TERRASEED_TOFU=$(TERRASEED_TOFU)"
	@echo "export TERRASEED_PROVIDER_MIRROR=$(TERRASEED_PROVIDER_MIRROR)"
	@echo "export TERRASEED_NODE_BINARIES=$(TERRASEED_NODE_BINARIES)"
	@echo "export TERRASEED_AWS_PROVIDER_MIRROR=$(TERRASEED_AWS_PROVIDER_MIRROR)"
	@echo "export CONTROLLER_GEN=$(CONTROLLER_GEN)"
	@echo "export HELM=$(HELM)"
	@echo "export STATICCHECK=$(STATICCHECK)"

.PHONY: generate
generate: ## Regenerate deepcopy functions.
	@bash test/tools/bootstrap.sh controller-gen
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: ## Regenerate the CRDs into the Helm chart.
	@bash test/tools/bootstrap.sh controller-gen
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:dir=charts/terraseed/crds

# The packages whose code runs concurrently (the reconcilers' operations and heartbeat,
# the run scheduler and executors, the terraformer's state watching, the webhook's
# certificate rotation and its admissions' renders): `make verify` runs their tests under
# the race detector, which needs cgo; their tests use the tools `make run` uses, and the
# webhook's start the kube-controller-manager it mutates (the node's binaries).
RACE_PACKAGES := ./controller/extension/... ./terraform/executor/... ./terraform/terraformer/... ./controller/webhook/...

.PHONY: verify
verify: ## Fail when generated files are stale, code is unformatted, vet or staticcheck complains, or a race shows in the concurrent packages' tests.
	@bash test/tools/bootstrap.sh controller-gen staticcheck node $(RUN_TOOLS)
	bash test/tools/verify-generated.sh .
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	go vet ./...
	cd test/compat && go vet ./...
	$(STATICCHECK) ./...
	cd test/compat && $(STATICCHECK) ./...
	CGO_ENABLED=1 go test -race $(GO_TEST_FLAGS) $(RACE_PACKAGES)

.PHONY: build
build: ## Build every package.
	go build ./...

# The end-to-end packages run pods on a node of this machine (test/realnode): after the
# others, so that their pods and the others' control planes do not compete for the CPU.
NODE_PACKAGES := ./test/realnode/... ./test/e2e/...

.PHONY: test
test: tools verify ## Run every test against real components.
	go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v -e /test/realnode -e /test/e2e -e /test/scale -e /test/soak)
	go test $(GO_TEST_FLAGS) -skip '^TestSoak' $(NODE_PACKAGES)
	cd test/compat && go test $(GO_TEST_FLAGS) ./...

.PHONY: bench
bench: tools ## Run the benchmarks.
	go test -run '^$$' -bench . -benchmem -timeout 60m $$(go list ./... | grep -v -e /test/realnode -e /test/e2e -e /test/scale -e /test/soak -e /terraform/executor -e /terraform/terraformer)
	# The executor's and the terraformer process's benchmarks compare with bare terraform over twenty pairs each.
	go test -run '^$$' -bench . -benchtime 20x -timeout 60m ./terraform/executor/ ./terraform/terraformer/

# EXECUTOR=pod runs the benchmark on the real node of test/realnode (root, as the
# end-to-end tests): run pods of the image assembled from the working tree, side by side
# with the local executor.
EXECUTOR ?= local

.PHONY: bench-scale
bench-scale: tools ## Measure one controller serving a seed of TERRASEED_SCALE_N Infrastructures (1000; 200 with EXECUTOR=pod, run pods on a real node), then two cloud accounts of TERRASEED_FLEET_N (100) each, then a seed of every kind: TERRASEED_KINDS_N (1000) shoots of an Infrastructure, two DNSRecords and a BackupEntry, and a BackupBucket.
	TERRASEED_SCALE_EXECUTOR=$(EXECUTOR) go test -run '^$$' -bench '$(if $(filter pod,$(EXECUTOR)),^BenchmarkScalePods$$,^BenchmarkScale(Fleet|Kinds)?$$)' -benchtime 1x -timeout 300m -v ./test/scale/

.PHONY: soak
soak: tools ## SIGKILL the controller and terraform, and delete states with their history, at random while Infrastructures come and go, with the local executor and with run pods on the node, then check nothing was lost or left (TERRASEED_SOAK_OBJECTS, _DURATION, _KILLS).
	go test -run Soak -count=1 -timeout 60m -v ./test/soak/
	go test -run '^TestSoak' -count=1 -timeout 60m -v ./test/e2e/

# `make run` runs the controller built as the image builds it: static, without cgo.
.PHONY: run
run: run-tools ## Run terraseed on an embedded local control plane; Ctrl-C stops it and exits 0.
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o bin/terraseed ./cmd/terraseed
	bin/terraseed local $(RUN_FLAGS)
