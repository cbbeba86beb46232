#!/usr/bin/env bash
# Untrusted text on every output path (issue 12, output): a recording whose process names and
# command lines hold terminal escapes (OSC retitle + BEL, CSI clear, a C1 CSI, CR) and a byte
# that is not UTF-8. explain (text and --json), diff, and query (text, --csv, --json) must print
# none of the control bytes, and every output must be valid UTF-8 (JSON must parse).
# Usage: output_safety_e2e.sh GPUWHY
set -uo pipefail
GPUWHY=$1
. "$(dirname "$0")/lib.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
DB=$WORK/evil.db
"$GPUWHY" demo cpu-contention --keep "$DB" > /dev/null 2>&1 || { echo "FAIL - demo --keep"; exit 1; }
python3 - "$DB" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
evil = b"pwned\x1b]0;owned\x07\x1b[2J\xc2\x9b31m\rX\xff".decode("utf-8", "surrogateescape")
# Text columns hold bytes as the tracer stored them: write them as blobs cast to text.
raw = evil.encode("utf-8", "surrogateescape")
db.execute("UPDATE processes SET name = CAST(? AS TEXT) || name, cmdline = CAST(? AS TEXT) || "
           "COALESCE(cmdline, '')", (raw, raw))
db.commit()
PY
check() {  # NAME FILE [json]
  if python3 - "$2" "${3:-}" <<'PY'
import json, sys
data = open(sys.argv[1], "rb").read()
bad = [b for b in (b"\x1b", b"\x07", b"\xc2\x9b", b"\r") if b in data]
text = data.decode("utf-8")  # raises on invalid UTF-8
if sys.argv[2] == "json":
    json.loads(text)
assert "pwned" in text, "the evil name is not in the output at all"
sys.exit(1 if bad else 0)
PY
  then pass "$1: no control bytes, valid UTF-8${3:+, parses}"; else fail "$1: $(head -c 300 "$2" | od -c | head -5)"; fi
}
"$GPUWHY" explain --db "$DB" --since 1h > "$WORK/explain.txt" 2>&1
check "explain" "$WORK/explain.txt"
"$GPUWHY" explain --db "$DB" --since 1h --json > "$WORK/explain.json" 2>&1
check "explain --json" "$WORK/explain.json" json
"$GPUWHY" diff "$DB" > "$WORK/diff.txt" 2>&1 || true
grep -q "pwned" "$WORK/diff.txt" && check "diff" "$WORK/diff.txt" || pass "diff prints no process names"
SQL="SELECT name, cmdline FROM processes"
"$GPUWHY" query --db "$DB" "$SQL" > "$WORK/q.txt" 2>&1
check "query" "$WORK/q.txt"
"$GPUWHY" query --db "$DB" --csv "$SQL" > "$WORK/q.csv" 2>&1
check "query --csv" "$WORK/q.csv"
"$GPUWHY" query --db "$DB" --json "$SQL" > "$WORK/q.json" 2>&1
check "query --json" "$WORK/q.json" json
e2e_finish output_safety_e2e
