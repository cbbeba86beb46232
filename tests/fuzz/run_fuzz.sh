#!/usr/bin/env bash
# Builds each libFuzzer target with clang (ASan + UBSan) and runs it for a bounded time
# (GW_FUZZ_SECONDS, default 15 s each; the stacks and ELF targets 20 s). A crash, sanitizer
# report or broken invariant fails. Targets with real inputs start from a seed corpus made here
# (CPython line tables recorded from the interpreters, a _Py_DebugOffsets block, stored frames,
# small ELF files built by the C compiler).
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
# Per target (set on the call): FUZZ_SECONDS, MAX_LEN, LIBS (link flags), SEEDS (a directory).
build_and_run() {  # NAME SOURCES...
  local name=$1; shift
  # shellcheck disable=SC2086  # LIBS is a list of flags
  if ! "$CXX" "${FLAGS[@]}" -o "$WORK/$name" "$@" ${LIBS:-} 2> "$WORK/$name.build"; then
    cat "$WORK/$name.build"; echo "FAIL - $name: build"; failures=$((failures + 1)); return
  fi
  mkdir -p "$WORK/$name.corpus"
  if [ -n "${SEEDS:-}" ]; then cp "$SEEDS"/* "$WORK/$name.corpus/"; fi
  if "$WORK/$name" -max_total_time="${FUZZ_SECONDS:-$SECONDS_EACH}" -max_len="${MAX_LEN:-4096}" \
       -print_final_stats=0 -artifact_prefix="$WORK/" "$WORK/$name.corpus" > "$WORK/$name.log" 2>&1; then
    echo "ok - $name: $(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$WORK/$name.log" | tail -1)"
  else
    tail -40 "$WORK/$name.log"; echo "FAIL - $name"; failures=$((failures + 1))
  fi
}
build_and_run fuzz_flags "$SRC/tests/fuzz/fuzz_flags.cc" "$SRC/src/base/flags.cc" "$SRC/src/base/status.cc" \
  "$SRC/src/base/text.cc"
build_and_run fuzz_text "$SRC/tests/fuzz/fuzz_text.cc" "$SRC/src/base/text.cc" "$SRC/src/base/table.cc"
build_and_run fuzz_jsonrpc "$SRC/tests/fuzz/fuzz_jsonrpc.cc" "$SRC/src/mcp/line_reader.cc" "$SRC/src/mcp/json_rpc.cc"
LIBS="-lsqlite3" build_and_run fuzz_chunks "$SRC/tests/fuzz/fuzz_chunks.cc" \
  "$SRC/src/store/event_chunk.cc" "$SRC/src/store/window_rule.cc" "$SRC/src/store/ops.cc" \
  "$SRC/src/store/sqlite_util.cc" \
  "$SRC/src/base/status.cc"

# Seeds for the stacks decoders: byte 0 mode, int32 first line, int32 offset, then the data.
hex() { printf "$(printf '%s' "$1" | sed 's/../\\x&/g')"; }
mkdir -p "$WORK/seeds_stacks" "$WORK/seeds_elf"
n=0
while read -r version first table _; do
  mode=$(( ${version#3.} - 10 ))
  { hex "0$mode"; hex "$(printf '%08x' "$first" | sed 's/\(..\)\(..\)\(..\)\(..\)/\4\3\2\1/')"
    hex 10000000; hex "$table"; } > "$WORK/seeds_stacks/linetable_$n"
  n=$((n + 1))
done < "$SRC/src/symbolize/testdata/linetables.txt"
# _Py_DebugOffsets of 3.13.0 final: cookie, PY_VERSION_HEX, not free-threaded, 68 offsets.
{ hex 04; hex 0000000000000000; printf 'xdebugpy'; hex f0000d0300000000; hex 0000000000000000
  for i in $(seq 2 69); do hex "$(printf '%02x' $(( (i * 8) % 120 )))00000000000000"; done
} > "$WORK/seeds_stacks/debug_offsets_313"
{ hex 05; hex 0000000003000000
  printf 'cudaStreamSynchronize|cuda_runtime.cpp|libcudart.so.12\n'
  printf '_PyEval_EvalFrameDefault||libpython3.11.so.1.0\nmain|main.c|python3.11'
  hex 01; printf 'step|/x/train.py|\n<module>|/x/train.py|'; } > "$WORK/seeds_stacks/frames"
# Small ELF files: a shared object with DWARF, the same stripped, an object file.
printf 'int gw_seed_counter;\nint gw_seed_add(int x) { return x + gw_seed_counter; }\n'\
'int gw_seed_twice(int x) { return gw_seed_add(x) * 2; }\n' > "$WORK/seed.c"
ELF_FLAGS=(-O1 -fPIC -shared -nostdlib -Wl,--build-id=none -Wl,-z,norelro -Wl,-z,noseparate-code
           -Wl,-z,max-page-size=0x1000)
cc -g "${ELF_FLAGS[@]}" -o "$WORK/seeds_elf/tiny_dwarf.so" "$WORK/seed.c" &&
  cc -s "${ELF_FLAGS[@]}" -o "$WORK/seeds_elf/tiny_stripped.so" "$WORK/seed.c" &&
  cc -g -O1 -c -o "$WORK/seeds_elf/tiny.o" "$WORK/seed.c" ||
  { echo "FAIL - could not build the ELF seeds"; failures=$((failures + 1)); }

FUZZ_SECONDS=20 SEEDS="$WORK/seeds_stacks" LIBS="-ldw -lelf" build_and_run fuzz_stacks \
  "$SRC/tests/fuzz/fuzz_stacks.cc" "$SRC/src/symbolize/python_code.cc" \
  "$SRC/src/symbolize/symbolizer.cc" "$SRC/src/elf/elf_file.cc" \
  "$SRC/src/symbolize/process_maps.cc" "$SRC/src/sources/stacks/python_offsets.cc" \
  "$SRC/src/base/status.cc" "$SRC/src/base/proc_status.cc"
FUZZ_SECONDS=20 SEEDS="$WORK/seeds_elf" MAX_LEN=16384 LIBS="-ldw -lelf" build_and_run fuzz_elf \
  "$SRC/tests/fuzz/fuzz_elf.cc" "$SRC/src/elf/elf_file.cc" \
  "$SRC/src/discover/elf_symbols.cc" "$SRC/src/base/status.cc"
echo "fuzz: $failures failure(s)"
[ "$failures" -eq 0 ]
