#!/usr/bin/env bash
# A full disk (issue 12, high): `gpuwhy trace` into an 8 MiB tmpfs while the simulated training
# loop makes ~10 k events/s.
#   1. without --max-db: the trace stops with a clear message and exit 1, prints its summary
#      with the unwritten events as drops (store_write_failed), and the session is closed in the
#      file (wall_stop_ns, drops) so readers see the recording is incomplete;
#   2. with --max-db 4M: the cap holds for the database and its WAL together (sampled while it
#      runs), nothing fails, old rows are pruned.
# Usage: full_disk_e2e.sh GPUWHY SIM_BIN_DIR
set -uo pipefail
GPUWHY=$1
SIM_BIN=$2
. "$(dirname "$0")/lib.sh"

e2e_require_root full_disk_e2e
e2e_workdir full_disk_e2e
SMALL=$WORK/small
mkdir "$SMALL"
mount -t tmpfs -o size=8m gw_full_disk "$SMALL" || { echo "FAIL - mount tmpfs"; exit 1; }
trap 'for p in $PIDS; do kill "$p" 2>/dev/null; done; umount "$SMALL"; rm -rf "$WORK"' EXIT

# loop SECONDS: the simulated job, heavy on CUDA calls (~10 k events/s here).
loop() {
  "$SIM_BIN/gw_train_loop" --duration "$1" --workers 2 --kernels-per-step 64 --kernel-us 100 \
    > /dev/null 2>&1 &
  LOOP=$!; PIDS="$PIDS $LOOP"
}

# ---- 1. no cap: the disk fills ---------------------------------------------------------------
DB=$SMALL/full.db
"$GPUWHY" trace --duration 40s --db "$DB" > "$WORK/t1.out" 2>&1 &
TRACE=$!; PIDS="$PIDS $TRACE"
wait_for_line "$WORK/t1.out" "tracing into" 30 || fail "trace did not start: $(cat "$WORK/t1.out")"
loop 35
start=$(date +%s)
wait "$TRACE"; rc=$?
took=$(( $(date +%s) - start ))
kill "$LOOP" 2>/dev/null; wait "$LOOP" 2>/dev/null
grep -v '^\[' "$WORK/t1.out"
[ $rc -eq 1 ] && [ "$took" -lt 35 ] && pass "trace stops when the disk is full (exit 1 after ${took}s)" \
  || fail "full disk: rc=$rc after ${took}s"
grep -q "gpuwhy: error: recording stopped: .*free space there" "$WORK/t1.out" \
  && pass "clear message with a hint" || fail "no clear message"
lost=$(sed -nE 's/.*store_write_failed=([0-9]+).*/\1/p' "$WORK/t1.out")
[ "${lost:-0}" -gt 0 ] && grep -qE "^gpuwhy trace: .* events, [1-9][0-9,]* drops" "$WORK/t1.out" \
  && pass "summary counts the unwritten events as drops ($lost)" || fail "summary drops: $lost"
row=$(q "$DB" "SELECT wall_stop_ns IS NOT NULL, drops, events, drops_detail LIKE '%store_write_failed%' FROM sessions ORDER BY id DESC LIMIT 1")
IFS=, read -r closed drops events flagged <<< "$row"
[ "$closed" = "1" ] && [ "$flagged" = "1" ] && [ "${drops:-0}" -ge "${lost:-1}" ] \
  && pass "session closed in the file with its drops ($drops of $events)" || fail "session row: $row"
rows=$(q "$DB" "SELECT COUNT(*) FROM event_rows")
[ "${rows:-0}" -gt 0 ] && [ "$((rows + lost))" -le "$events" ] \
  && pass "what was written is readable ($rows rows; $rows + $lost lost <= $events captured)" \
  || fail "rows $rows, lost $lost, events $events"
rm -f "$SMALL"/*

# ---- 2. --max-db 2M on the same disk: the cap holds, WAL included -------------------------
DB=$SMALL/capped.db
"$GPUWHY" trace --duration 16s --max-db 2M --db "$DB" > "$WORK/t2.out" 2>&1 &
TRACE=$!; PIDS="$PIDS $TRACE"
wait_for_line "$WORK/t2.out" "tracing into" 30 || fail "trace did not start: $(cat "$WORK/t2.out")"
loop 14
max=0
while kill -0 "$TRACE" 2>/dev/null; do
  used=$(cat "$DB" "$DB-wal" 2>/dev/null | wc -c)
  [ "$used" -gt "$max" ] && max=$used
  sleep 0.1
done
wait "$TRACE"; rc=$?
kill "$LOOP" 2>/dev/null; wait "$LOOP" 2>/dev/null
grep -v '^\[' "$WORK/t2.out"
[ $rc -eq 0 ] && ! grep -q "store_write_failed=[1-9]" "$WORK/t2.out" \
  && pass "--max-db 2M on an 8 MiB disk: no failed write" || fail "--max-db: rc=$rc"
limit=$((2 * 1024 * 1024 * 11 / 10))
[ "$max" -le "$limit" ] && pass "database + WAL stayed under the cap (peak $max bytes)" \
  || fail "database + WAL peaked at $max bytes (cap 2 MiB)"
row=$(q "$DB" "SELECT events, (SELECT COUNT(*) FROM event_rows) FROM sessions ORDER BY id DESC LIMIT 1")
IFS=, read -r events rows <<< "$row"
[ "${rows:-0}" -gt 0 ] && [ "$rows" -lt "${events:-0}" ] \
  && pass "old rows pruned ($rows of $events kept)" || fail "pruning: $row"

e2e_finish full_disk_e2e
