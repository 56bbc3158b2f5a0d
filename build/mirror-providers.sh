#!/bin/sh
# mirror-providers.sh MIRROR PROVIDER...: builds each Terraform provider from its Go module
# (through the module proxy, so every download is checked against the checksum database)
# and places it in MIRROR in terraform's unpacked filesystem-mirror layout:
#   MIRROR/registry.terraform.io/<namespace>/<type>/<version>/<os>_<arch>/terraform-provider-<type>_v<version>
# A PROVIDER is <namespace>/<type>@<version>, built from
# github.com/<namespace>/terraform-provider-<type>@v<version>, or
# <namespace>/<type>@<version>=<module>@<module-version> for a provider whose Go module
# lives elsewhere. The build flags are those of test/tools/bootstrap.sh, so the image holds
# the provider builds the tests ran against.
set -eu
mirror=$1
shift
platform="$(go env GOOS)_$(go env GOARCH)"
bin=$(mktemp -d)
for provider in "$@"; do
  spec=${provider%%=*}
  namespace=${spec%%/*}
  rest=${spec#*/}
  type=${rest%@*}
  version=${rest#*@}
  module="github.com/$namespace/terraform-provider-$type@v$version"
  case $provider in *=*) module=${provider#*=} ;; esac
  if [ -z "$namespace" ] || [ -z "$type" ] || [ -z "$version" ] || [ "$type" = "$rest" ]; then
    echo "mirror-providers: $provider is not <namespace>/<type>@<version>[=<module>@<version>]" >&2
    exit 2
  fi
  echo "mirror-providers: $namespace/$type $version from $module" >&2
  rm -rf "$bin" && mkdir -p "$bin"
  GOBIN="$bin" CGO_ENABLED=0 go install "$module"
  dir="$mirror/registry.terraform.io/$namespace/$type/$version/$platform"
  mkdir -p "$dir"
  # The module's binary is named after its last path element.
  mv "$bin"/* "$dir/terraform-provider-${type}_v$version"
done
rm -rf "$bin"
