#!/usr/bin/env bash
# Regenerates deepcopy functions and CRDs of the module at $1 and fails when they differ
# from what is there. The tree is left as it was.
set -euo pipefail

root=$(cd "${1:-.}" && pwd)
: "${CONTROLLER_GEN:?CONTROLLER_GEN must point at controller-gen (make verify sets it)}"
generated=(api/v1alpha1/zz_generated.deepcopy.go charts/terraseed/crds)

snapshot=$(mktemp -d)
trap 'rm -rf "$snapshot"' EXIT
cd "$root"
for path in "${generated[@]}"; do
  mkdir -p "$snapshot/before/$(dirname "$path")"
  if [[ -e "$path" ]]; then cp -a "$path" "$snapshot/before/$path"; fi
done

"$CONTROLLER_GEN" object paths=./api/...
"$CONTROLLER_GEN" crd paths=./api/... output:crd:dir="$snapshot/after/charts/terraseed/crds"
mkdir -p "$snapshot/after/api/v1alpha1"
mv api/v1alpha1/zz_generated.deepcopy.go "$snapshot/after/api/v1alpha1/"
# Put back what was there, so that verifying never changes the tree.
if [[ -e "$snapshot/before/api/v1alpha1/zz_generated.deepcopy.go" ]]; then
  cp -a "$snapshot/before/api/v1alpha1/zz_generated.deepcopy.go" api/v1alpha1/
fi

stale=0
for path in "${generated[@]}"; do
  if ! diff -ruN "$snapshot/before/$path" "$snapshot/after/$path" >"$snapshot/diff" 2>&1; then
    echo "stale generated file(s) under $path: run 'make generate manifests'" >&2
    head -40 "$snapshot/diff" >&2
    stale=1
  fi
done
exit $stale
