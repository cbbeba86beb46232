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

block() {  # [kind] name → the fenced block after its marker (kind: example, the default, or sql)
  local kind=example
  if [ $# -eq 2 ]; then kind=$1; shift; fi
  awk -v m="<!-- readme-$kind: $1 -->" '
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
# The SQL the README shows is the SQL run: its `gpuwhy query "…"` block, quotes taken off.
sql=$(block sql "query step2" | sed -e '1s/^gpuwhy query "//' -e '$s/"$//')
if [ -z "$sql" ]; then echo "FAIL - README has no SQL for query step2"; failures=$((failures + 1)); fi
"$GPUWHY" query --db "$tmp/f.db" "$sql" > "$tmp/q.out" 2>/dev/null
check "query step2" "$tmp/q.out"

# Every command and flag the README and docs/*.md write exists in that command's --help.
python3 "$ROOT/tests/e2e/docs_flags.py" "$GPUWHY" "$ROOT" || failures=$((failures + 1))

if [ $failures -eq 0 ]; then echo "readme e2e: all passed"; exit 0; fi
echo "readme e2e: $failures failed"; exit 1
