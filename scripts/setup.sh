#!/usr/bin/env bash
# Installs what building and testing gpuwhy needs, from Debian's apt only. Idempotent: does
# nothing when every package is present. Uses sudo when not run as root.
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang llvm
  libbpf-dev bpftool libelf-dev zlib1g-dev libsqlite3-dev libdw-dev libbz2-dev liblzma-dev
  libgtest-dev nlohmann-json3-dev
  python3 nodejs npm
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
