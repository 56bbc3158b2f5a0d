#!/usr/bin/env bash
# Builds every tool the tests and `make run` need from the Go module proxy, at pinned
# versions, into a cache outside the clone keyed by version. A tool already in the cache
# costs nothing; a build lands in its final place only when it completed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${TERRASEED_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terraseed/tools}
mkdir -p "$cache"

export GOFLAGS=-mod=mod
export CGO_ENABLED=0

log() { printf '[tools] %s\n' "$*" >&2; }

# build NAME DIR CHECKFILE FUNCTION: starts FUNCTION in the background with $out set to a
# scratch directory, which becomes DIR when FUNCTION succeeds. The builds run side by side
# so that downloads of one overlap with compiling another; `finish` waits for them.
pids=() names=() logs=() dirs=() outs=() starts=()
build() {
  local name=$1 dir=$2 check=$3 fn=$4
  if [[ -x "$dir/$check" ]]; then
    log "$name: cached ($dir)"
    return
  fi
  log "$name: building..."
  local out logfile
  out=$(mktemp -d "$cache/.build.XXXXXX")
  logfile="$out.log"
  (export out; "$fn") >"$logfile" 2>&1 &
  pids+=($!) names+=("$name") logs+=("$logfile") dirs+=("$dir") outs+=("$out") starts+=("$SECONDS")
}

finish() {
  local failed=0 i
  for i in "${!pids[@]}"; do
    if wait "${pids[$i]}"; then
      rm -rf "${dirs[$i]}"
      mkdir -p "$(dirname "${dirs[$i]}")"
      mv "${outs[$i]}" "${dirs[$i]}"
      rm -f "${logs[$i]}"
      log "${names[$i]}: built in $((SECONDS - starts[i]))s"
    else
      log "${names[$i]}: build failed; its output:"
      tail -40 "${logs[$i]}" >&2
      rm -rf "${outs[$i]}" "${logs[$i]}"
      failed=1
    fi
  done
  return $failed
}

build_terraform() {
  (cd "$out" && GOBIN="$out" go install "github.com/hashicorp/terraform@v$TERRAFORM_VERSION")
}

# OpenTofu, the alternative binary. Its module replaces a dependency, which `go install
# module@version` refuses: it is built in a copy of its module, as its own main module.
# Release builds stamp the version without the -dev marker, which the run checks.
build_tofu() {
  local dir
  dir=$(cd "$out" && go mod download -json "github.com/opentofu/opentofu@v$OPENTOFU_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  cp -r "$dir" "$out/src"
  chmod -R u+w "$out/src"
  (cd "$out/src" && go build -trimpath -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o "$out/tofu" ./cmd/tofu)
  rm -rf "$out/src"
}

# The provider lands in a terraform filesystem mirror (unpacked layout), so that runs
# never download it.
build_kubectl_provider() {
  (cd "$out" && GOBIN="$out" go install "github.com/gavinbunney/terraform-provider-kubectl@v$KUBECTL_PROVIDER_VERSION")
  mv "$out/terraform-provider-kubectl" "$out/terraform-provider-kubectl_v$KUBECTL_PROVIDER_VERSION"
}

# The Kubernetes builds share most of their packages: one at a time, so that the second
# finds the first's packages in the build cache instead of compiling them alongside.
k8s_build_lock() {
  if command -v flock >/dev/null; then
    exec 9>"$cache/.kubernetes-build.lock"
    flock 9
  fi
}

build_control_plane() {
  k8s_build_lock
  (cd "$here" && go build -trimpath -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
  (cd "$here" && go build -trimpath -o "$out/etcd" ./etcd)
}

# A node for the end-to-end tests (test/realnode): the kubelet, and the scheduler and
# controller manager that place and own its pods, at the kube-apiserver's version. The
# version is stamped, as the kubelet reports it in its Node object.
build_node() {
  k8s_build_lock
  local v="v$KUBERNETES_VERSION" ld
  ld="-s -w -X k8s.io/component-base/version.gitVersion=$v"
  ld+=" -X k8s.io/component-base/version.gitMajor=${KUBERNETES_VERSION%%.*}"
  ld+=" -X k8s.io/component-base/version.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
  for c in kubelet kube-scheduler kube-controller-manager; do
    (cd "$here" && go build -trimpath -ldflags "$ld" -o "$out/$c" "k8s.io/kubernetes/cmd/$c")
  done
}

build_controller_gen() {
  (cd "$here" && go build -trimpath -o "$out/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen)
}

build_helm() {
  (cd "$out" && GOBIN="$out" go install "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION")
}

# OpenTofu resolves a source without a host to registry.opentofu.org: the mirror serves
# the same provider packages under that host too.
link_opentofu_mirror() {
  local from="$cache/provider-mirror/registry.terraform.io" to="$cache/provider-mirror/registry.opentofu.org" pkg rel
  for pkg in "$from"/*/*/*/*; do
    [[ -d "$pkg" ]] || continue
    rel=${pkg#"$from"/}
    mkdir -p "$(dirname "$to/$rel")"
    ln -sfn "$pkg" "$to/$rel"
  done
}

want=${*:-terraform tofu kubectl-provider control-plane node controller-gen helm}
for tool in $want; do
  case $tool in
    terraform) build terraform "$cache/terraform-$TERRAFORM_VERSION" terraform build_terraform ;;
    tofu) build OpenTofu "$cache/opentofu-$OPENTOFU_VERSION" tofu build_tofu ;;
    kubectl-provider) build "kubectl provider" \
      "$cache/provider-mirror/registry.terraform.io/gavinbunney/kubectl/$KUBECTL_PROVIDER_VERSION/linux_amd64" \
      "terraform-provider-kubectl_v$KUBECTL_PROVIDER_VERSION" build_kubectl_provider ;;
    control-plane) build "kube-apiserver + etcd" "$cache/kube-$KUBERNETES_VERSION-etcd-$ETCD_VERSION" etcd build_control_plane ;;
    node) build "kubelet + kube-scheduler + kube-controller-manager" "$cache/node-$KUBERNETES_VERSION" kube-controller-manager build_node ;;
    controller-gen) build controller-gen "$cache/controller-gen-$CONTROLLER_TOOLS_VERSION" controller-gen build_controller_gen ;;
    helm) build helm "$cache/helm-$HELM_VERSION" helm build_helm ;;
    *) log "unknown tool $tool"; exit 2 ;;
  esac
done
finish
if [[ " $want " == *" kubectl-provider "* ]]; then
  link_opentofu_mirror
fi
