#!/usr/bin/env bash
# Configures (once) and builds gpuwhy with one line of progress instead of cmake's and make's
# several hundred (`make demo`). Everything they print goes to BUILD_DIR/build.log, which is
# named, with its last lines, when the build fails.
#
# Usage: scripts/build_quiet.sh [BUILD_DIR [JOBS]]
set -uo pipefail

build=${1:-build}
jobs=${2:-$(nproc)}
mkdir -p "$build" || exit 1
log="$build/build.log"
: > "$log" || exit 1

fail() {
  local rc=$1
  [ -t 1 ] && printf '\n'
  echo "build failed (exit $rc); the last lines of $log:"
  tail -n 25 "$log" | sed 's/^/  /'
  echo "the whole output of cmake and make is in $log"
  exit "$rc"
}

line() { printf '\rbuilding gpuwhy in %s/: %-5s (output in %s)' "$build" "$1" "$log"; }

if [ ! -f "$build/CMakeCache.txt" ]; then
  [ -t 1 ] && line "configuring"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >> "$log" 2>&1 || fail $?
fi
[ -t 1 ] || echo "building gpuwhy in $build/ (output in $log)"
cmake --build "$build" -j"$jobs" >> "$log" 2>&1 &
pid=$!
if [ -t 1 ]; then
  # The newest "[ NN%]" make printed, once a second.
  while kill -0 "$pid" 2> /dev/null; do
    pct=$(grep -o '^\[ *[0-9]*%\]' "$log" | tail -n 1 | tr -d '[] ')
    line "${pct:-0%}"
    sleep 1
  done
fi
wait "$pid" || fail $?
if [ -t 1 ]; then
  line "done"
  printf '\n'
else
  echo "built $build/gpuwhy"
fi
