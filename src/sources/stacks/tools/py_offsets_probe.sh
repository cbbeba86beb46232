#!/usr/bin/env bash
# Builds py_offsets_probe.c against each interpreter's headers and prints its offsets.
# Usage: py_offsets_probe.sh [python-prefix...]   (default: every /root/.pyenv/versions/3.1[0-3]*)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefixes=("$@")
[ ${#prefixes[@]} -eq 0 ] && prefixes=(/root/.pyenv/versions/3.1[0-3].*)
for p in "${prefixes[@]}"; do
  inc=$(ls -d "$p"/include/python3.* | head -1)
  out=$(mktemp)
  cc -I"$inc" -I"$inc/internal" "$here/py_offsets_probe.c" -o "$out"
  "$out"
  rm -f "$out"
  echo
done
