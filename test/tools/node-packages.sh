#!/usr/bin/env bash
# Installs the Debian packages the end-to-end tests' node needs (see test/realnode):
# containerd (with ctr and the runc shim; it brings runc), the CNI plugins in
# /usr/lib/cni, iptables and iproute2. Nothing is started: the tests run containerd
# themselves. Does nothing when they are installed; needs root and apt-get otherwise.
set -euo pipefail
packages=(containerd runc containernetworking-plugins iptables iproute2)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null; then
  echo "node-packages: missing ${missing[*]}; install them as root with apt-get" >&2
  exit 1
fi
echo "[tools] node packages: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
