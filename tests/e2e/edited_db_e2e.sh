#!/usr/bin/env bash
# A recording someone edited (issue 32 items 5 and 8): extreme timestamps in one event chunk (the
# red team's `UPDATE event_chunks SET ts=9223372036854775807…`), a chunk number near 2^63, a
# session that began at 0 or at INT64_MAX, rollups, per-second counts, snapshots, GPU samples and
# process lifetimes at the edges of int64. Every reader — explain (text, --json, --from 0),
# report, export (Perfetto, folded) and MCP explain — must answer or refuse with a message, within
# a time limit and without growing past a memory bound; in the sanitizer build any signed
# overflow aborts (UBSan), so this suite also runs the overflow sites there.
# Usage: edited_db_e2e.sh GPUWHY
set -uo pipefail
GPUWHY=$1
. "$(dirname "$0")/lib.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
BASE=$WORK/base.db
# 30 s of demo (not the default 120 s): every reader runs 40 times, under ASan too.
"$GPUWHY" demo cpu-contention --duration 30s --keep "$BASE" > /dev/null 2>&1 || { echo "FAIL - demo --keep"; exit 1; }
MAX=9223372036854775807
MIN=-9223372036854775807
declare -A EDITS=(
  [chunk-ts-max]="UPDATE event_chunks SET ts = $MAX - 1000000000, last_ts = $MAX WHERE chunk = 2"
  [chunk-ts-wraps]="UPDATE event_chunks SET ts = $MAX - 1000, last_ts = $MAX WHERE chunk = 2"
  [chunk-ts-min]="UPDATE event_chunks SET ts = $MIN, last_ts = $MIN + 1000 WHERE chunk = 3"
  [chunk-number]="UPDATE event_chunks SET chunk = $MAX - 5 WHERE chunk = 4"
  [session-at-0]="UPDATE sessions SET wall_start_ns = 0; UPDATE event_chunks SET ts = 1500000000000000000, last_ts = 1500000000097000000 WHERE chunk = 2"
  [session-at-max]="UPDATE sessions SET wall_start_ns = $MAX, wall_stop_ns = $MIN"
  [rollups]="UPDATE OR IGNORE thread_rollups SET sec = $MAX WHERE tid % 2 = 0; UPDATE OR IGNORE thread_rollups SET sec = $MIN, runq_ns = $MAX WHERE tid % 2 = 1"
  [op-seconds]="UPDATE OR IGNORE op_seconds SET sec = $MAX WHERE pid % 2 = 0; UPDATE OR IGNORE op_seconds SET sec = $MIN, count = $MAX, total_ns = $MAX WHERE pid % 2 = 1"
  [snapshots]="UPDATE OR IGNORE system_snapshots SET ts = $MAX, wall_ns = $MIN WHERE ts = (SELECT MAX(ts) FROM system_snapshots); UPDATE OR IGNORE system_snapshots SET ts = $MIN WHERE ts = (SELECT MIN(ts) FROM system_snapshots)"
  [processes]="UPDATE processes SET first_ts = $MIN, exit_ts = $MAX"
)
MCP_EXPLAIN='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"explain","arguments":{}}}'
# run NAME CMD...: at most 60 s and (outside the sanitizer build, whose shadow memory is
# virtual) 2 GiB of memory; an exit by signal (abort, bad_alloc, UBSan) fails.
run() {
  local name=$1; shift
  local rc
  if [ -n "${GW_SANITIZED:-}" ]; then
    timeout 60 "$@" > "$WORK/out" 2>&1 < "${STDIN:-/dev/null}"; rc=$?
  else
    (ulimit -v 2097152; timeout 60 "$@" > "$WORK/out" 2>&1 < "${STDIN:-/dev/null}"); rc=$?
  fi
  if [ "$rc" -lt 3 ]; then
    pass "$name: exit $rc$( [ "$rc" -ne 0 ] && printf ' (%s)' "$(grep -m1 'error' "$WORK/out" | cut -c1-110)")"
  else
    fail "$name: exit $rc: $(grep -m3 -E 'runtime error|error|terminate|what' "$WORK/out" | cut -c1-300)"
  fi
}
printf '%s\n' "$MCP_EXPLAIN" > "$WORK/mcp.in"
for edit in "${!EDITS[@]}"; do
  DB=$WORK/$edit.db
  cp "$BASE" "$DB"
  python3 -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.executescript(sys.argv[2]); db.commit()' \
    "$DB" "${EDITS[$edit]}" || { fail "$edit: the edit did not apply"; continue; }
  # The sanitizer build (slow) runs the readers whose code differs; the plain build all of them.
  [ -z "${GW_SANITIZED:-}" ] && run "$edit: explain" "$GPUWHY" explain --db "$DB"
  run "$edit: explain --from 0 --json" "$GPUWHY" explain --db "$DB" --from 0 --json
  run "$edit: report" "$GPUWHY" report --db "$DB" -o "$WORK/$edit.html"
  run "$edit: export perfetto" "$GPUWHY" export --db "$DB" --format perfetto -o "$WORK/$edit.pftrace"
  [ -z "${GW_SANITIZED:-}" ] && run "$edit: export folded" "$GPUWHY" export --db "$DB" --format folded -o "$WORK/$edit.folded"
  STDIN=$WORK/mcp.in run "$edit: mcp explain" "$GPUWHY" mcp --db "$DB"
  rm -f "$WORK/$edit".*
done
# The red team's edit: the session's real rows are still explained, not an empty window at 292 y.
DB=$WORK/again.db
cp "$BASE" "$DB"
python3 -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.executescript(sys.argv[2]); db.commit()' \
  "$DB" "${EDITS[chunk-ts-max]}"
"$GPUWHY" explain --db "$BASE" --json > "$WORK/base.json" 2>&1
"$GPUWHY" explain --db "$DB" --json > "$WORK/edited.json" 2>&1
python3 - "$WORK/base.json" "$WORK/edited.json" <<'PY' && pass "chunk-ts-max: explain still reports the recording's own window and top finding" || fail "chunk-ts-max: $(head -c 400 "$WORK/edited.json")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["window"]["to_ns"] == b["window"]["to_ns"], (a["window"], b["window"])
top = lambda r: r["findings"][0]["rule"] if r["findings"] else None
assert top(a) == top(b), (top(a), top(b))
PY
e2e_finish edited_db_e2e
