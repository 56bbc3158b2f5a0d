#!/usr/bin/env bash
# Sets up the tools the tests and `make run` need, at the versions pinned in versions.env,
# in a cache outside the clone keyed by version: `bootstrap.sh` sets up every tool,
# `bootstrap.sh NAME...` only those named (the Makefile names what each target uses). A
# tool already in the cache costs nothing; a tool lands in its final place only when it
# completed.
#
# terraform and kube-apiserver + etcd come as official release binaries where those can
# be had (test/download: HashiCorp's releases, the envtest binaries' index; checked
# against their checksums), and are built from the Go module proxy where not; the other
# tools are always built from the module proxy.
#
# Environment:
#   TERRASEED_TOOLS_CACHE  the cache (~/.cache/terraseed/tools)
#   TERRASEED_TOOLS_JOBS   how many builds run at a time (derived from the core count)
#   TERRASEED_DOWNLOAD     "never": build everything from source; "require": download
#                          terraform and kube-apiserver + etcd, fail when that fails
#   and those test/download reads (TERRASEED_RELEASES_URL, TERRASEED_ENVTEST_INDEX, ...).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${TERRASEED_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terraseed/tools}
mkdir -p "$cache"

export GOFLAGS=-mod=mod
export CGO_ENABLED=0

log() { printf '[tools] %s\n' "$*" >&2; }
# The builds' output goes to their logs; what they tell the user goes to fd 3.
exec 3>&2

# Go compiles the packages of one build on every core already, so builds side by side
# mostly compete for the cores and memory. The default is one build per two cores, at
# least one: on 2 cores one at a time set up `make run`'s tools in 923 s, two at a time in
# 939 s with 11% more CPU time (README.md, "How long the first run takes").
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null || echo 2)
jobs=${TERRASEED_TOOLS_JOBS:-$(( cores / 2 > 1 ? cores / 2 : 1 ))}

# Seconds each build takes on a 2-core machine with empty Go build and module caches: the
# longest start first, and they make the estimate shown up front. Those of `make run`'s
# tools were measured one at a time on a new, quiet 2-core machine with every cache empty
# (README.md); the others are rough guesses, not measured one at a time yet. A tool
# missing here counts as 120 s.
declare -A estimate=(
  [build_control_plane]=571
  [build_kubectl_provider]=147
  [build_terraform]=205
  [build_node]=900
  [build_tofu]=400
  [build_helm]=200
  [build_controller_gen]=90
  [build_staticcheck]=120
)

# build NAME DIR CHECKFILE FUNCTION: queues FUNCTION, to run with $out set to a scratch
# directory, which becomes DIR when FUNCTION succeeds; `finish` runs the queue.
qnames=() qdirs=() qouts=() qfns=()
build() {
  local name=$1 dir=$2 check=$3 fn=$4
  if [[ -x "$dir/$check" ]]; then
    log "$name: cached ($dir)"
    return
  fi
  qnames+=("$name") qdirs+=("$dir") qfns+=("$fn")
}

est() { echo "${estimate[$1]:-120}"; }

# The queue's order: longest estimate first.
plan() {
  local i
  for i in "${!qfns[@]}"; do echo "$(est "${qfns[$i]}") $i"; done | sort -rn | cut -d' ' -f2
}

# The estimate up front: the sum of the builds' measured times, scaled from 2 cores to
# this machine's. Go keeps the cores busy within one build, so builds side by side do not
# make the sum much shorter on a machine of a few cores.
estimate_seconds() {
  local i sum=0
  for i in "${!qfns[@]}"; do sum=$((sum + $(est "${qfns[$i]}"))); done
  echo $((sum * 2 / cores))
}

