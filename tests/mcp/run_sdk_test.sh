#!/bin/sh
# Runs the MCP SDK client test: installs the pinned @modelcontextprotocol/sdk into WORK_DIR
# (npm ci, skipped when the lockfile has not changed) and drives GPUWHY with it.
# Usage: run_sdk_test.sh SRC_DIR WORK_DIR GPUWHY MAKE_FIXTURE
set -eu
src=$1 work=$2
gpuwhy=$(realpath "$3") fixture=$(realpath "$4")
command -v node >/dev/null || { echo "mcp_sdk_client: node (>= 20) is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "mcp_sdk_client: npm is required" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || { echo "mcp_sdk_client: node >= 20 required, found $(node -v)" >&2; exit 1; }
mkdir -p "$work"
cp "$src/package.json" "$src/package-lock.json" "$src/mcp_client.test.mjs" "$work/"
if ! cmp -s "$work/package-lock.json" "$work/node_modules/.gw-installed-lock" 2>/dev/null; then
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$work/package-lock.json" "$work/node_modules/.gw-installed-lock"
fi
cd "$work"
GPUWHY_BIN=$gpuwhy GW_MAKE_MCP_FIXTURE=$fixture exec node --test --test-reporter=spec \
  mcp_client.test.mjs
