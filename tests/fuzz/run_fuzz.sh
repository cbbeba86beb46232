#!/usr/bin/env bash
# Builds each libFuzzer target with clang (ASan + UBSan) and runs it for a bounded time
# (GW_FUZZ_SECONDS, default 15 s each). A crash, sanitizer report or broken invariant fails.
# Usage: run_fuzz.sh SOURCE_DIR [SECONDS]
set -uo pipefail
SRC=$1
SECONDS_EACH=${2:-${GW_FUZZ_SECONDS:-15}}
CXX=$(command -v clang++ || command -v clang++-14) || { echo "FAIL - clang++ missing (scripts/setup.sh installs it)"; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
FLAGS=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$SRC/src")
failures=0
build_and_run() {  # NAME SOURCES...
  local name=$1; shift
  if ! "$CXX" "${FLAGS[@]}" -o "$WORK/$name" "$@" 2> "$WORK/$name.build"; then
    cat "$WORK/$name.build"; echo "FAIL - $name: build"; failures=$((failures + 1)); return
  fi
  mkdir -p "$WORK/$name.corpus"
  if "$WORK/$name" -max_total_time="$SECONDS_EACH" -max_len=4096 -print_final_stats=0 \
       "$WORK/$name.corpus" > "$WORK/$name.log" 2>&1; then
    echo "ok - $name: $(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$WORK/$name.log" | tail -1)"
  else
    tail -40 "$WORK/$name.log"; echo "FAIL - $name"; failures=$((failures + 1))
  fi
}
build_and_run fuzz_flags "$SRC/tests/fuzz/fuzz_flags.cc" "$SRC/src/base/flags.cc" "$SRC/src/base/status.cc"
build_and_run fuzz_text "$SRC/tests/fuzz/fuzz_text.cc" "$SRC/src/base/text.cc" "$SRC/src/base/table.cc"
build_and_run fuzz_jsonrpc "$SRC/tests/fuzz/fuzz_jsonrpc.cc" "$SRC/src/mcp/line_reader.cc" "$SRC/src/mcp/json_rpc.cc"
echo "fuzz: $failures failure(s)"
[ "$failures" -eq 0 ]
