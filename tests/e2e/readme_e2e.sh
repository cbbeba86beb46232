#!/usr/bin/env bash
# Keeps the README's examples true: each block after a `<!-- readme-example: NAME -->` marker
# must be exactly what the command prints today (its first lines).
set -uo pipefail
GPUWHY=$1
MAKE_FIXTURE=$2
ROOT=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

block() {  # marker name → the fenced block after it
  awk -v m="<!-- readme-example: $1 -->" '
    $0 == m {found = 1; next}
    found && /^```/ {if (inside) exit; inside = 1; next}
    inside {print}' "$ROOT/README.md"
}

check() {  # name, file with the command's output
  block "$1" > "$tmp/want"
  local n
  n=$(wc -l < "$tmp/want")
  if [ "$n" -eq 0 ]; then echo "FAIL - README has no block for $1"; failures=$((failures + 1)); return; fi
  head -n "$n" "$2" > "$tmp/got"
  if diff -u "$tmp/want" "$tmp/got"; then echo "ok - README example: $1"; else
    echo "FAIL - README example '$1' differs from the command's output"; failures=$((failures + 1)); fi
}

"$GPUWHY" demo cpu-contention > "$tmp/demo.out" 2>/dev/null
check "demo cpu-contention" "$tmp/demo.out"

"$MAKE_FIXTURE" "$tmp/f.db"
"$GPUWHY" query --db "$tmp/f.db" "SELECT pn . name as process , COUNT ( * ) as context_switches , SUM ( duration_ns ) / 1e9 as total_off_cpu_sec , MAX ( duration_ns ) / 1e6 as worst_stall_ms FROM events e JOIN process_names pn ON e . pid = pn . pid WHERE op = 'sched_switch' AND timestamp > ( SELECT MAX ( timestamp ) - 120000000000 FROM events ) GROUP BY pn . name ORDER BY total_off_cpu_sec DESC LIMIT 10 ;" > "$tmp/q.out" 2>/dev/null
check "query step2" "$tmp/q.out"

if [ $failures -eq 0 ]; then echo "readme e2e: all passed"; exit 0; fi
echo "readme e2e: $failures failed"; exit 1
