#!/usr/bin/env bash
# Installs what building and testing gpuwhy needs, from Debian's apt only. Idempotent: does
# nothing when every package is present. Uses sudo when not run as root.
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang llvm
  libbpf-dev bpftool libelf-dev zlib1g-dev libsqlite3-dev libdw-dev libbz2-dev liblzma-dev
  libgtest-dev nlohmann-json3-dev
  libclang-rt-14-dev  # libFuzzer for tests/fuzz (make test-sanitize)
  man-db groff-base  # make deb / packaging_e2e: man -l and groff -ww check the generated pages
  protobuf-compiler  # export_e2e: protoc --decode_raw reads the Perfetto traces back
  chromium  # report_e2e: opens the HTML report headless (DOM, console, screenshot)
  clickhouse-server  # clickhouse_e2e: a real server for trace --sink, fleet, query/explain --clickhouse
  prometheus  # prometheus_e2e: a real server scrapes trace --prometheus (run by the test)
)
# Node.js and npm (for the MCP SDK client test) and python3 may come from the machine image
# rather than Debian (NodeSource's nodejs bundles npm and conflicts with Debian's npm): only
# ask apt for them when the commands are missing.
command -v python3 >/dev/null 2>&1 || packages+=(python3)
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

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
# The tests start their own servers on free ports; the packages' own services are not needed.
for service in clickhouse-server prometheus; do
  if [[ " ${missing[*]} " == *" $service "* ]] && [ -d /run/systemd/system ]; then
    $SUDO systemctl disable --now "$service" >/dev/null 2>&1 || true
  fi
done