# finish: runs the queued builds, $jobs at a time, longest first, and reports each one's
# start and end with its elapsed time. Fails when one failed, after the others finished.
# A small job queue written here in bash (wait -n, bash 5.1 or later), so that the tools
# need nothing beyond Go, git and make.
finish() {
  ((${#qfns[@]})) || return 0
  local -a order
  mapfile -t order < <(plan)
  local total names="" i
  total=$(estimate_seconds)
  for i in "${order[@]}"; do names+="${names:+, }${qnames[$i]}"; done
  log "to set up: $names; $jobs at a time on $cores cores. estimate: about $(( (total + 59) / 60 )) min to build from source with an empty Go build cache (from times measured on 2 cores), seconds where downloaded"
  local t0=$SECONDS failed=0 done_count=0 n=${#order[@]} next=0 pid
  declare -A job_of=() start_of=()
  while ((done_count < n)); do
    while ((next < n && ${#job_of[@]} < jobs)); do
      i=${order[next]}
      next=$((next + 1))
      qouts[i]=$(mktemp -d "$cache/.build.XXXXXX")
      log "${qnames[$i]}: started ($next/$n, +$((SECONDS - t0))s)"
      (export out=${qouts[$i]}; "${qfns[$i]}") >"${qouts[$i]}.log" 2>&1 &
      job_of[$!]=$i start_of[$!]=$SECONDS
    done
    pid=
    wait -n -p pid "${!job_of[@]}" && rc=0 || rc=$?
    [[ -n $pid ]] || continue
    i=${job_of[$pid]}
    local took=$((SECONDS - start_of[$pid])) how="built from source"
    unset "job_of[$pid]" "start_of[$pid]"
    done_count=$((done_count + 1))
    [[ -s "${qouts[$i]}.how" ]] && how=$(<"${qouts[$i]}.how")
    if ((rc == 0)); then
      rm -rf "${qdirs[$i]}"
      mkdir -p "$(dirname "${qdirs[$i]}")"
      mv "${qouts[$i]}" "${qdirs[$i]}"
      rm -f "${qouts[$i]}.log" "${qouts[$i]}.how"
      log "${qnames[$i]}: $how in ${took}s (+$((SECONDS - t0))s)"
    else
      log "${qnames[$i]}: failed after ${took}s; its output:"
      tail -40 "${qouts[$i]}.log" >&2
      rm -rf "${qouts[$i]}" "${qouts[$i]}.log" "${qouts[$i]}.how"
      failed=1
    fi
  done
  # The CPU time (user, system) the builds used: what they cost whatever else runs.
  # `times` in this shell (not in a command substitution, whose children are none).
  local tf
  tf=$(mktemp)
  times >"$tf"
  log "done in $((SECONDS - t0))s; CPU time of the builds (user system): $(tail -1 "$tf")"
  rm -f "$tf"
  return $failed
}

# download WHAT ARGS...: installs official release binaries with test/download and
# records in $out.how that they were downloaded. When they cannot be had, says why on the
# terminal (fd 3) and fails, for the caller to build from source; TERRASEED_DOWNLOAD=never
# skips it, =require makes its failure the build's (no source build).
download() {
  [[ ${TERRASEED_DOWNLOAD:-} != never ]] || return 1
  local err=$out.download-err
  if (cd "$repo" && go run ./test/download "$@") 2>"$err"; then
    cat "$err"; rm -f "$err"
    echo downloaded >"$out.how"
    return 0
  fi
  cat "$err"
  local why
  why=$(grep '^download: ' "$err" | tail -1) || why=$(tail -1 "$err")
  printf '[tools] %s: no official release binary (%s): %s\n' "$1" "${why#download: }" \
    "$([[ ${TERRASEED_DOWNLOAD:-} == require ]] && echo "TERRASEED_DOWNLOAD=require, failing" || echo "building from source")" >&3
  rm -f "$err"
  [[ ${TERRASEED_DOWNLOAD:-} != require ]] || exit 1
  return 1
}

build_terraform() {
  download terraform -version "$TERRAFORM_VERSION" -out "$out" && return
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

# The envtest archive for a Kubernetes release holds the etcd that release was tested
# with: test/download keeps it only when it is the pinned one, and etcd alone is built
# here when not.
build_control_plane() {
  if download envtest -version "$KUBERNETES_VERSION" -etcd-version "$ETCD_VERSION" -out "$out"; then
    [[ -x "$out/etcd" ]] || (echo "downloaded kube-apiserver, etcd built from source" >"$out.how"; cd "$here" && go build -trimpath -o "$out/etcd" ./etcd)
    return
  fi
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

# staticcheck, which `make verify` runs. The pin is the module's version (0.8.2), which
# staticcheck -version prints beside the release's name (2026.2.2).
build_staticcheck() {
  (cd "$out" && GOBIN="$out" go install "honnef.co/go/tools/cmd/staticcheck@v$STATICCHECK_VERSION")
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

want=${*:-terraform tofu kubectl-provider control-plane node controller-gen helm staticcheck}
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
    staticcheck) build staticcheck "$cache/staticcheck-$STATICCHECK_VERSION" staticcheck build_staticcheck ;;
    *) log "unknown tool $tool"; exit 2 ;;
  esac
done
finish
if [[ " $want " == *" kubectl-provider "* ]]; then
  link_opentofu_mirror
fi
